// Package panics turns a panic in one goroutine of a session into an
// error of that session.
//
// sluice serves many sessions in one process, and a panic that escapes a
// goroutine ends the process: every session on every route, the admin
// console and the HTTP API with it. Each goroutine that runs code on a
// session's behalf (the pumps and the observers and rewriters they call,
// the protocol front ends, the delay lines' writers) defers Catch at its
// top, so a panic there returns as an *Error instead, carrying the panic
// value and the goroutine's stack. The session's owner then logs it,
// counts it, sends the client the protocol's error and closes the
// session's sockets, and nothing else is touched.
//
// Catch recovers only in the goroutine it is deferred in; a goroutine
// started by recovered code needs its own. A runtime.Goexit is not a
// panic and is not caught. The package holds no state.
package panics

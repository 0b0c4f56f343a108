// Package wire holds what every protocol front end shares with the proxy:
// the shape of an opened connection and of a byte observer.
//
// A front end (wire/pg, wire/mysql) runs the protocol's opening exchange
// itself, because only it knows what to answer (SSLRequest, a server
// greeting, an error when the upstream is down). It then hands the proxy
// a Conn: the two sockets, possibly wrapped in TLS, and one Observer per
// direction. From then on the proxy's pumps move the bytes and the
// observers only watch them: they never change, hold back or re-encode a
// byte, so forwarding stays byte-exact whatever the observer does.
//
// The one exception is opt-in per session: an observer that is also a
// Rewriter returns the bytes to forward in place of each chunk. Front
// ends install one only for the sessions of users a Forwarder names
// (data-port forwarding of CREATE/ALTER USER ... RESOURCE POOL); every
// other session relays byte for byte and pays nothing for the
// possibility. The session's byte counters count what the client sent.
// Holdback is the framing such a rewriter shares across protocols: it
// passes every message through untouched except the few it holds back
// whole, across chunks, to inspect and perhaps replace.
//
// Observers are called from one goroutine per direction, with every byte
// of that direction exactly once and in order, in chunks of any size and
// alignment. An observer that finds the stream malformed returns an
// error; if it is a *Fatal, the proxy stops relaying, sends Reply to the
// client and closes both sides. Other sessions are never affected.
package wire

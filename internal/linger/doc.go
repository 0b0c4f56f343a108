// Package linger is the lingering close of a server that ends a
// connection while its client is still sending: after writing its last
// answer (a FATAL ErrorResponse, say), the server half-closes the
// connection and reads and discards what the client still sends, for a
// while, before closing. Closing a socket with unread input makes the
// kernel reset the connection, and a client that is still writing then
// fails on its write without ever reading the answer; with the lingering
// close it finishes writing, reads the answer and then end of file.
//
// Drain is bounded three ways: a byte limit, a timeout on the given
// clock, and its context. It uses no kernel deadline derived from the
// clock: on timeout it sets a read deadline in the distant past, which
// only unblocks the read. It is safe to call from the goroutine that
// owns the connection; nothing else may read it meanwhile.
package linger

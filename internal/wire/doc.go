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
// The exceptions are opt-in per session: an observer that is also a
// Rewriter returns the bytes to forward in place of each chunk. Front
// ends install one for the sessions of users a Forwarder names
// (data-port forwarding of CREATE/ALTER USER ... RESOURCE POOL) and,
// given an Admitter, for the others (admission, below: bytes pass
// unchanged, later or never); a session with neither relays byte for
// byte and pays nothing for the possibility. The session's byte counters
// count what the client sent.
// Holdback is the framing such a rewriter shares across protocols: it
// passes every message through untouched except the few it holds back
// whole, across chunks, to inspect and perhaps replace.
//
// # Admission
//
// A front end given an Admitter (the workload manager) holds the first
// request of each transaction until its pool has a slot (GaussDB's
// active_statements). The hold point is the client observer, installed
// as a Rewriter for those sessions: the proxy's client pump calls
// Rewrite before it writes a chunk upstream, and Rewrite blocks in
// Gate.Wait while the request waits, returning only the bytes that may
// go. So no byte of a held request reaches the server before admission,
// and the client pump stops reading the client meanwhile: backpressure,
// with at most one chunk in sluice. The server pump keeps running, so
// the server's answers to earlier requests, notices and the slot's
// release never wait on the client direction.
//
// Gate is the per-session state both observers share (its mutex is
// taken only before a session's): the client side records each
// request's start (Start) before its bytes go and waits (Wait); the
// server side records each final answer (Answered), whose transaction
// status keeps or gives back the slot. A session holds at most one slot,
// is never held inside a transaction, and gives its slot back when it
// ends (Gate.Close, from Conn.Close). The gate records on the session
// when it sits idle inside a transaction (Gate.Track), which the
// workload manager shows and bounds (a pool's idle_in_transaction); a
// request that begins as the manager ends the session for it is held
// and never sent.
//
// The client pump does not read while it waits, so Wait watches the
// client socket meanwhile (Gate.SetPeer; a duplicate descriptor in the
// runtime's poller, never a byte consumed): a client that resets, or
// ends its stream with nothing unread but its goodbye (Gate.SetFarewell:
// PostgreSQL Terminate, MySQL COM_QUIT), ends the wait at once with
// ErrClientGone, and the front end ends the session and its server
// connection. A client with more requests unread, even after its end of
// stream, is still there. Once admitted, Wait peeks at the socket again:
// a client gone gets no slot and its request is never sent.
//
// A refused request (a cancel, queue_timeout, a blocktime abort rule) is
// discarded whole and answered by sluice in the protocol's own way. The
// answer must not interleave with the server's bytes, so it goes through
// the down direction: the front end's Injector (Conn.Inject) hands it to
// the proxy's server pump, which observes and writes it as if the server
// had sent it, between two server messages, once the server has answered
// every earlier request. The proxy wakes that pump for it (a read
// deadline in the past, or a resume when it is parked). Answers is the
// queue both front ends keep for their Injector; each passes it the
// protocol's test of "between messages, earlier requests answered".
//
// Observers are called from one goroutine per direction, with every byte
// of that direction exactly once and in order, in chunks of any size and
// alignment. An observer that finds the stream malformed returns an
// error; if it is a *Fatal, the proxy stops relaying, sends Reply to the
// client and closes both sides. Other sessions are never affected.
package wire

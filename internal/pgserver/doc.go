// Package pgserver serves the PostgreSQL v3 wire protocol on one client
// connection, leaving the statements to a Handler. It is the one server
// loop behind sluice's admin console (package admin) and the lab's
// embedded database (package litepg); it sits on pgproto3.Backend.
//
// # What it owns
//
// Startup: SSLRequest and GSSENCRequest are declined with 'N' (the
// client may go on in plain text); a CancelRequest is handed to
// Backend.Cancel and the connection closed; a client asking for protocol
// 3.2 or for _pq_ extensions gets NegotiateProtocolVersion and is served
// as 3.0. A packet without a user name is refused with FATAL 28000, then
// Backend.Check may refuse it with its own FATAL error.
//
// Authentication (Auth): trust, cleartext password, MD5 or
// SCRAM-SHA-256. Auth.User, if set, is the only name accepted: trust
// refuses another with FATAL 28000 `role "x" does not exist`; the
// password methods run the whole exchange and fail with 28P01, like a
// wrong password, so user names cannot be probed (SCRAM runs an unknown
// user against decoy credentials). Config.AuthTimeout bounds startup and
// authentication as a socket deadline (clock.SocketDeadline: a kernel
// deadline is wall time, never the injected clock's).
//
// Then Backend.Open opens the session; the server sends AuthenticationOk,
// the session's ParameterStatus list, BackendKeyData with its cancel key
// and ReadyForQuery.
//
// # The state machine
//
// After startup the connection is in one of two states, serving or
// skipping. Serving: a Query goes to Handler.Query and is always
// answered with ReadyForQuery, after an ErrorResponse if it failed;
// Parse, Bind, Describe, Execute and Close go to the handler's method of
// the same name. A handler error in the extended protocol is sent as an
// ErrorResponse (flushed at once) and moves the connection to skipping,
// where every message but Sync, Flush and Terminate is discarded. Sync,
// in either state, calls Handler.Sync, sends ReadyForQuery with
// Handler.TxStatus and returns to serving. CopyData, CopyDone and
// CopyFail outside a COPY (left over from one that failed) are ignored;
// a FunctionCall gets 0A000. Terminate ends the session cleanly.
//
// The handler reads its own input only for COPY FROM STDIN, through
// Conn.Receive; everything else it reads comes from the loop.
//
// # Invariants
//
//   - Every Query is answered with exactly one ReadyForQuery; every Sync
//     with exactly one.
//   - A handler error in the extended protocol skips to Sync.
//   - A *ConnError (any failed read or write of the connection) ends the
//     session and is never sent to the client.
//   - Messages reach the client in the order they were sent, whether
//     through Send (encoded by pgproto3) or WriteMessage (encoded in
//     place, for DataRow and CopyData).
//   - Arbitrary client bytes never panic the server: a message that does
//     not decode, or of an unknown type, ends the connection with FATAL
//     08P01.
//
// # Limits
//
// A message announcing a body over Config.MaxMessage (default 64 MiB)
// ends the connection with FATAL 54000 (program_limit_exceeded); the
// server then half-closes and discards what the client still sends, for
// up to 5 s (package linger), so a client still writing the message
// reads the error rather than a reset. Output is written once 64 KiB are
// buffered and at every Flush, Sync and ReadyForQuery.
//
// # Concurrency
//
// Serve runs on the connection's goroutine and calls the Handler from it
// only, so a Handler needs no locks for its own state. Backend.Check,
// Open and Cancel are called from many connections' goroutines at once;
// Cancel in particular runs while the target session's Handler is busy,
// so what it touches must be locked by the Backend. pgserver holds no
// locks and no global state.
package pgserver

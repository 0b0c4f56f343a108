// Package pg is the PostgreSQL front end of a route: it runs the opening
// exchange of the v3 protocol with the client and then watches the
// session's bytes, telling the session registry which statement each
// byte belongs to, when each statement starts and ends, how many rows it
// reported and how it ended.
//
// # Observe, don't re-encode
//
// After the StartupMessage, sluice never decodes a message into a value
// and writes it out again. The proxy's pumps move raw bytes; the two
// observers of a session (client to server and server to client) only
// look at them on the way, in whatever chunks the sockets deliver. Each
// observer is a small framing machine: it collects the five-byte header
// of a message (type byte, length), which may arrive split across chunks,
// and then skips the payload by count. Only the messages whose content
// matters are buffered, and only a capped prefix of them: Query (the SQL,
// up to Options.MaxSQL), Parse (name and SQL), Bind, Execute and Close
// (names), CommandComplete (the tag), ErrorResponse (the SQLSTATE and the
// severity), ReadyForQuery and BackendKeyData. A DataRow of a gigabyte
// costs one header and a few thousand subtractions; the steady path
// allocates nothing per message (the registry allocates per statement).
// Forwarding is therefore byte-exact whatever the observer concludes.
//
// # The state machine
//
// The server answers requests in the order the client sent them, so the
// two observers share one FIFO of requests in flight. The client observer
// appends; the server observer attributes every message to the oldest
// entry and removes entries as they are answered:
//
//   - Query begins a statement (the whole string, however many commands
//     it holds, is one statement). It ends at ReadyForQuery, with the sum
//     of the row counts of its CommandCompletes (-1 if none had one) and
//     the SQLSTATE of its ErrorResponse, if any.
//   - Parse records name -> SQL; Bind records portal -> that SQL. Neither
//     begins a statement.
//   - Execute begins a statement whose SQL is the prepared statement's
//     text. It ends at its own CommandComplete, EmptyQueryResponse,
//     PortalSuspended or ErrorResponse. Several Executes may be in flight
//     (pipelining, pgx batches): each response goes to the oldest. After
//     an error the server skips the rest of the batch up to Sync; those
//     Executes end, at the batch's ReadyForQuery, with that error.
//   - Sync and FunctionCall begin no statement but are queued, because
//     each earns a ReadyForQuery.
//   - COPY belongs to its statement: server copy messages like any
//     response, client CopyData to the statement the server opened the
//     copy for. A replication connection's START_REPLICATION is a Query
//     whose copy lasts for the whole stream: one long statement.
//   - Outcomes: no error is OK, SQLSTATE 57014 (query_canceled) is
//     Cancelled, any other error Failed. A FATAL or PANIC error ends every
//     statement in flight with its code.
//
// Everything the server sends before its first ReadyForQuery
// (authentication, ParameterStatus, BackendKeyData) is the startup phase
// and belongs to no statement.
//
// # What is attributed to which statement
//
// A statement's byte counts are whole messages, headers included, so they
// match what the client wrote and read. Messages that are not themselves
// a statement are attributed to a neighbour:
//
//   - Client: Parse, Bind, Describe, Close and Flush wait for the next
//     statement to begin (normally the Execute they prepare). A Sync goes,
//     with anything still waiting, to the last statement executed in its
//     batch; a batch that executed nothing (a prepare round trip) leaves
//     its bytes waiting for the next statement. Authentication responses,
//     FunctionCall and Terminate belong to no statement.
//   - Server: every message goes to the oldest statement in flight; the
//     ReadyForQuery closing a batch goes to the batch's last statement;
//     answers to a batch that executed nothing, and anything arriving
//     when nothing is in flight (a NotificationResponse while idle), go to
//     the next statement.
//
// So apart from the startup phase, the last bytes of a session after its
// last statement, and authentication, every byte is counted exactly once.
// Attribution is decided per message, never per chunk: any chunking of
// the same streams gives the same records.
//
// # Cancel keys pass through
//
// sluice forwards the server's BackendKeyData unchanged, so the key a
// client holds is the upstream's. The server observer registers that key
// (process id and secret, 8 bytes in protocol 3.0, up to 260 in 3.2) with
// Session.SetCancelKey and installs a Canceler that opens its own
// connection to the upstream (TLS first when Options.UpstreamTLS is set,
// as libpq does) and sends a CancelRequest with it. A client's
// CancelRequest reaches Open on a new connection; Open finds the session
// with KeyLookup.ByCancelKey and cancels through that Canceler. The
// workload manager cancels the same way, through Registry.Cancel. An
// unknown key is dropped and the connection closed without an answer, as
// PostgreSQL does.
//
// # Errors
//
// A client message with a length below 4 or above Options.MaxMessage, or
// with a type no client sends, ends that session only: the client
// observer returns a *wire.Fatal whose Reply is a FATAL ErrorResponse
// (08P01) naming what was wrong. A malformed startup packet gets the same
// reply from Open; an unreachable upstream gets 08006 naming the upstream.
// Malformed server bytes are a plain error. No input makes a decoder
// panic; the fuzz targets hold the startup parser and the framing to that.
//
// # Data-port forwarding
//
// With Options.Forward set, a session whose user the Forwarder names gets
// a client observer that is also a wire.Rewriter (forward.go): after the
// first ReadyForQuery, each simple Query of at most wire.MaxForwardQuery bytes
// is shown whole to the Forwarder, and a statement it takes is replaced
// by a Query of the rest; a refused one by a DO block that makes the
// server raise the error (SQLSTATE kept), so ErrorResponse and
// ReadyForQuery come in order. The extended protocol (Parse), several
// statements in one Query, and longer Queries pass untouched. Every other
// session keeps the plain observers (with admission, below, when it is
// configured) and is relayed byte for byte.
//
// # Admission
//
// With Options.Admit set (the stack sets the workload manager), every
// session but a forwarding one gets a client observer that is also a
// wire.Rewriter (admit.go). A request is a Query, or an extended batch
// from its first message to its Sync; at its first byte, a session that
// holds no slot and whose last ReadyForQuery was 'I' holds the request
// back until its statement (the Query, or the batch's first Execute)
// begins and the workload manager admits it. A batch that reaches its
// Sync without an Execute (a prepare round trip) goes on without
// waiting, as does one whose messages before its first Execute pass 1
// MiB (then its bytes go upstream before admission). Pipelined requests
// share the session's one slot; the slot goes back at a ReadyForQuery
// 'I' that answers the last request in flight, while the client is not
// in the middle of a batch. 'T' and 'E' keep it, so a transaction is
// admitted once, at its start, and never held inside.
//
// A refused statement (a CancelRequest for the session, the console's
// cancel, a blocktime abort rule, queue_timeout) never reaches the
// server: its request is discarded, to the end of the Query or through
// the batch's Sync, and sluice sends ErrorResponse (ERROR, SQLSTATE
// 57014, "canceling statement due to user request" or the refusal's own
// message) and ReadyForQuery 'I' through the server pump once the server
// has answered every earlier request; the server observer takes them as
// the server's, so the records show the statement cancelled. The session
// goes on. A CancelRequest for a session whose statement is held goes no
// further: the session's Canceler ends the wait first (wire.Gate).
//
// A client that goes away while its request is held (a reset, or its end
// of stream with nothing unread but a Terminate) ends its session and
// its server connection at once (wire.Gate watches the socket); one that
// the workload manager ends for sitting idle in a transaction on its
// slot (a pool's idle_in_transaction) reads FATAL 25P03
// (MsgIdleInTransaction) after the server's last ReadyForQuery.
//
// Replication sessions (Session.Kind other than KindClient) never get
// a gate: see below.
//
// Lock order: the gate's mutex is taken before the session's only; the
// tracker's is never held while it is taken, nor while a wait blocks.
//
// # Traffic between database nodes
//
// The StartupMessage's replication parameter, read as the server reads
// it, sets the session's kind (Session.SetKind) before anything is
// relayed: exactly "database" is session.KindLogical (a logical
// walsender: pg_recvlogical, a subscription); a true boolean (true, on,
// yes, 1, a prefix of true or yes, any case) is session.KindReplication
// (a physical walsender, connected to no database); anything else is a
// client. A physical connection whose command begins with the word
// BASE_BACKUP becomes session.KindBaseBackup (pg_basebackup; its WAL
// stream, -X stream, is a second connection and stays
// KindReplication). The kind never goes back.
//
// Replication commands are simple Queries, so they are statements like
// any other: START_REPLICATION and BASE_BACKUP each begin at their Query
// and run until the ReadyForQuery after their copy (CopyBoth or
// CopyOut), so the whole stream is one long statement that exception
// rules see (elapsed time, bandwidth) and that a penalty demotes to the
// low class. A replication session is never held for admission: it gets
// no gate, its statements never ask for a slot and do not count in their
// pool's active_statements (holding START_REPLICATION would stall the
// standby and keep the slot for as long as it streams). A cancel of a
// running START_REPLICATION (an abort rule, the console) ends the stream
// with 57014; the standby's walreceiver exits and the standby connects
// again, at once or up to wal_retrieve_retry_interval (5 s by default)
// later, and streams on from where it was.
//
// # Round trips
//
// With Options.WhatIf set, every client session (not a replication one,
// nor a shard connection linked to its coordinator)
// feeds a whatif.Conn (whatif.go): the client observer reports each
// complete request message (Query, Parse, Bind, Describe, Execute,
// Close, Flush, Sync, FunctionCall; Query, Execute and FunctionCall run
// a statement), the server observer the first server chunk after a
// round trip began (the clock is read only then) and each ReadyForQuery
// after startup, idle when no request is left in flight, a transaction
// open on 'T' or 'E'. The client and upstream sockets' kernel RTT (rawconn.RTT) is
// sampled at most once a second. A request held for admission is seen
// when it arrives, so its wait counts as server time. The key is
// user, database and application_name as the StartupMessage gave them.
//
// # Shard connections of a distributed query
//
// A coordinator PostgreSQL whose tables are foreign tables on other
// servers (postgres_fdw) opens a connection per shard, and with
// postgres_fdw's application_name 'fdw %p' (the server option, or the
// setting postgres_fdw.application_name; PostgreSQL 15 expands %p to
// the coordinator backend's pid) the startup of each names the
// coordinator backend. With Options.Coordinators set (the stack sets the
// workload manager, which matches the application_name against the
// catalog setting distributed_application_name and looks the pid up in
// the cancel keys of every route's sessions), Open links the new
// session to that coordinator session (session.Session.Link) right
// after recording its identity, before anything is relayed: from then
// on each of its statements is a child of the coordinator's statement
// running when it begins, or of the one that ran last when none is
// (session.Session.Begin). An application_name that does not match, a
// pid no session has (a coordinator that does not pass through this
// sluice) or that several have leaves the session unlinked, without an
// error. Only client-kind sessions are linked. A linked session is
// never held for admission (it gets no gate): its statements run inside
// the coordinator's statement, which was admitted already, and holding
// them for a slot of their own could deadlock the distributed statement
// against itself.
//
// # Concurrency
//
// A Frontend is safe for concurrent use. Each observer runs in its pump's
// goroutine; the request FIFO they share is guarded by a mutex, taken when
// a request is queued or answered (a few times per statement) and, for the
// rare message no statement owns yet, per chunk of it. Streaming a result
// or a COPY takes no lock.
package pg

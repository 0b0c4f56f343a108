// Package admin is sluice's admin console: a PostgreSQL protocol (v3)
// server, so psql, pgx or any PostgreSQL driver can manage the workload
// manager with GaussDB's DDL, SET / SHOW, SQL over its views and
// commands that cancel or end sessions.
//
// Package pgserver serves the protocol (startup, authentication, the
// query protocols, error recovery to Sync, size limits); the console
// supplies its statement handling as a pgserver.Handler. Every statement
// is parsed by package ddl and run by the workload manager's catalog
// service (wlm.Service, behind the Statements interface), which owns all
// state; a connection keeps nothing but its prepared statements and portals, and
// the wlm.Actor (surface console, the authenticated user, the client's
// address) its statements run under, which the catalog service's audit log
// records. Connections are logged at DEBUG.
//
// Startup: SSL and GSS encryption requests are declined (the console is
// meant for loopback or a trusted network). A client asking for protocol
// 3.2 or for _pq_ extensions is answered with NegotiateProtocolVersion and
// served as 3.0. Authentication is SCRAM-SHA-256 against Options.Users
// (user name to password, from SLUICE_ADMIN_PASSWORD or the
// configuration file, read by the caller); an unknown user runs the same
// exchange with decoy credentials and fails with 28P01 like a wrong
// password, so user names cannot be probed. With AllowNoPassword user
// admin (DefaultUser) is trusted and any other name refused with FATAL
// 28000 `role "x" does not exist`, as PostgreSQL refuses an unknown role;
// the caller allows that only on a loopback address.
//
// Simple query protocol: each statement of a Query message runs in order;
// a statement that returns rows sends RowDescription and DataRows (text
// for SHOW and SELECT of literals; int8, float8 or text for SQL over the
// views; bool for the session functions), then CommandComplete with the
// statement's tag; notices
// (DROP ... IF EXISTS of a missing object) are NoticeResponses. The first
// error ends the message with an ErrorResponse carrying the SQLSTATE, the
// message, detail, hint and the 1-based character position of the
// offending token within the whole message, which psql shows as a caret.
// ReadyForQuery (always idle: the console has no transactions) follows.
//
// Extended protocol: Parse, Bind, Describe, Execute, Close, Sync and
// Flush, for statements without parameters, which is what pgx needs in
// each of its query modes. Describe of a SHOW or SELECT runs it to learn
// its columns (they only read); a session function's column is known
// without running it; other statements run at Execute. Binary result
// format: int8, float8 and bool in PostgreSQL's binary forms, text as
// its bytes. After an error, messages are discarded until Sync.
//
// Each statement first waits for Options.Sync (the proxy's
// SyncRegistry): the session registry then holds every byte the relays'
// clients have received, those the kernel fast path relayed included,
// so a view read right after a client's answer shows that answer.
//
// SQL over the views: a SELECT (or WITH, VALUES) with a FROM, or any the
// small SELECT of package ddl does not cover, runs in package viewsql:
// the views the query names (views.Names, read by the manager in one
// consistent reading) are loaded into a private in-memory SQLite
// database, read-only, for at most Options.QueryTimeout (10 s, then
// 57014) and Options.MaxQueryRows rows (100,000, then 54000), with
// viewsql's bounds on values, results and SQLite's heap. Queries take
// turns on the server's offpath.Runner (Options.Engine): one runs, on a
// P and a lowest-priority thread of its own, so that console SQL never
// takes the relays' CPU; others wait in order within their timeout
// (57014), and one beyond the waiting bound is refused with 53000. Every
// statement, whatever it is, first takes its turn on a token bucket of
// Options.StatementRate a second (500, after a burst of StatementBurst,
// on Options.Clock), shared by all connections: parsing and answering
// run on the relays' CPUs, which clients looping on trivial statements
// would otherwise take. A query
// naming pg_catalog or information_schema gets 0A000 (psql's \d);
// SQLite's errors get their SQLSTATE (42601, 42P01, 42703, 42883,
// 42501), with the position of the unknown name where the query has it.
//
// Session commands: SELECT pg_cancel_backend(id) and CANCEL STATEMENT id
// cancel the running statement of sluice session id
// (wlm.Runtime.CancelSession: the path an abort rule takes);
// SELECT pg_terminate_backend(id) and TERMINATE SESSION id end it
// (wlm.Runtime.TerminateSession: the client reads FATAL 57P01 or MySQL
// ERR 1927). The functions answer t or f, f of an id that names no
// session with a WARNING (01000) naming it, as PostgreSQL warns of a pid
// that is no backend (asked of the instance that ran the command); the
// commands fail with 42704 when there was nothing to act on (and are
// audited with it). Over a
// column, SELECT pg_terminate_backend(id) FROM sessions WHERE ...
// (ddl.SessionQuery) runs the query for the ids and answers a boolean a
// row; Describe answers its one column without running it.
//
// Fleet (Options.Fleet, package fleet): SHOW INSTANCES lists the live
// instances sharing the catalog (this one alone without etcd); SHOW
// CLUSTER list answers a list of every live instance, and SQL reads
// cluster_<view> and GaussDB's pgxc_ session views the same way, plus
// instances (SHOW INSTANCES as a view); every row begins with the column
// instance. An instance that does not answer within the fleet's timeout
// is named in a NoticeResponse and its rows are missing. CANCEL
// STATEMENT id ON INSTANCE 'b', TERMINATE SESSION id ON INSTANCE 'b' and
// pg_cancel_backend(id, 'b') / pg_terminate_backend(id, 'b') run on
// instance b (over its HTTP API), this instance's own name runs here, an
// instance that is not a live member is 42704 and one that does not
// answer 08006. Without a Fleet these statements get 0A000.
//
// A message announcing a body over 4 MiB ends the connection with FATAL
// 54000 (program_limit_exceeded); the console then half-closes and
// discards what the client still sends, for up to 5 s (package linger),
// so a client still writing the message reads the error rather than a
// reset.
//
// psql's own catalog queries (\d and friends) get 0A000, SELECT version()
// names sluice, and SELECT of literals answers, so drivers' health checks
// work.
//
// Serve runs until its context ends or Close is called; Close closes
// every listener and connection and waits for their goroutines. A Server
// is safe for concurrent use.
package admin

// Package mysql is the front end of a mysql route: it runs the opening
// exchange of the MySQL/MariaDB client/server protocol and then watches
// both directions of the session, recording every statement in the
// session registry, without ever changing a byte it relays.
//
// # Packet framing
//
// Everything on the wire after the TCP (or TLS) handshake is a packet: a
// 4-byte header, a 3-byte little-endian payload length and a 1-byte
// sequence id, then the payload. A payload of exactly 0xffffff bytes
// says the logical packet goes on in the next physical packet (with the
// next sequence id), so a logical packet of n bytes ends with a physical
// packet shorter than 0xffffff, possibly empty. Sequence ids count the
// packets of one exchange: a command starts at 0 and each packet of
// either side takes the next id, wrapping at 256.
//
// The framer splits a stream into logical packets as it passes, in chunks
// of any size and alignment: it keeps the header it is assembling,
// counts payload bytes down, and copies only a bounded prefix of each
// logical packet, as much as its owner asks for (the command byte, then
// the SQL text kept; or the first 48 bytes of a server packet, enough
// for OK, ERR, EOF, PREPARE_OK and column-count packets). It reports
// where a packet begins, where the prefix asked for is complete, and
// where the packet ends, at exact stream positions, so the same stream
// cut anywhere yields the same records. Rows and large payloads are
// skipped by count: the steady path allocates nothing.
//
// # The opening exchange
//
// Open dials the upstream, reads its greeting (protocol 10), and forwards
// it after patching capability bits, the only bytes sluice ever changes,
// and only in this packet it read itself before relaying anything:
// CLIENT_SSL is offered exactly when Options.TLS is set; compression
// (CLIENT_COMPRESS, zstd) and MariaDB's COM_MULTI are never offered, since
// the observers read the uncompressed framing. A client that still asks
// for compression, or sends an SSLRequest when TLS is not configured,
// gets an ERR saying so. Open then reads the HandshakeResponse41 (after
// terminating TLS if the client sent an SSLRequest), registers the
// session with its user, database and program_name attribute, and
// forwards the response, after sending the upstream an SSLRequest and
// upgrading to TLS when Options.UpstreamTLS is set. CLIENT_SSL in the
// forwarded response says what the upstream leg does.
//
// What follows (auth switch, more data, OK or ERR) is relayed untouched
// and followed by the observers, except when TLS is used on one leg only:
// the extra SSLRequest on that leg shifts its sequence ids by one, so Open
// relays the authentication itself, renumbering, until the server's OK or
// ERR; client bytes read past it are handed over in wire.Conn.Buffered.
// Terminating TLS in front of a plain upstream leg only suits
// authentication that needs no secure channel: the password sent in
// clear to caching_sha2_password's full authentication is refused by a
// server that sees a plain connection.
//
// Options.StartupTimeout (30 s) bounds the whole exchange: a client that
// stalls in it, before its first byte or in the middle of a packet, is
// closed at the limit, with its upstream connection. A client packet
// before authentication completes is at most maxLoginPacket (16 KiB);
// a larger one gets ERR 1153 (ER_NET_PACKET_TOO_LARGE) and ends the
// session. Packets read in the exchange are buffered as their bytes
// arrive, never ahead of them to the length their header announces.
//
// Options.ConnectTimeout (10 s) bounds dialling the upstream and reading
// its greeting (and the TLS handshake with it). If the upstream cannot
// be reached in time, or refuses, or fails TLS, sluice greets the client
// itself (version 5.5.5-sluice, mysql_native_password, a random
// scramble) if it has not relayed a greeting yet, reads its response,
// and answers ERR 9001 "sluice: could not connect to upstream ADDR:
// REASON" (or "TLS with upstream ADDR failed"), numbered after the
// response. Every ERR sluice sends carries a server error number:
// libmariadb reports a client-range number (2000-2999) sent by a server
// as "Received malformed packet" instead of the message.
//
// # Commands and answers
//
// In the command phase the client sends one command per exchange and
// the server answers it; clients may send several before reading
// answers. The client-side observer decodes each command from its
// captured prefix and queues what answer to expect; the server-side
// observer takes the oldest when an answer begins and follows it:
//
//   - COM_QUERY, COM_STMT_EXECUTE, COM_STMT_BULK_EXECUTE, COM_PROCESS_INFO:
//     OK, ERR, or a result set (column count; column definitions unless
//     the metadata is skipped under MariaDB's cache-metadata or MySQL's
//     optional-metadata capability; an EOF unless CLIENT_DEPRECATE_EOF;
//     rows, text or binary; an EOF, or an OK with the 0xfe header). An
//     OK or terminator with SERVER_MORE_RESULTS_EXISTS is followed by
//     another result (multi-statements, CALL). A terminator with
//     SERVER_STATUS_CURSOR_EXISTS right after the definitions ends an
//     execute that opened a cursor; COM_STMT_FETCH then gets rows and a
//     terminator. A 0xfe packet is a terminator only if shorter than 9
//     bytes (or than 0xffffff with CLIENT_DEPRECATE_EOF): a text row may
//     start with 0xfe only when it is at least 16 MiB long.
//   - LOCAL INFILE: a 0xfb answer to COM_QUERY names a file; the client
//     sends its content in packets and an empty packet, then the server
//     answers OK or ERR. The server-side observer switches the client
//     side to file content when it sees 0xfb, before forwarding it, so
//     the switch always precedes the content.
//   - COM_STMT_PREPARE: PREPARE_OK (statement id, columns, parameters)
//     with the parameter and column definitions, or ERR. The id is
//     mapped to the SQL so executes and fetches record the prepared text;
//     statement id 0xffffffff (MariaDB) means the one prepared last.
//   - COM_CHANGE_USER, and the handshake: auth switch and more-data
//     packets, with client answers, until OK (the new identity is
//     recorded; prepared statements are forgotten) or ERR.
//   - COM_FIELD_LIST: definitions until EOF. COM_BINLOG_DUMP(_GTID):
//     the binlog stream (below). COM_QUIT, COM_STMT_CLOSE and
//     COM_STMT_SEND_LONG_DATA: no answer. Anything else (COM_REGISTER_SLAVE
//     included): one packet.
//
// MariaDB progress reports (ERR 65535) are skipped wherever they come.
// Sequence ids from the server are checked loosely: a mismatch is logged
// once per session, never fatal. Client sequence ids are not checked:
// the server will complain.
//
// # Statements
//
// Every command that gets an answer is a statement, from the first byte
// of the command to the last byte of the answer: one round trip. Its SQL
// is the query text, the prepared text for COM_STMT_EXECUTE, and for the
// other commands their protocol name with their argument
// ("COM_STMT_PREPARE SELECT ...", "COM_INIT_DB shop", "COM_PING"),
// truncated to Options.MaxSQL bytes at a character boundary. Bytes are
// whole packets, headers included, counted as they pass; the bytes of
// answerless commands are carried to the next statement (so the data
// COM_STMT_SEND_LONG_DATA sends lands on the execute that follows).
// Bytes of the opening exchange belong to no statement, and neither
// direction's session totals are touched here: the proxy counts those.
// Rows are the affected rows of OK packets plus the rows of result sets,
// summed over a multi-result answer, or -1 if the server reported
// neither. The outcome is OK, Failed with the server's error number as
// code, or Cancelled for ERR 1317 (ER_QUERY_INTERRUPTED) or any error
// after a cancel was requested.
//
// A command shorter than its fixed fields (a COM_STMT_EXECUTE under 10
// bytes, ...) or otherwise malformed is forwarded untouched and recorded
// as far as it can be decoded ("COM_STMT_EXECUTE" without a statement
// id); the server answers it, with an ERR as MariaDB does, and the
// session goes on. Only a framing violation ends a session: a client
// packet longer than Options.MaxPacket ends it with a *wire.Fatal whose
// reply is ERR 1153 (ER_NET_PACKET_TOO_LARGE, SQLSTATE 08S01) numbered
// as the client expects; the packet is not forwarded.
//
// # Replication
//
// A replica connects as a client, runs a few queries (SELECT
// UNIX_TIMESTAMP(), SET @master_heartbeat_period, SET
// @slave_connect_state, ...), sends COM_REGISTER_SLAVE, then
// COM_BINLOG_DUMP (MariaDB, with the GTID position in
// @slave_connect_state) or COM_BINLOG_DUMP_GTID (MySQL). The session's
// kind becomes session.KindReplication when the server accepts the
// registration (OK) or sends the first event of a dump; a refused one
// (ERR, without the REPLICATION SLAVE privilege) leaves a client. The
// dump's answer is the
// binlog stream: one packet per event, each beginning with the 0x00 OK
// marker, for as long as the connection lasts, or until an EOF (a
// non-blocking dump that reached the end) or an ERR (1236: the binlog
// asked for is gone). The server-side observer follows it as one answer
// that only an EOF or ERR ends, told apart by the first byte as rows
// are (0xfe, 0xff), so an event's bytes are never read as an answer of
// their own; an event longer than
// 0xffffff bytes is one logical packet, its continuations never looked
// at. The dump is one statement ("COM_BINLOG_DUMP"), running while the
// stream flows, its down bytes counted as they pass: the rule evaluator
// sees it as one long statement (a penalty rule demotes it). While it
// runs, what the client sends is a semi-synchronous replica's
// acknowledgements (0xef, a binlog position and file name), which get no
// answer: their bytes are the dump's, and they open no statement.
//
// # Cancel
//
// MySQL cancels a statement from another connection: KILL QUERY id,
// where id is the connection id the upstream gave in its greeting. With
// Options.KillUser set, each session gets a session.Canceler that opens
// such a side connection (go-sql-driver, through the route's dialer and
// upstream TLS settings), checks that a statement marked for
// cancellation still runs, and kills the query. The server interrupts
// it; the client receives the server's own answer (ERR 1317, or for some
// statements an early result), and the session goes on. KILL QUERY
// interrupts whatever the connection runs when it arrives, so a
// statement ending at that moment can let it hit the next one; the
// check narrows that window without closing it. Behind an upstream that
// is itself a proxy, the greeting's connection id may not name a server
// thread, and KILL QUERY fails. Without KillUser the route cannot cancel
// (Frontend.CanCancel is false).
//
// # Data-port forwarding
//
// With Options.Forward set, a session whose user the Forwarder names gets
// a client observer that is also a wire.Rewriter (forward.go): once the
// server has accepted the login, each COM_QUERY of at most
// wire.MaxForwardQuery bytes sent in the command phase is shown whole to the
// Forwarder, and a statement it takes is replaced by a COM_QUERY of the
// rest (same sequence id, new length); a refused one by a SIGNAL that
// makes the server send the ERR (SQLSTATE kept, error 1644). Prepared
// statements, LOCAL INFILE data, authentication packets and longer
// commands pass untouched. The user is checked at each command, so
// COM_CHANGE_USER away from a named user ends forwarding. Every other
// session keeps the plain observers (with admission, below, when it is
// configured) and is relayed byte for byte.
//
// # Admission
//
// With Options.Admit set, every session but a forwarding one gets a
// client observer that is also a wire.Rewriter (admit.go). The commands
// that run SQL, COM_QUERY (but KILL), COM_STMT_EXECUTE and
// COM_STMT_BULK_EXECUTE, wait for a slot of their pool when the session
// holds none and the server's last OK or EOF did not say
// SERVER_STATUS_IN_TRANS; their packet is held from its first byte.
// Other commands (COM_PING, COM_STMT_PREPARE, COM_STMT_FETCH,
// COM_STMT_SEND_LONG_DATA, COM_INIT_DB, ...) never wait, and nor does
// any command of a replication session once the server has accepted
// its COM_REGISTER_SLAVE or streams it the binlog: the dump never ends,
// and takes no slot. The queries a
// replica sends before COM_REGISTER_SLAVE are held like any others. The slot goes
// back at the final OK, EOF or ERR of the last command in flight without
// IN_TRANS (an ERR keeps the last status seen).
//
// A refused command never reaches the server: its packet is discarded
// and sluice answers ERR 1317 (ER_QUERY_INTERRUPTED, SQLSTATE 70100),
// "Query execution was interrupted" for a cancel or the refusal's own
// message (queue_timeout, a blocktime abort rule), numbered after the
// command, through the server pump once every earlier command has its
// answer. KILL QUERY id sent through a session of the same route, id the
// upstream connection id of a session whose command is held, ends that
// wait; sluice answers the KILL itself with OK, so the server, where the
// held command never ran, does not interrupt that connection's next one.
// The console's cancel of a held command (Registry.Cancel) needs no kill
// connection. A client that goes away while its command is held (a
// reset, or its end of stream with nothing unread but a COM_QUIT) ends
// its session and server connection at once (wire.Gate watches the
// socket); one the workload manager ends for sitting idle in a
// transaction on its slot (a pool's idle_in_transaction) reads ERR 1927
// (ER_CONNECTION_KILLED, SQLSTATE 70100, MsgIdleInTransaction).
//
// # Round trips
//
// With Options.WhatIf set, every client session feeds a whatif.Conn
// (whatif.go): the client observer reports each command that gets an
// answer when its last packet is read (COM_QUERY, COM_STMT_EXECUTE,
// COM_STMT_FETCH and COM_STMT_BULK_EXECUTE run a statement; a
// COM_STMT_PREPARE or COM_PING does not), the server observer the first
// server chunk after one and the end of each command's answer, idle when
// no command awaits an answer, a transaction open while the status flags
// of the last OK or EOF have SERVER_STATUS_IN_TRANS. A session that
// starts a binlog dump (a replica) stops being followed. The key is the
// handshake's user, database and program_name attribute; COM_CHANGE_USER
// does not change it.
//
// # Concurrency
//
// A Frontend is safe for concurrent use. Each session's two observers run
// in one goroutine each and share, under one mutex, only the queue of
// commands awaiting an answer, the prepared statements and what the
// client sends next; they take it once per client packet and once per
// answer, never per row.
package mysql

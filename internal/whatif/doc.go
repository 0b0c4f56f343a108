// Package whatif tells, from live traffic and without injecting any
// delay, how much of each application's time is round-trip waiting, and
// what its transactions and throughput would become if the network added
// x of round-trip time (RTT).
//
// # What is measured
//
// A session's front end (wire/pg, wire/mysql) feeds its Conn four events,
// with the time its observers saw them:
//
//   - Send: a client request (a complete message or command) was seen.
//   - Answer: server bytes were seen; only the first after a round trip
//     began matters (Awaiting says whether one is expected, so the
//     observer asks its clock only then).
//   - Done: a final answer ended (PostgreSQL ReadyForQuery, a MySQL OK,
//     ERR or EOF that ends a command's answer), with whether the server
//     still owes answers (pipelining) and whether a transaction is still
//     open (ReadyForQuery 'T'/'E', SERVER_STATUS_IN_TRANS).
//   - Close: the session ended.
//
// A round trip is a request the client waited for: it is counted when
// the client sends while nothing is outstanding from the server (idle to
// busy); requests pipelined while busy do not count again. A transaction
// runs from the first request after the last one ended (after
// ReadyForQuery 'I' or an answer with SERVER_STATUS_IN_TRANS clear) to
// the next final answer that leaves no transaction open: an autocommit
// statement is a transaction of its own. pgbench's tpcb-like script makes
// 7 round trips a transaction (BEGIN, 3 UPDATE, SELECT, INSERT, END),
// sysbench oltp_read_write 20.
//
// Per transaction: its latency L (first request to final answer, at
// sluice), its round trips r, server time (each round trip's last request
// byte to the answer's first byte), client time (each answer's end to the
// next request inside it, plus the gap after it until the session's next
// transaction) and its cycle (L plus that gap). Network wait is r times
// the sum of the client and upstream sockets' kernel RTT (TCP_INFO
// tcpi_min_rtt, the path's least RTT: the smoothed tcpi_rtt also holds
// the peer's delayed ACK, so the server's time to answer; sampled at most
// once a second per session; 0 for a Unix socket, about 0 on loopback),
// the share of L spent on the wire as it is today.
//
// # The model
//
// Each session is a closed loop: it sends, waits, thinks, sends again.
// Adding x to every round trip adds r·x to each transaction and to each
// cycle, and nothing else changes:
//
//	latency'    = L + r·x
//	throughput' = TPS · cycle / (cycle + r·x)
//	            = S / (cycle + r·x),   S = TPS · cycle
//
// S is the number of sessions running transactions back to back in the
// window; it is computed as TPS · cycle rather than counted, so sessions
// that ran for only part of the window weigh for that part (when every
// session runs the whole window S equals App.Sessions; when client time
// is zero, cycle = L and S is App.Concurrency). A single-stream job of n
// transactions takes n·(cycle + r·x) (JobDuration).
//
// # Limits
//
//   - Lock hold times grow with RTT: a row locked by an UPDATE stays
//     locked for the rest of its transaction, now r·x longer, so
//     contended workloads slow down more than predicted.
//   - An open-loop workload (requests arriving at a fixed rate whatever
//     the answers) does not slow down: it queues, and its latency grows
//     without bound once concurrency is exhausted. The prediction is for
//     closed loops at the same concurrency.
//   - Pipelined requests (pgx batches, libpq pipeline mode) cost one
//     round trip for the whole pipeline, which is what is counted; a
//     transaction that ends while later requests are already sent
//     begins the next one at once.
//   - Prepared statements: a prepare round trip (Parse/Describe/Sync, a
//     COM_STMT_PREPARE) counts like any other; outside a transaction it
//     is one of its own. Drivers that cache statements pay it once.
//   - Times are measured at sluice: the client's own RTT to sluice is in
//     its client time, the upstream's in server time.
//   - Waiting idles the ends' CPUs, and an idle CPU is slow to wake: on a
//     virtual machine 0.1 to 0.3 ms after milliseconds of idle. A minimal
//     round trip through a link that adds 10 ms then takes about 10.1 to
//     10.4 ms more, not 10; the prediction is for x as ping would show
//     it, wake-ups included, which is what a moved server's new RTT is.
//   - A busy baseline gets faster: when client and server share CPUs
//     that the unshaped run keeps busy, the waiting the added RTT brings
//     frees them, and server time shrinks. The prediction keeps it as
//     measured, so it errs low for a CPU-bound baseline.
//   - Large requests and answers are taken as one round trip whatever
//     their size; a transfer bounded by the TCP window (window / RTT)
//     takes several.
//
// # Bounds and windows
//
// A Table keeps per application a ring of per-second buckets over its
// window (Options.Window, 60 s by default): memory is fixed per
// application, whatever the traffic. It keeps at most Options.MaxApps
// applications (256 by default); sessions of further applications count
// for one (other) application of their protocol. An application with no
// open session and nothing in its window is forgotten. Rates are over
// the window, or over the time since the application was first seen when
// that is shorter.
//
// # Concurrency and lock order
//
// A Table and its Conns are safe for concurrent use: a session's client
// pump calls Send, its server pump Answer and Done. Conn.mu guards one
// session's state and is taken per event (once per request, and per
// server chunk only while a first answer byte is awaited); Table.mu
// guards the applications and is taken once per transaction and per
// Snapshot. The two are never held together. Pure logic: every event
// takes its time from the caller; only the sampler a front end installs
// makes a system call.
package whatif

// Package bench is `sluice bench`: sysbench 1.0's OLTP benchmark for
// MySQL/MariaDB and PostgreSQL, with sysbench's command line, statements,
// defaults and report, plus what sysbench lacks: a count of network round
// trips per transaction, a JSON report with a mergeable latency histogram,
// and a faster prepare.
//
// It owns four things.
//
// The command line (ParseArgs, Options). A sysbench command runs unchanged
// after replacing "sysbench" with "sluice bench": the same option names
// (with '-' and '_' interchangeable), the same defaults (sysbench 1.0.20's,
// --rand-type=special included), options before or after the workload and
// command. Wrong input is a UsageError naming the word at fault. Help
// answers as sysbench's does (help.go): `WORKLOAD help` lists the
// workload's options in sysbench's layout, spelling and defaults, and
// VersionLine is the `--version` line, "sysbench 1.0.20-compatible
// (sluice VERSION)", that scripts reading sysbench's version still parse.
//
// The workloads (oltp_read_write and the ten others). Each transaction is
// sysbench's event(): the same statements with the same text, parameters
// drawn from the same distributions, in the same order. Statements run on
// a Conn, the one interface between the workloads and a database; the
// MySQL Conn drives go-sql-driver below database/sql, the PostgreSQL Conn
// drives pgx's pgconn, both with server-side prepared statements under
// --db-ps-mode=auto and plain text statements under disable. Results are
// counted as sysbench counts them: a result set is a read, changed rows a
// write, anything else (BEGIN, COMMIT, a DELETE that found nothing) other.
// Errors sysbench ignores (MySQL: --mysql-ignore-errors, deadlocks and
// lock wait timeouts by default; PostgreSQL: deadlocks, serialization
// failures, unique violations, after a ROLLBACK) restart the transaction
// and count as ignored errors; lost MySQL connections in the ignore list
// reconnect.
//
// The run (Run). One goroutine per --threads, each with its own
// connection, random source and statistics; the run ends at --time after
// --warmup-time, after --events transactions, or on a fatal error. --rate
// feeds Poisson arrivals through a queue and counts latency from arrival,
// as sysbench does. Every statement execution is one round trip (BEGIN
// and COMMIT included; a ROLLBACK after an ignored error is one more), so
// Result.RoundTripsPerTransaction and Result.PredictTPS tell what the
// same run would do over a slower network: threads / (latency + round
// trips x added RTT).
//
// The report. Human output is sysbench's, line for line (the preamble,
// the interval lines, "SQL statistics", "General statistics", "Latency
// (ms)" with the percentile from sysbench's bucketed histogram, "Threads
// fairness"), followed by a "Round trips" section. --format=json prints
// the same figures with the intervals and an HdrHistogram of latencies
// (one per worker, merged).
//
// Prepare loads the tables in parallel (one connection per table; on
// PostgreSQL several per table, each COPYing its own key range), MySQL
// with prepared multi-row INSERTs of 2000 rows, PostgreSQL with COPY, and
// builds indexes after loading.
//
// The client stays out of the server's way: a benchmark usually shares
// the machine with the server, so client CPU is server throughput, and
// the workloads allocate nothing per statement.
//
// A run waits as sysbench does by default (--io-model=thread): each
// worker is locked to an operating-system thread and waits in its own
// blocking system calls (package threadconn), Main sets GOMAXPROCS to one
// per connection and one more, and each worker yields every 5 ms,
// between events, so the runtime's monitor leaves its processor alone.
// The kernel then sees which client thread serves which server process
// and places the two together, as it does for sysbench's threads.
// --io-model=poller, and prepare and cleanup always, read and write with
// raw non-blocking system calls under the network poller (package
// rawconn), and Main runs them with one scheduler thread per 16
// connections: cheaper for many connections, but one thread serves them
// all and the client's work cannot spread across CPUs beside the
// server's.
//
// Invariants: statements are the only traffic in the measured path (no
// pool, no liveness check, no context watcher per statement); a worker's
// figures are touched by that worker and, under its lock, by the interval
// reporter; all waiting is on the Options' clock, so the run loop, the
// rate generator and the reporter run in virtual time under test.
package bench

// Package lab is `sluice lab`: it reproduces the reference experiments
// end to end, on one machine, through sluice, and reports
// them as tables, Markdown, JSON and SVG charts.
//
// It owns the experiment procedures, the database the experiments run
// against when the user has none, and the report. It does not own what
// it measures: the benchmark is package bench, the proxy, links, path
// emulation and workload manager are the product's own packages, built in
// process by package stack, the constructor `sluice serve` uses, so every
// measured byte crosses a real sluice route over real loopback sockets
// and every setting is a console statement (ALTER LINK, CREATE EXCEPT
// RULE, SET).
//
// # The database
//
// Run starts the embedded database (package litepg: SQLite over the
// PostgreSQL protocol) by default, a throwaway PostgreSQL from the
// installed binaries with BackendPostgres (package pgtemp), or addresses
// the user's server with a postgres:// or mysql:// DSN. Everything the
// lab starts it stops, and everything it creates in a database it drops
// at the end, on error too: the benchmark's sbtest tables (it refuses to
// run when they exist already rather than drop someone's tables), and
// the login named bulk that the flow-control experiment creates when
// there is none; when a login of that name exists, or the lab may not
// create one, it reaches the bulk pool through a second route whose
// sessions default to that pool, and says so.
//
// # Experiment 1: latency
//
// oltp_read_write at added round-trip times (a one-way delay of RTT/2 on
// the link, in each direction), each run beside the model's prediction
// threads / (base latency + round trips x RTT), where the base latency is
// the average at RTT 0 and the round trips per transaction are counted
// by the benchmark; plus the table load (prepare) timed at chosen RTTs.
// A minimal round trip is timed at each setting too, so the report shows
// what a round trip really cost, and the delay lines' release lateness
// during each run (netem.Lateness) shows how much of that was sluice's
// own error.
//
// # Experiment 2: flow control
//
// A query returning about 1 MB, measured repeatedly under N concurrent
// bulk sessions, with network_control off and on. The bulk sessions'
// pool has a penalty exception rule; each point waits until every bulk
// statement is penalised (read from the session registry, as SHOW
// STATEMENTS does) before it measures. The link capacity is calibrated
// from what one bulk session can stream, with a wide margin, so that on a
// small machine the link rather than the processor is the bottleneck.
//
// # Experiment 3: concurrency
//
// Many ordinary sessions (32) run a statement returning about 512 kB in a
// loop through a route whose sessions default to the ordinary pool, and a
// small query is measured repeatedly through a second route whose
// sessions default to a pool with network_priority high
// (network_control on), with the ordinary pool's active_statements
// unlimited and at each limit of the plan. The link has a calibrated
// capacity (as in experiment 2), a 1 ms round trip and a 64 KiB window per
// flow, so that each streaming flow keeps about a window and a chunk in
// the device queue and the sessions together fill it. Each point reports
// the small query's p50 and p99, the ordinary sessions' throughput (MB/s,
// statements/s) and the device queue's occupancy, sampled every 10 ms.
// A build of sluice that refuses active_statements (SQLSTATE 0A000)
// leaves the experiment unmeasured, saying so, rather than failing the
// run.
//
// # Experiment 4: what-if
//
// Checks sluice's what-if predictions (package whatif: what SHOW WHATIF,
// the whatif view and GET /api/whatif show) against delays really
// applied. oltp_read_write and a single-session loader (BEGIN,
// CommitEvery INSERTs, COMMIT; one row per INSERT, the shape of a
// row-at-a-time sync job, and the batched sizes of the plan) run
// unshaped through the route, each under an application name of its own
// (application_name, MySQL's program_name), after one unmeasured run of
// each loader. Right after each job's unshaped run the lab reads its row
// of the stack's what-if table and predicts it at each added RTT
// (whatif.Predict; a loader's duration with whatif.JobDuration); then it
// applies each RTT on the link, as experiment 1 does, and measures the
// benchmark's TPS and each loader's duration. The report gives predicted
// and measured side by side with the error, the delay lines' lateness
// during each run, the RTT the route really added (a minimal round
// trip's mean time at that setting less its unshaped mean) with the
// error against the prediction at that RTT, and each loader's time per
// INSERT, measured and predicted, scaled to a 4 GB table with the bytes
// per row it sent. The benchmark's tables and the
// loader's table (sluice_lab_whatif_load) are dropped at the end.
//
// # Time and output
//
// All waiting and timing uses the Options' clock.Clock. Progress lines
// (one per step, periodic lines during long steps) and the tables go to
// Options.Progress as the run goes. Report carries every figure; its
// JSON form is report.json, and WriteFiles also writes report.md and the
// charts (package svg).
package lab

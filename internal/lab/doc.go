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
// benchmark's TPS and each loader's duration (the mean of as many runs of
// the job as fit in the plan's LoaderTime, at least one). The report gives predicted
// and measured side by side with the error, the delay lines' lateness
// during each run, the RTT the route really added (a minimal round
// trip's mean time at that setting less its unshaped mean) with the
// error against the prediction at that RTT, and each loader's time per
// INSERT, measured and predicted, scaled to a 4 GB table with the bytes
// per row it sent. The benchmark's tables and the
// loader's table (sluice_lab_whatif_load) are dropped at the end.
//
// # Experiment 5: cluster
//
// The flow-control experiment on PostgreSQL's own sharding, only with
// BackendPostgres (skipped, saying why, on the embedded backend and on a
// DSN). It starts four servers of its own (package pgtemp, small
// settings): a coordinator and three data nodes. The reference's tables
// wt1..wt4 are hash-partitioned by c1 on the coordinator, each partition
// a postgres_fdw foreign table on one data node, which holds the rows
// (generated there, each node those of its partition by the
// coordinator's own hash). Every shard connection passes through a
// sluice route per data node, the routes sharing one link whose capacity
// is calibrated as experiment 2's, from what one low-priority join moves;
// the clients reach the coordinator through a route on the default link.
// N low-priority joins of wt1 and wt2 by one user run in a loop while the
// same join of wt3 and wt4 by another is measured repeatedly, with
// network_control off and on. The pools bind the client users on the
// coordinator's route: the low-priority user's has a penalty exception
// rule, the high-priority user's network_priority high. Each client user
// reaches the data nodes as a shard role of its own that no pool binds;
// the coordinator names its backend in every shard session
// (postgres_fdw.application_name 'fdw %p'), so sluice links the shard
// sessions to the client's session and each join is one distributed
// statement: the rule judges it on its total, fires once, and its
// penalty demotes every shard flow of the join, while the high-priority
// join's shard flows take its pool's high class. The queries count the
// first table's wide columns, because postgres_fdw fetches only the
// columns a query needs and the reference's query as written would move
// only c2; fetch_size is postgres_fdw's default. wt1 and wt2's
// partitions are async_capable, so a low-priority join fetches from every
// data node at once, as the reference's broadcast sends from every node
// at once. Each measurement waits
// until every low-priority join is penalised, and samples how often one
// ran unpenalised while it measured. A registry watcher counts the
// distributed statements, the penalised joins and the rule's firings of
// each point. The report shows what each query fetches (EXPLAIN
// VERBOSE) and moves, the bytes per node of one distributed statement,
// the elapsed time and slowdown against N, and where the figures differ
// from the reference's 55x. The servers are stopped and their
// directories removed at the end, on error too.
//
// # Experiment 6: base backup
//
// Only with BackendPostgres (the throwaway server is the primary), and
// not in the quick plan; otherwise it is skipped with its reason. The
// lab fills the server to the plan's size (pgbench -i at a small scale,
// then a logged table of wide rows without autovacuum: pg_basebackup
// skips unlogged tables), creates a replication role, and adds two
// routes on the default link: pgbench (the real binary, select-only then
// tpcb-like, fixed duration, a per-transaction log) through one, and
// pg_basebackup (-X stream, as the role) through the other. The link's
// capacity is calibrated as in experiment 2, and also kept low enough
// that a backup at full capacity outlasts both pgbench runs. Four
// conditions, network_control on: pgbench alone; beside the backup with
// the role unbound (normal class, like pgbench); with the role bound to
// a pool with network_priority low; and with pg_basebackup --max-rate set
// to the data rate the low-class backup averaged, unbound. Each backup
// streams for a lead time before pgbench starts and runs on alone after
// it. pgbench's figures (TPS, average, p50, p99) come from its
// transaction log over the part of each run the backup covered; the
// link's bytes (server to client, departed from the device queue) give
// what was left idle of the capacity during each run and during the
// backup's tail alone. pg_verifybackup checks the low-class backup. The
// backups and logs are removed as each condition ends, and the table,
// pgbench's tables, the role, the pool and the link settings at the end,
// on error too. The pgbench and pg_basebackup processes run on the wall
// clock, so this experiment needs Options.Clock to be clock.Real.
//
// # The kernel network
//
// With Options.Network NetworkKernel the flow-control experiment runs
// over a real network on this host (package netlab) instead of the
// emulated link, and the experiments that measure sluice's own
// emulation are skipped, each saying why. The clients (the normal
// query and the bulk sessions) dial from a namespace of their own
// (Namespace.Dial, as the drivers' dial function); sluice's route
// listens in a second namespace (stack.Route.Listener); the veth pair
// between them sends toward the clients through a tbf queue of
// Options.NetRate and NetQueue. Three settings, each on a stack of its
// own so none inherits another's state: network_control off; on with
// nothing configured about the link (the network controller, package
// netctl, finds the bottleneck); on with the link's capacity at
// CapacityPercent of the rate. Each point reports the slowdown against
// N = 0 with the same setting and the queue's use (tc's byte counter
// over the measurement, over the rate). The testbed is removed when the
// experiment returns, on error and cancellation too.
//
// The cluster experiment has a form there too, with BackendPostgres and
// Options.Etcd: each server runs in a namespace of its own (pgtemp's
// Options.Start, netlab's Namespace.Start), with a stack of its own in
// front of it that listens inside that namespace and reaches the server
// on its Unix socket; the stacks are a fleet on one catalog in etcd,
// under a prefix of the run's that is deleted at the end. The nodes are
// joined by a router namespace whose port toward the coordinator sends
// through the tbf queue, so every data node's answers cross it together.
// A shard session's class is its shard role's pool's, on the data
// node's stack (each client user reaches the data nodes as a role of
// its own); the high-priority join is measured under N low-priority
// joins with each of the three settings, the capacity setting giving
// each stack's link CapacityPercent of the rate over the data nodes.
//
// # Time and output
//
// All waiting and timing uses the Options' clock.Clock. Progress lines
// (one per step, periodic lines during long steps) and the tables go to
// Options.Progress as the run goes. Report carries every figure; its
// JSON form is report.json, and WriteFiles also writes report.md and the
// charts (package svg).
package lab

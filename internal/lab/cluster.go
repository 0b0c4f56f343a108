package lab

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/units"
)

// The cluster: a coordinator and this many data nodes, each table
// hash-partitioned by c1 into one foreign partition per data node.
const clusterDataNodes = 3

// tenGE is 10 Gbit/s in bytes/s, the reference cluster's network.
const tenGE = 1.25e9

// clusterFetchSize is postgres_fdw's fetch_size on every foreign server:
// its default, 100 rows (800 kB of wide rows) per FETCH. The rule judges
// the coordinator's statement on its total, so how the shards' rows are
// cut into FETCHes does not matter to it.
const clusterFetchSize = 100

// clusterAsync is the foreign partitions' options beyond table_name:
// the bulk tables' (wt1, wt2) are async_capable, so a low-priority join
// fetches from every data node at once, as the reference's broadcast
// sends from every node at once; the high-priority join's tables are
// read one partition after another, postgres_fdw's default.
func clusterAsync(table string) string {
	if table == "wt1" || table == "wt2" {
		return ", async_capable 'true'"
	}
	return ""
}

// The statements of the cluster experiment. The reference's query joins
// wt1 and wt2 on c2 and counts; postgres_fdw fetches only the columns a
// query needs, so as written it moves c2 alone. The queries run count
// the wide columns of the first table instead, so its whole rows cross
// the network, as the reference's broadcast moves them.
const (
	clusterRefSQL  = `select count(1) from (select wt1.c1, wt1.c2 from wt1, wt2 where wt1.c2 = wt2.c2) t`
	clusterLowSQL  = `select count(t.b1 || t.b2) from (select wt1.c1, wt1.c2, wt1.b1, wt1.b2 from wt1, wt2 where wt1.c2 = wt2.c2) t`
	clusterHighSQL = `select count(t.b1 || t.b2) from (select wt3.c1, wt3.c2, wt3.b1, wt3.b2 from wt3, wt4 where wt3.c2 = wt4.c2) t`
)

// Names the cluster experiment creates: database roles (every one on
// every server), sluice's catalog objects and routes. The client users
// log in to the coordinator; postgres_fdw logs in to the data nodes as
// each one's shard role, which no pool binds.
const (
	clusterLowUser       = "cluster_low"
	clusterHighUser      = "cluster_high"
	clusterLowShardUser  = "cluster_low_fdw"
	clusterHighShardUser = "cluster_high_fdw"
	clusterSetupUser     = "cluster_setup"
	clusterLink          = "cluster_net"
	clusterRule          = "cluster_bulk_rule"
	clusterBulkPool      = "cluster_bulk_pool"
	clusterHighPool      = "cluster_high_pool"
	clusterCoord         = "cluster_coord"
)

// ClusterReport is the cluster experiment's outcome.
type ClusterReport struct {
	// Skipped, when set, says why nothing was measured; the other fields
	// are then empty.
	Skipped string `json:"skipped,omitempty"`
	// Nodes describe the servers, coordinator first.
	Nodes []string `json:"nodes,omitempty"`
	// LowRows and HighRows are the rows of wt1, wt2 and of wt3, wt4.
	LowRows  int `json:"low_table_rows,omitempty"`
	HighRows int `json:"high_table_rows,omitempty"`
	// CapacityBytes is the shard link's capacity in bytes/s; Capacity
	// spells it; Scale is 10GE over it, how much slower than the
	// reference's network the link is.
	CapacityBytes int64   `json:"capacity_bytes_per_second,omitempty"`
	Capacity      string  `json:"capacity,omitempty"`
	Scale         float64 `json:"scale_from_10ge,omitempty"`
	// Calibrated is set when the capacity came from StreamMBps, what one
	// low-priority join moved through an unlimited link.
	Calibrated bool    `json:"calibrated,omitempty"`
	StreamMBps float64 `json:"one_join_stream_mb_per_s,omitempty"`
	// LinkQueue is the shard link's device FIFO.
	LinkQueue
	// ReferenceSQL is the reference's query; LowSQL and HighSQL what ran.
	ReferenceSQL string `json:"reference_sql,omitempty"`
	LowSQL       string `json:"low_sql,omitempty"`
	HighSQL      string `json:"high_sql,omitempty"`
	// ReferenceFetch, LowFetch and HighFetch are the remote SQL of each
	// query's foreign scans, from EXPLAIN VERBOSE on the coordinator.
	ReferenceFetch []string `json:"reference_remote_sql,omitempty"`
	LowFetch       []string `json:"low_remote_sql,omitempty"`
	HighFetch      []string `json:"high_remote_sql,omitempty"`
	// LowPlan is the low-priority join's plan (EXPLAIN VERBOSE, COSTS
	// OFF).
	LowPlan string `json:"low_plan,omitempty"`
	// ReferenceBytes, LowBytes and HighBytes are what one run of each
	// query moved from the data nodes to the coordinator, in bytes
	// (counted on the shard link).
	ReferenceBytes int64 `json:"reference_shard_bytes,omitempty"`
	LowBytes       int64 `json:"low_shard_bytes,omitempty"`
	HighBytes      int64 `json:"high_shard_bytes,omitempty"`
	// HighStatements is how many statements one high-priority join ran
	// on the shard connections, each a round trip; HighStatementKinds
	// counts them by their first word ("3 START, 6 DECLARE, ...").
	HighStatements     int    `json:"high_shard_statements,omitempty"`
	HighStatementKinds string `json:"high_shard_statement_kinds,omitempty"`
	// ShardApplication is the application_name of a shard session as
	// sluice saw it: postgres_fdw.application_name with the coordinator
	// backend's process id ("fdw 4711").
	ShardApplication string `json:"shard_application_name,omitempty"`
	// FetchSize is postgres_fdw's fetch_size on every foreign server.
	FetchSize int `json:"fetch_size,omitempty"`
	// Distributed is how many distributed statements (coordinator
	// statements with shard statements) sluice saw end during the run,
	// both users', calibration included; ShardStatements how many shard
	// statements, ShardUnlinked how many of the client users' shard
	// roles' belonged to no coordinator statement.
	Distributed     int `json:"distributed_statements,omitempty"`
	ShardStatements int `json:"shard_statements,omitempty"`
	ShardUnlinked   int `json:"shard_statements_unlinked"`
	// UnlinkedKinds counts the unlinked ones by first word ("5 ABORT").
	UnlinkedKinds string `json:"shard_statements_unlinked_kinds,omitempty"`
	// LowStatement is one low-priority join on the unlimited link, the
	// run that measured LowBytes, as a distributed statement;
	// PenalisedStatement the last penalised low-priority join of the
	// largest N with network_control on (stopped at the point's end).
	LowStatement       *ClusterDistStatement `json:"low_statement,omitempty"`
	PenalisedStatement *ClusterDistStatement `json:"penalised_statement,omitempty"`
	Reps               int                   `json:"reps_per_point,omitempty"`
	// Setup are the sluice console statements; ClusterSetup the
	// coordinator's SQL that made the cluster (passwords masked).
	Setup        []string     `json:"setup,omitempty"`
	ClusterSetup []string     `json:"cluster_setup,omitempty"`
	Rows         []ClusterRow `json:"points,omitempty"`
}

// ClusterPlan is the scale of the cluster experiment.
type ClusterPlan struct {
	// Ns are the numbers of concurrent low-priority joins; 0 is always
	// measured (the base of the slowdown) and added when missing. Empty
	// skips the experiment.
	Ns []int
	// Reps is how many times the high-priority join is measured per
	// point; 0 means 10.
	Reps int
	// LowRows is the rows of wt1 and wt2, the low-priority join's tables;
	// 0 means 24000 (about 190 MB of wt1's wide columns). HighRows is the
	// rows of wt3 and wt4, the high-priority join's; 0 means 300 (about
	// 2.4 MB).
	LowRows, HighRows int
	// Capacity is the shard link's capacity in bytes/s; 0 calibrates it
	// as FlowPlan.Capacity says, from what one low-priority join moves
	// through an unlimited link, capped by MaxCapacity (0: 100 MB/s).
	Capacity, MaxCapacity int64
	// PenaltyRule is the rule that penalises the low-priority joins;
	// its PenaltyTimeout defaults to 30 s.
	PenaltyRule
	// Kernel is the experiment's scale over the kernel network
	// (Options.Network NetworkKernel), which measures it in place of Ns.
	Kernel KernelClusterPlan
}

// validate checks c and fills in its defaults; a plan with no points is
// left alone (skipped).
func (c *ClusterPlan) validate() error {
	if run, err := pointsBeside(&c.Kernel, c.Kernel.Ns, &c.Ns, 30, "low-priority joins", "0 to 30"); !run {
		return err
	}
	orDefault(&c.Reps, 10)
	orDefault(&c.LowRows, 24000)
	orDefault(&c.HighRows, 300)
	if c.LowRows > 1_000_000 || c.HighRows > 1_000_000 {
		return &UsageError{Msg: fmt.Sprintf("cluster tables of %d and %d rows out of range (1 to 1000000)", c.LowRows, c.HighRows)}
	}
	orDefault(&c.MaxCapacity, 100_000_000)
	c.PenaltyRule.defaults(30 * time.Second)
	return nil
}

// clusterRun is the state of one cluster experiment.
type clusterRun struct {
	*env
	plan ClusterPlan

	// nodes are the servers, coordinator first.
	nodes []*pgtemp.Server
	// coord is the client route to the coordinator; shards the shard
	// routes' names, shardAddrs their addresses by data node (from 1).
	coord      string
	shards     map[string]bool
	shardAddrs map[int]string
	// passwords of the roles, by name.
	passwords map[string]string
	capacity  int64
	// app is the application_name of a shard session, once seen.
	app string
	// watch counts the statements that end on the cluster's routes.
	watch *distWatch

	// Over the kernel network (cluster_kernel.go): nodeStart, when set,
	// returns how to start node i's server (inside its namespace); dial,
	// when set, opens the clients' connections (from the coordinator's
	// namespace); mappingExtra ends every client user's user mapping's
	// options (the data nodes trust their local socket, which sluice
	// reaches them by, so postgres_fdw must not require a password).
	nodeStart    func(i int) func(*exec.Cmd) error
	dial         dialFunc
	mappingExtra string
}

// clusterSkip says why the cluster experiment cannot run on db, or "".
func clusterSkip(db *database) string {
	switch db.kind {
	case BackendPostgres:
		return ""
	case BackendEmbedded:
		return "the embedded backend cannot host postgres_fdw; run with --backend postgres"
	}
	return "it starts its own PostgreSQL servers (coordinator and data nodes), so it runs with --backend postgres, not on a --dsn"
}

func runCluster(ctx context.Context, e *env) (rep *ClusterReport, err error) {
	r := &clusterRun{env: e, plan: e.plan.Cluster}
	p := r.p
	p.printf("\n== Experiment 5: cluster ==\n")
	if why := clusterSkip(r.db); why != "" {
		p.step("skipped: %s", why)
		return &ClusterReport{Skipped: why}, nil
	}
	rep = &ClusterReport{
		LowRows: r.plan.LowRows, HighRows: r.plan.HighRows, Reps: r.plan.Reps, FetchSize: clusterFetchSize,
		ReferenceSQL: clusterRefSQL, LowSQL: clusterLowSQL, HighSQL: clusterHighSQL,
		LinkQueue: defaultQueue(),
	}
	p.printf("a coordinator and %d data nodes (postgres_fdw); high-priority join %q measured %d times per point under N low-priority joins %q in a loop\n",
		clusterDataNodes, clusterHighSQL, r.plan.Reps, clusterLowSQL)
	if err := r.startNodes(ctx); err != nil {
		return nil, err
	}
	defer r.stopNodes()
	for i, n := range r.nodes {
		role := fmt.Sprintf("data node %d", i)
		if i == 0 {
			role = "coordinator"
		}
		rep.Nodes = append(rep.Nodes, fmt.Sprintf("%s: %s, shared_buffers 32MB", role, n.Version()))
	}

	rep.Setup = []string{
		fmt.Sprintf("CREATE LINK %s", clusterLink),
		fmt.Sprintf("CREATE EXCEPT RULE %s WITH (bandwidth=%s, elapsedtime=%s, action='penalty')", clusterRule, fmtNum(r.plan.RuleBandwidth), fmtNum(r.plan.RuleElapsed)),
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (except_rule='%s')", clusterBulkPool, clusterRule),
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (network_priority='high')", clusterHighPool),
		fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", clusterLowUser, clusterBulkPool),
		fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", clusterHighUser, clusterHighPool),
		fmt.Sprintf("SET except_check_period = '%s'", units.FormatDuration(r.plan.CheckPeriod)),
	}
	if err := r.s.exec(ctx, rep.Setup...); err != nil {
		return nil, err
	}
	defer r.s.restore(ctx, fmt.Sprintf("ALTER LINK %s WITH (capacity=DEFAULT)", clusterLink), "RESET network_control")
	if err := r.addRoutes(); err != nil {
		return nil, err
	}
	r.watch = &distWatch{coord: clusterCoord, shards: r.shards, lowUser: clusterLowUser, rule: clusterRule,
		shardUsers: map[string]bool{clusterLowShardUser: true, clusterHighShardUser: true}}
	defer r.s.reg.Watch(r.watch)()
	setup, err := r.build(ctx)
	rep.ClusterSetup = setup
	if err != nil {
		return nil, err
	}
	if err := r.explain(ctx, rep); err != nil {
		return nil, err
	}

	if err := r.measureQueries(ctx, rep); err != nil {
		return nil, err
	}

	capacity := r.plan.Capacity
	if capacity <= 0 {
		rate, err := r.calibrate(ctx)
		if err != nil {
			return nil, err
		}
		capacity = pickCapacity(rate, r.plan.MaxCapacity)
		rep.Calibrated, rep.StreamMBps = true, rate/1e6
		p.step("calibration: one low-priority join moves %.0f MB/s from the data nodes through an unlimited link", rate/1e6)
	}
	rep.CapacityBytes, rep.Capacity = capacity, units.FormatRate(capacity)
	rep.Scale = tenGE / float64(capacity)
	r.capacity = capacity
	if err := r.s.exec(ctx, fmt.Sprintf("ALTER LINK %s WITH (capacity='%s')", clusterLink, units.FormatRate(capacity))); err != nil {
		return nil, err
	}
	p.step("shard link %s: capacity %s, 10GE scaled down %.0fx", clusterLink, rep.Capacity, rep.Scale)

	maxN := slices.Max(r.plan.Ns)
	err = sweep(ctx, r.s, r.plan.Ns, func(control string, n int, base float64) (float64, error) {
		pen := r.watch.penalised()
		row, one, err := r.point(ctx, control, n)
		if err != nil {
			return 0, err
		}
		if last := r.watch.penalised(); control == "on" && n == maxN && last != pen {
			rep.PenalisedStatement = last
		}
		if n == 0 && rep.HighBytes == 0 {
			rep.HighBytes, rep.HighStatements, rep.HighStatementKinds = one.bytes, one.statements, one.kinds
		}
		row.ModelMs = row.against(control, n, base, rep.HighBytes, int64(rep.HighStatements), rep.QueueBytes, capacity)
		rep.Rows = append(rep.Rows, row)
		p.step("network_control %s, N=%d: high-priority join %.1f ms (median; mean %.1f, min %.1f, max %.1f) = %.2fx; low-priority joins %.1f MB/s; unpenalised low-priority joins in %.0f%% of samples",
			control, n, row.ElapsedMs, row.MeanMs, row.MinMs, row.MaxMs, row.Slowdown, row.LowMBps, 100*row.Unpenalised)
		p.step("network_control %s, N=%d: %d distributed statements; %d low-priority joins ended, %d penalised, rule fired %d times (%d in their except_info); %d shard statements, %d penalised in their own right",
			control, n, row.Distributed, row.LowJoins, row.LowPenalised, row.RuleFirings, row.LowFirings, row.ShardStatements, row.ShardPenalised)
		return row.ElapsedMs, nil
	})
	if err != nil {
		return nil, err
	}
	total := r.watch.snapshot()
	rep.Distributed, rep.ShardStatements, rep.ShardUnlinked, rep.UnlinkedKinds = total.Distributed, total.Shard, total.ShardUnlinked, total.kinds()
	p.step("sluice saw %d distributed statements, with %d shard statements; %d of the client users' shard statements linked to no coordinator statement (%s)",
		rep.Distributed, rep.ShardStatements, rep.ShardUnlinked, rep.UnlinkedKinds)
	p.table(rep.distTable())
	return rep, nil
}

// ClusterRow is one point: the high-priority join under N low-priority
// joins.
type ClusterRow struct {
	Control string `json:"network_control"` // "off" or "on"
	N       int    `json:"low_joins"`
	// PointTimes are the high-priority join's elapsed times as its
	// client saw them.
	PointTimes
	// ModelMs, with network_control off, is what a shared FIFO that the
	// low-priority joins keep full predicts: elapsed at N = 0 plus
	// (N x the join's shard bytes + its shard statements x FIFO size) /
	// capacity, the extra transfer of sharing the link with N flows and
	// one wait behind the full FIFO per round trip. 0 when not computed.
	ModelMs float64 `json:"fifo_model_ms,omitempty"`
	// LowMBps is what the low-priority joins' shard sessions received
	// together while the high-priority join was measured.
	LowMBps float64 `json:"low_mb_per_s"`
	// PenaltySeconds is how long after the low-priority joins started
	// every one of their statements was penalised.
	PenaltySeconds float64 `json:"penalty_seconds,omitempty"`
	// Unpenalised is the share of the samples taken while the
	// high-priority join ran (every 20 ms) that saw a low-priority join
	// running unpenalised: one that began during the measured join (its
	// predecessor having ended) and had not yet run long enough for the
	// rule.
	Unpenalised float64 `json:"unpenalised_share"`
	// Distributed is how many distributed statements ended during the
	// point (from the end of its warm-up high-priority join to the end of
	// the last low-priority join), both users'.
	Distributed int `json:"distributed_statements"`
	// LowJoins is how many of them were low-priority joins, completed or
	// stopped at the point's end; LowPenalised how many of those were
	// penalised; LowFirings the rule's firings in their except_info;
	// LowAllNodes how many had shard statements on every shard route.
	LowJoins     int `json:"low_joins_ended"`
	LowPenalised int `json:"low_joins_penalised"`
	LowFirings   int `json:"low_join_rule_firings"`
	LowAllNodes  int `json:"low_joins_on_every_shard"`
	// RuleFirings is the workload manager's count of the rule's
	// firings during the point (SHOW RULES), on any statement.
	RuleFirings int `json:"rule_firings"`
	// ShardStatements is how many shard statements ended during the
	// point; ShardPenalised how many were penalised in their own right
	// (their pool has no rule: a shard session is demoted through its
	// coordinator's statement, its statements keep their own flag).
	ShardStatements int `json:"shard_statements"`
	ShardPenalised  int `json:"shard_statements_penalised"`
	// HighClassShare is the shard link's high-class bytes while the
	// high-priority join was measured over what its shard sessions
	// received: 1 when its shard flows take its coordinator pool's high
	// class (the low-priority joins' are never high).
	HighClassShare float64 `json:"high_class_share"`
	// SamplesMs are the measurements, in order.
	SamplesMs []float64 `json:"samples_ms"`
}

// ns returns the Ns measured, in order.
func (c *ClusterReport) ns() []int { return sweepNs(c.Rows) }

// row returns the point for control and n, or nil.
func (c *ClusterReport) row(control string, n int) *ClusterRow { return sweepAt(c.Rows, control, n) }

// tables prints the points, unless the experiment was skipped.
func (c *ClusterReport) tables(p *printer) { p.tableIf(c.Skipped == "", c.table) }

// table returns the cluster points, one row per N with both settings
// side by side.
func (c *ClusterReport) table() table {
	mb := func(r *ClusterRow) float64 { return r.LowMBps }
	return sweepTable(c.Rows, "low-priority joins N", []string{"off: low MB/s", "on: low MB/s", "on: unpenalised"}, func(off, on *ClusterRow) []string {
		unpen := "-"
		if on != nil {
			unpen = fmt.Sprintf("%.0f%%", 100*on.Unpenalised)
		}
		return []string{mbpsCell(off, mb), mbpsCell(on, mb), unpen}
	})
}

// charts returns the slowdown chart.
func (c *ClusterReport) charts() []chartFile {
	return chartsIf(len(c.Rows) > 0, chartFile{FileClusterSlowdown, c.SlowdownChart})
}

// SlowdownChart is the chart of the high-priority join's slowdown
// against the number of low-priority joins, with network control off
// and on.
func (c *ClusterReport) SlowdownChart() *svg.Chart {
	return sweepChart(&svg.Chart{
		Title:  fmt.Sprintf("Cluster: high-priority join under N low-priority joins (link %s)", c.Capacity),
		XLabel: "concurrent low-priority joins N",
		YLabel: "slowdown (elapsed / elapsed at N = 0)",
		ZeroX:  true, ZeroY: true,
		Guides: []svg.Guide{{Y: referenceSlowdown, Label: fmt.Sprintf("reference, control off, N = 10: %dx", referenceSlowdown)}},
	}, c.Rows)
}

// referenceSlowdown is the reference cluster's slowdown of the small
// join under 10 concurrent broadcast joins, network control off.
const referenceSlowdown = 55

func (c *ClusterReport) writeMarkdown(w io.Writer) {
	if !heading(w, 5, "cluster", c.Skipped) {
		return
	}
	fmt.Fprintf(w, "The flow-control experiment again, on a real cluster: PostgreSQL's own sharding, postgres_fdw. "+
		"A coordinator and %d data nodes, each a throwaway server:\n\n", len(c.Nodes)-1)
	for _, n := range c.Nodes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintf(w, "\nThe reference's tables `wt1..wt4(c1 int, c2 int, b1 char(1000), b2 char(7000))` are hash-partitioned by c1 on the coordinator, "+
		"each partition a foreign table on one data node, where the data lives: wt1 and wt2 have %d rows each, wt3 and wt4 %d (c2 = c1, unique, so each join counts every row once). "+
		"Every shard connection goes through a sluice route, one per data node, the foreign servers pointing at the routes' ports, and the routes share one link, the cluster's network. "+
		"The client's sessions reach the coordinator through a route of their own.\n\n", c.LowRows, c.HighRows)
	fmt.Fprintf(w, "The shard link has a capacity of %s, 10GE scaled down %.0fx, and a device FIFO of %s (%.1f ms to drain at that capacity). ",
		c.Capacity, c.Scale, units.FormatBytes(c.QueueBytes), drainMs(c.QueueBytes, c.CapacityBytes))
	if c.Calibrated {
		fmt.Fprintf(w, "As in experiment 2 the capacity is calibrated: one low-priority join moved %.0f MB/s from the data nodes through an unlimited link, "+
			"and the link is the largest step at most a tenth of that, so that the link, not the processor, is the bottleneck. ", c.StreamMBps)
	}
	fmt.Fprintf(w, "\n\nThe reference's query is\n\n```sql\n%s\n```\n\n", c.ReferenceSQL)
	fmt.Fprintf(w, "but postgres_fdw fetches only the columns a query needs, so as written each foreign scan fetches (EXPLAIN VERBOSE on the coordinator):\n\n```sql\n%s\n```\n\n",
		strings.Join(c.ReferenceFetch, "\n"))
	fmt.Fprintf(w, "and one run moves %s from the data nodes, %.0f bytes per row of wt1: too little to load a link, where the reference's broadcast moves whole rows. "+
		"So the query that runs counts the first table's wide columns, which makes postgres_fdw fetch them, with the same join and the same count:\n\n```sql\n%s\n```\n\n"+
		"Its foreign scans fetch:\n\n```sql\n%s\n```\n\n",
		units.FormatBytes(c.ReferenceBytes), float64(c.ReferenceBytes)/float64(max(c.LowRows, 1)), c.LowSQL, strings.Join(c.LowFetch, "\n"))
	fmt.Fprintf(w, "and one run moves %s (%.0f bytes per row of wt1). The plan:\n\n```\n%s\n```\n\n",
		units.FormatBytes(c.LowBytes), float64(c.LowBytes)/float64(max(c.LowRows, 1)), c.LowPlan)
	if d := c.LowStatement; d != nil {
		fmt.Fprintf(w, "sluice sees that run as one distributed statement: the client's statement on route %s, with postgres_fdw's statements on the shard routes "+
			"(its cursors' DECLARE, FETCH of %d rows each, CLOSE, and the remote transaction) as its shard statements; ", clusterCoord, c.FetchSize)
		d.writeMarkdown(w)
	}
	fmt.Fprintf(w, "N low-priority joins run in a loop, by user %s, while the high-priority join, the same query on wt3 and wt4 by user %s, is measured %d times per point (elapsed is the median); "+
		"one run of it moves %s from the data nodes:\n\n```sql\n%s\n```\n\n",
		clusterLowUser, clusterHighUser, c.Reps, units.FormatBytes(c.HighBytes), c.HighSQL)
	fmt.Fprintf(w, "The pools bind the client users, on the coordinator's route: %s's pool has the penalty exception rule, %s's network_priority high. "+
		"Each client user reaches the data nodes as a shard role of its own (%s, %s), which no pool binds: the shard sessions are in the default pool, with no rule. "+
		"sluice links every shard session to the coordinator session whose backend opened it, so a shard session's bytes go at the class of the coordinator's pool "+
		"(the high-priority join's shard flows are high class), and the rule on %s's pool judges each low-priority join on its total, every shard's bytes included. In sluice:\n\n```sql\n%s;\n```\n\n",
		clusterLowUser, clusterHighUser, clusterLowShardUser, clusterHighShardUser, clusterLowUser, strings.Join(c.Setup, ";\n"))
	fmt.Fprintf(w, "On the coordinator (passwords masked; `postgres_fdw.application_name = 'fdw %%p'` is set too, which names the coordinator backend in each shard session, the name sluice's distributed_application_name matches: "+
		"sluice saw shard sessions named `%s`):\n\n```sql\n%s;\n```\n\n",
		c.ShardApplication, strings.Join(c.ClusterSetup, ";\n"))
	fmt.Fprintf(w, "An exception rule applies to a statement once it has run elapsedtime and, for bandwidth, at least a second. "+
		"A FETCH of postgres_fdw's default fetch_size (%d rows) lasts far less, but the rule is on the coordinator's pool and judges the distributed statement, "+
		"which lasts the whole join: it fires once per low-priority join, and its penalty demotes the coordinator session and every shard session linked to it, "+
		"so each later FETCH of that join starts in the low class. "+
		"Each point waits until every low-priority join is penalised before each measurement; "+
		"a low-priority join that begins during the measured join (its predecessor having ended) runs unpenalised until the rule fires, and the unpenalised column is the share of 20 ms samples during the measured joins that saw one. "+
		"Slowdown is the elapsed time over the elapsed time at N = 0 with the same setting.\n\n", c.FetchSize)
	c.table().markdown(w)
	c.writeDistributed(w)
	fmt.Fprintf(w, "\n![cluster slowdown vs N](%s)\n\n", FileClusterSlowdown)
	c.writeDiscussion(w)
}

// writeDiscussion says where the figures differ from the reference's and
// why.
func (c *ClusterReport) writeDiscussion(w io.Writer) {
	n := sweepMaxN(c.Rows)
	off, on, base, onBase := c.row("off", n), c.row("on", n), c.row("off", 0), c.row("on", 0)
	if off == nil || on == nil || base == nil || onBase == nil || n == 0 || c.CapacityBytes <= 0 {
		return
	}
	ms := func(b int64) float64 { return drainMs(b, c.CapacityBytes) }
	fifo := ms(c.QueueBytes)
	fmt.Fprintf(w, "What the numbers show: with network_control off, at N = %d the high-priority join took %.1f ms against %.1f ms on an idle link, %.2fx; "+
		"with it on, %.1f ms, %.2fx. The reference measured %dx at N = 10 with its network scheduler off.\n\n",
		n, off.ElapsedMs, base.ElapsedMs, off.Slowdown, on.ElapsedMs, on.Slowdown, referenceSlowdown)
	fmt.Fprintf(w, "- **network_control = off**: the high-priority join is a chain of round trips on the shard connections: one run made %d statements there (%s), "+
		"postgres_fdw's transaction, cursor, FETCH and CLOSE for each partition, one partition after another. "+
		"While the low-priority joins keep the shared FIFO full, every answer waits behind it, %s at %s = %.0f ms, "+
		"on top of sharing the capacity with N flows. The FIFO model column is that arithmetic, elapsed at N = 0 plus (N x %s + %d x %s) / capacity; "+
		"at N = %d the join took %.0f%% of it (below it where the FIFO was not full at every round trip, above it by the processor time the bytes cost).%s%s\n",
		c.HighStatements, c.HighStatementKinds, units.FormatBytes(c.QueueBytes), c.Capacity, fifo,
		units.FormatBytes(c.HighBytes), c.HighStatements, units.FormatBytes(c.QueueBytes), n, 100*off.ElapsedMs/max(off.ModelMs, 1e-9), c.oneJoinText(), c.flatText(n))
	lowWait := float64(c.HighStatements) * ms(c.LowQueueBytes)
	lost := on.ElapsedMs - onBase.ElapsedMs
	rest := "which can account for all of it"
	if lost > lowWait {
		rest = "and the rest is processor time, which the low-priority joins take from the same 2 cores"
	}
	fmt.Fprintf(w, "- **network_control = on**: the penalised joins' shard flows are low class, the high-priority join's high, and at most low_priority_queue_bytes (%s, %.1f ms at %s) of the low bytes sit in the FIFO, "+
		"so each round trip of the high-priority join waits behind that much at most: %d x %.1f ms = %.0f ms against the %.0f ms it lost at N = %d, %s. "+
		"The penalty is the distributed statement's, so a low-priority join runs at normal priority only in its first second: %s.\n\n",
		units.FormatBytes(c.LowQueueBytes), ms(c.LowQueueBytes), c.Capacity, c.HighStatements, ms(c.LowQueueBytes), lowWait,
		lost, n, rest, unpenalisedText(on))
	fmt.Fprintf(w, "Why not 55x: with the FIFO full, the slowdown is about 1 + N + R x FIFO / B, R the join's round trips and B its bytes (here 1 + %d + %d x %s / %s = %.0f at N = %d), "+
		"a ratio of the workload's shape, not of the link's speed: the link here is 10GE scaled down %.0fx, the tables are scaled to fit a machine of 2 cores that runs four servers, sluice and every client, "+
		"and the FIFO is the experiments' %s, %.0f ms here where a 10GE link drains it in %.1f ms. "+
		"The reference's 55x comes from its own workload, whose round trips and bytes per small join are not known here, so the figures compare in shape "+
		"(a large slowdown with control off, growing with N; a small one with it on), not in value. "+
		"Its broadcast joins also sent from every data node to every other at once, several flows per join, where postgres_fdw scans the partitions one after another and pulls everything to the coordinator, so each low-priority join is one flow at a time and the high-priority join pays the FIFO once per round trip of a serial plan. "+
		"postgres_fdw also fetches only the columns a query needs: the reference's query as written moves %s here and would not load the link at all.\n\n",
		n, c.HighStatements, units.FormatBytes(c.QueueBytes), units.FormatBytes(c.HighBytes),
		1+float64(n)+float64(c.HighStatements)*float64(c.QueueBytes)/float64(max(c.HighBytes, 1)), n,
		c.Scale, units.FormatBytes(c.QueueBytes), fifo, float64(c.QueueBytes)/tenGE*1000, units.FormatBytes(c.ReferenceBytes))
}

// flatText says, when the slowdown with control off at N = 1 is more
// than half of that at N = n, that one flow makes most of it; "" when
// not.
func (c *ClusterReport) flatText(n int) string {
	one, last := c.row("off", 1), c.row("off", n)
	if one == nil || last == nil || n <= 1 || one.Slowdown <= last.Slowdown/2 {
		return ""
	}
	return fmt.Sprintf(" So one low-priority join makes most of the slowdown (%.2fx at N = 1), and more of them add only their share of the link (%.2fx at N = %d).",
		one.Slowdown, last.Slowdown, n)
}

// oneJoinText says how far one low-priority join fills the FIFO: each of
// its FETCHes is a round trip of fetch_size rows, and when those are
// fewer bytes than the FIFO holds one join alone leaves it partly empty
// between its FETCHes. "" without an N = 1 point or a model.
func (c *ClusterReport) oneJoinText() string {
	one := c.row("off", 1)
	if one == nil || one.ModelMs <= 0 || c.LowRows <= 0 {
		return ""
	}
	fetch := int64(c.FetchSize) * c.LowBytes / int64(c.LowRows)
	if fetch >= c.QueueBytes {
		return ""
	}
	full := ""
	for _, n := range c.ns() {
		if r := c.row("off", n); n > 1 && r != nil && r.ModelMs > 0 && r.ElapsedMs >= 0.8*r.ModelMs {
			full = fmt.Sprintf("; from N = %d on the joins' FETCHes overlap and keep it about full (%.0f%% of the model)", n, 100*r.ElapsedMs/r.ModelMs)
			break
		}
	}
	return fmt.Sprintf(" A low-priority join is itself a chain of round trips: each FETCH brings %d rows, %s of wt1, less than the FIFO holds, "+
		"so one join alone leaves the FIFO partly empty while its next FETCH makes its way, and at N = 1 the high-priority join took %.0f%% of the model (%.2fx)%s.",
		c.FetchSize, units.FormatBytes(fetch), 100*one.ElapsedMs/one.ModelMs, one.Slowdown, full)
}

// unpenalisedText says how often the samples during the measured joins
// of r saw an unpenalised low-priority shard statement.
func unpenalisedText(r *ClusterRow) string {
	if r.Unpenalised == 0 {
		return fmt.Sprintf("at N = %d no sample taken during the measured joins saw one", r.N)
	}
	return fmt.Sprintf("at N = %d the samples taken during the measured joins saw one in %.0f%% of them", r.N, 100*r.Unpenalised)
}

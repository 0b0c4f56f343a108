package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/redact"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/units"
)

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
	// RuleBandwidth and RuleElapsed are the exception rule's thresholds,
	// in MB/s and seconds; 0 means 0.05 and 0.5.
	RuleBandwidth, RuleElapsed float64
	// CheckPeriod is except_check_period; at least 100 ms.
	CheckPeriod time.Duration
	// PenaltyTimeout bounds each wait for the low-priority shard
	// statements to be penalised before a measurement; 0 means 30 s.
	PenaltyTimeout time.Duration
}

// validate checks c and fills in its defaults; a plan with no points is
// left alone (skipped).
func (c *ClusterPlan) validate() error {
	if len(c.Ns) == 0 {
		return nil
	}
	if err := inRange(c.Ns, 30, "low-priority joins", "0 to 30"); err != nil {
		return err
	}
	c.Ns = withZero(c.Ns)
	orDefault(&c.Reps, 10)
	orDefault(&c.LowRows, 24000)
	orDefault(&c.HighRows, 300)
	if c.LowRows > 1_000_000 || c.HighRows > 1_000_000 {
		return &UsageError{Msg: fmt.Sprintf("cluster tables of %d and %d rows out of range (1 to 1000000)", c.LowRows, c.HighRows)}
	}
	orDefault(&c.MaxCapacity, 100_000_000)
	orDefault(&c.RuleBandwidth, 0.05)
	orDefault(&c.RuleElapsed, 0.5)
	c.CheckPeriod = max(c.CheckPeriod, 100*time.Millisecond)
	orDefault(&c.PenaltyTimeout, 30*time.Second)
	return nil
}

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

// clusterSettings are the servers' settings: small, for a 2-core
// machine running four of them. jit is off so a plan's compile time
// does not land in the measured join.
var clusterSettings = []string{
	"shared_buffers=32MB", "max_connections=40", "work_mem=16MB", "maintenance_work_mem=32MB",
	"jit=off", "max_wal_size=256MB", "autovacuum=off", "max_parallel_workers_per_gather=0",
}

// coordinatorSettings are the coordinator's own: shard connections name
// the coordinator's backend (so a sluice that links distributed
// statements sees them), and a backend whose client went away stops
// within a second.
var coordinatorSettings = []string{
	"postgres_fdw.application_name=fdw %p", "client_connection_check_interval=1s",
}

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
	// QueueBytes is the shard link's device FIFO; LowQueueBytes the bound
	// on low-priority bytes in it with network_control on.
	QueueBytes    int64 `json:"device_queue_bytes,omitempty"`
	LowQueueBytes int64 `json:"low_priority_queue_bytes,omitempty"`
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

// ClusterRow is one point: the high-priority join under N low-priority
// joins.
type ClusterRow struct {
	Control string `json:"network_control"` // "off" or "on"
	N       int    `json:"low_joins"`
	// ElapsedMs is the median elapsed time of the high-priority join as
	// its client saw it; MeanMs, MinMs and MaxMs describe the same
	// measurements.
	ElapsedMs float64 `json:"elapsed_ms"`
	MeanMs    float64 `json:"mean_ms"`
	MinMs     float64 `json:"min_ms"`
	MaxMs     float64 `json:"max_ms"`
	// Slowdown is ElapsedMs over ElapsedMs at N = 0 with the same
	// network_control.
	Slowdown float64 `json:"slowdown"`
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

// clusterRun is the state of one cluster experiment.
type clusterRun struct {
	plan ClusterPlan
	db   *database
	bin  string // PostgreSQL's bin directory; "" searches
	s    *sluice
	clk  clock.Clock
	log  *slog.Logger
	p    *printer

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

func runCluster(ctx context.Context, r *clusterRun) (rep *ClusterReport, err error) {
	p := r.p
	p.printf("\n== Experiment 5: cluster ==\n")
	if why := clusterSkip(r.db); why != "" {
		p.step("skipped: %s", why)
		return &ClusterReport{Skipped: why}, nil
	}
	rep = &ClusterReport{
		LowRows: r.plan.LowRows, HighRows: r.plan.HighRows, Reps: r.plan.Reps, FetchSize: clusterFetchSize,
		ReferenceSQL: clusterRefSQL, LowSQL: clusterLowSQL, HighSQL: clusterHighSQL,
		QueueBytes: link.DefaultQueueSize, LowQueueBytes: link.DefaultLowPriorityQueueBytes,
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
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		r.s.exec(cctx, fmt.Sprintf("ALTER LINK %s WITH (capacity=DEFAULT)", clusterLink), "RESET network_control")
	}()
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

	// What one run of each query moves, on the unlimited link.
	var refRows int64
	if rep.ReferenceBytes, refRows, err = r.measureOnce(ctx, clusterLowUser, clusterRefSQL); err != nil {
		return nil, err
	}
	prev := r.watch.lastOf(clusterLowUser)
	if rep.LowBytes, _, err = r.measureOnce(ctx, clusterLowUser, clusterLowSQL); err != nil {
		return nil, err
	}
	waitIdle(ctx, r.clk, func() bool { return r.watch.lastOf(clusterLowUser) != prev })
	if rep.LowStatement = r.watch.lastOf(clusterLowUser); rep.LowStatement == prev {
		return nil, errors.New("the low-priority join was no distributed statement: sluice linked no shard statement to it")
	}
	p.step("the low-priority join is one distributed statement: nodes %s", rep.LowStatement.Nodes)
	rep.ShardApplication = r.app
	if refRows != int64(r.plan.LowRows) {
		return nil, fmt.Errorf("the reference join counted %d rows, want %d", refRows, r.plan.LowRows)
	}
	p.step("one run moves %s from the data nodes as the reference writes it, %s as it runs here (wide columns fetched)",
		units.FormatBytes(rep.ReferenceBytes), units.FormatBytes(rep.LowBytes))

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

	for _, control := range []string{"off", "on"} {
		if err := r.s.exec(ctx, "SET network_control = "+control); err != nil {
			return nil, err
		}
		var base float64
		for _, n := range r.plan.Ns {
			pen := r.watch.penalised()
			row, one, err := r.point(ctx, control, n)
			if err != nil {
				return nil, fmt.Errorf("network_control %s, N=%d: %w", control, n, err)
			}
			if last := r.watch.penalised(); control == "on" && n == slices.Max(r.plan.Ns) && last != pen {
				rep.PenalisedStatement = last
			}
			if n == 0 {
				base = row.ElapsedMs
				if rep.HighBytes == 0 {
					rep.HighBytes, rep.HighStatements, rep.HighStatementKinds = one.bytes, one.statements, one.kinds
				}
			}
			if base > 0 {
				row.Slowdown = row.ElapsedMs / base
			}
			if control == "off" {
				row.ModelMs = base
				if n > 0 {
					row.ModelMs += float64(int64(n)*rep.HighBytes+int64(rep.HighStatements)*rep.QueueBytes) / float64(capacity) * 1000
				}
			}
			rep.Rows = append(rep.Rows, row)
			p.step("network_control %s, N=%d: high-priority join %.1f ms (median; mean %.1f, min %.1f, max %.1f) = %.2fx; low-priority joins %.1f MB/s; unpenalised low-priority joins in %.0f%% of samples",
				control, n, row.ElapsedMs, row.MeanMs, row.MinMs, row.MaxMs, row.Slowdown, row.LowMBps, 100*row.Unpenalised)
			p.step("network_control %s, N=%d: %d distributed statements; %d low-priority joins ended, %d penalised, rule fired %d times (%d in their except_info); %d shard statements, %d penalised in their own right",
				control, n, row.Distributed, row.LowJoins, row.LowPenalised, row.RuleFirings, row.LowFirings, row.ShardStatements, row.ShardPenalised)
		}
	}
	total := r.watch.snapshot()
	rep.Distributed, rep.ShardStatements, rep.ShardUnlinked, rep.UnlinkedKinds = total.Distributed, total.Shard, total.ShardUnlinked, total.kinds()
	p.step("sluice saw %d distributed statements, with %d shard statements; %d of the client users' shard statements linked to no coordinator statement (%s)",
		rep.Distributed, rep.ShardStatements, rep.ShardUnlinked, rep.UnlinkedKinds)
	p.table(rep.distTable())
	return rep, nil
}

// startNodes starts the coordinator and the data nodes, in parallel.
func (r *clusterRun) startNodes(ctx context.Context) error {
	r.p.step("starting %d throwaway PostgreSQL servers (a coordinator and %d data nodes)", clusterDataNodes+1, clusterDataNodes)
	r.nodes = make([]*pgtemp.Server, clusterDataNodes+1)
	errs := make([]error, len(r.nodes))
	var wg sync.WaitGroup
	for i := range r.nodes {
		settings := clusterSettings
		if i == 0 {
			settings = append(append([]string(nil), clusterSettings...), coordinatorSettings...)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.nodes[i], errs[i] = pgtemp.Start(ctx, pgtemp.Options{BinDir: r.bin, Clock: r.clk, Logger: r.log, Settings: settings})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		r.stopNodes()
		return err
	}
	return nil
}

// stopNodes stops every server started and removes its directory.
func (r *clusterRun) stopNodes() {
	for _, n := range r.nodes {
		if n != nil {
			if err := n.Close(); err != nil {
				r.log.Warn("cluster node", "err", err)
			}
		}
	}
	r.nodes = nil
}

// addRoutes puts a sluice route in front of every server: one per data
// node on the shard link, for the coordinator's shard connections, and
// one to the coordinator on the default link, for the clients.
func (r *clusterRun) addRoutes() error {
	r.shards, r.shardAddrs = map[string]bool{}, map[int]string{}
	add := func(name, linkName string, srv *pgtemp.Server) (string, error) {
		u, err := url.Parse(srv.URL())
		if err != nil {
			return "", err
		}
		addr, err := r.s.st.AddRoute(stack.Route{Route: config.Route{
			Name: name, Listen: "127.0.0.1:0", Upstream: u.Host, Protocol: protoPostgres, Link: linkName}})
		if err != nil {
			return "", fmt.Errorf("route %s: %w", name, err)
		}
		return addr.String(), nil
	}
	var err error
	if r.coord, err = add(clusterCoord, "default", r.nodes[0]); err != nil {
		return err
	}
	for i := 1; i < len(r.nodes); i++ {
		name := fmt.Sprintf("cluster_dn%d", i)
		addr, err := add(name, clusterLink, r.nodes[i])
		if err != nil {
			return err
		}
		r.shards[name], r.shardAddrs[i] = true, addr
	}
	return nil
}

// adminExec runs statements on server n as its superuser, directly.
func adminExec(ctx context.Context, n *pgtemp.Server, stmts ...string) error {
	c, err := pgconn.Connect(ctx, n.URL())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("%s: %w", firstLine(maskPasswords(q)), err)
		}
	}
	return nil
}

// maskPasswords returns q with every password literal masked
// (redact.Mask), as redact.SQL finds them in PostgreSQL's SQL.
func maskPasswords(q string) string { return redact.SQL(q, redact.PostgreSQL) }

// firstLine returns q up to its first newline, at most 100 bytes, for
// error messages.
func firstLine(q string) string {
	q, _, _ = strings.Cut(q, "\n")
	if len(q) > 100 {
		q = q[:100] + "..."
	}
	return q
}

// wtDDL is the reference's table definition.
func wtDDL(name string) string {
	return fmt.Sprintf("%s (c1 int, c2 int, b1 char(1000), b2 char(7000))", name)
}

// build makes the cluster: roles on every server, the tables' data on
// the data nodes, and on the coordinator postgres_fdw, one foreign
// server per data node (through its sluice route), the user mappings,
// and wt1..wt4 hash-partitioned by c1 into foreign partitions. It
// returns the coordinator's statements, passwords masked.
func (r *clusterRun) build(ctx context.Context) ([]string, error) {
	r.p.step("building the cluster: roles, postgres_fdw servers through the sluice routes, wt1..wt4 hash-partitioned by c1 over %d data nodes", clusterDataNodes)
	r.passwords = map[string]string{}
	var roles []string
	for _, u := range []string{clusterLowUser, clusterHighUser, clusterLowShardUser, clusterHighShardUser, clusterSetupUser} {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("random: %w", err)
		}
		r.passwords[u] = hex.EncodeToString(b)
		roles = append(roles, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", u, r.passwords[u]))
	}
	tables := []string{"wt1", "wt2", "wt3", "wt4"}
	var coord, shown []string
	do := func(q string, secret bool) {
		coord = append(coord, q)
		if secret {
			q = maskPasswords(q)
		}
		shown = append(shown, q)
	}
	for _, q := range roles {
		do(q, true)
	}
	do("CREATE EXTENSION postgres_fdw", false)
	for i := 1; i <= clusterDataNodes; i++ {
		addr := r.shardAddrs[i]
		host, port, _ := strings.Cut(addr, ":")
		do(fmt.Sprintf("CREATE SERVER dn%d FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres', sslmode 'disable', fetch_size '%d')",
			i, host, port, clusterFetchSize), false)
		// Each client user reaches the data nodes as its shard role.
		for _, m := range [][2]string{{clusterLowUser, clusterLowShardUser}, {clusterHighUser, clusterHighShardUser}} {
			do(fmt.Sprintf("CREATE USER MAPPING FOR %s SERVER dn%d OPTIONS (user '%s', password '%s')", m[0], i, m[1], r.passwords[m[1]]), true)
		}
		// The superuser's mapping, for ANALYZE: a role bound to no pool.
		do(fmt.Sprintf("CREATE USER MAPPING FOR postgres SERVER dn%d OPTIONS (user '%s', password '%s')", i, clusterSetupUser, r.passwords[clusterSetupUser]), true)
	}
	for _, t := range tables {
		do(fmt.Sprintf("CREATE TABLE %s PARTITION BY HASH (c1)", wtDDL(t)), false)
		for i := 1; i <= clusterDataNodes; i++ {
			do(fmt.Sprintf("CREATE FOREIGN TABLE %s_dn%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d) SERVER dn%d OPTIONS (table_name '%s')",
				t, i, t, clusterDataNodes, i-1, i, t), false)
		}
	}
	do(fmt.Sprintf("GRANT SELECT ON %s TO %s, %s", strings.Join(tables, ", "), clusterLowUser, clusterHighUser), false)
	if err := adminExec(ctx, r.nodes[0], coord...); err != nil {
		return shown, fmt.Errorf("coordinator: %w", err)
	}

	// The data lives on the data nodes. Each node's rows are those of
	// its partition, chosen by the coordinator's own hash
	// (satisfies_hash_partition), and generated on the node.
	rows := map[string]int{"wt1": r.plan.LowRows, "wt2": r.plan.LowRows, "wt3": r.plan.HighRows, "wt4": r.plan.HighRows}
	ids := map[string][]string{} // table -> ids per remainder, as array literals
	c, err := pgconn.Connect(ctx, r.nodes[0].URL())
	if err != nil {
		return shown, fmt.Errorf("coordinator: %w", err)
	}
	for _, t := range tables {
		for k := 0; k < clusterDataNodes; k++ {
			res, err := c.Exec(ctx, fmt.Sprintf("SELECT coalesce(array_agg(i ORDER BY i), '{}')::text FROM generate_series(1, %d) i WHERE satisfies_hash_partition('%s'::regclass, %d, %d, i)",
				rows[t], t, clusterDataNodes, k)).ReadAll()
			if err != nil || len(res) == 0 || len(res[0].Rows) != 1 {
				c.Close(context.WithoutCancel(ctx))
				return shown, fmt.Errorf("coordinator: partition ids of %s: %v", t, err)
			}
			ids[t] = append(ids[t], string(res[0].Rows[0][0]))
		}
	}
	c.Close(context.WithoutCancel(ctx))

	errs := make([]error, clusterDataNodes)
	var wg sync.WaitGroup
	for i := 1; i <= clusterDataNodes; i++ {
		stmts := append([]string(nil), roles...)
		for _, t := range tables {
			// Unlogged: the data is disposable, and no WAL is written.
			stmts = append(stmts, "CREATE UNLOGGED TABLE "+wtDDL(t),
				fmt.Sprintf("INSERT INTO %s SELECT i, i, lpad(i::text, 1000, 'b'), lpad(i::text, 7000, 'w') FROM unnest('%s'::int[]) i", t, ids[t][i-1]))
		}
		stmts = append(stmts,
			fmt.Sprintf("GRANT SELECT ON %s TO %s, %s, %s", strings.Join(tables, ", "), clusterLowShardUser, clusterHighShardUser, clusterSetupUser),
			"VACUUM ANALYZE")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := adminExec(ctx, r.nodes[i], stmts...); err != nil {
				errs[i-1] = fmt.Errorf("data node %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return shown, err
	}
	r.p.step("loaded wt1, wt2 (%d rows each) and wt3, wt4 (%d rows each) on the data nodes; analyzing the foreign tables on the coordinator (every row crosses the unlimited link once)", r.plan.LowRows, r.plan.HighRows)
	// ANALYZE fetches every row of the foreign partitions (through the
	// routes, on the still unlimited link), for the planner's row counts.
	do("ANALYZE "+strings.Join(tables, ", "), false)
	if err := adminExec(ctx, r.nodes[0], coord[len(coord)-1]); err != nil {
		return shown, fmt.Errorf("coordinator: %w", err)
	}
	return shown, nil
}

// explain records what each query's foreign scans fetch, and the
// low-priority join's plan.
func (r *clusterRun) explain(ctx context.Context, rep *ClusterReport) error {
	c, err := pgconn.Connect(ctx, r.nodes[0].URL())
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	plan := func(q string) ([]string, error) {
		res, err := c.Exec(ctx, "EXPLAIN (VERBOSE, COSTS OFF) "+q).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("explain: %w", err)
		}
		var lines []string
		for _, rr := range res {
			for _, row := range rr.Rows {
				lines = append(lines, string(row[0]))
			}
		}
		return lines, nil
	}
	remote := func(lines []string) []string {
		var out []string
		seen := map[string]bool{}
		for _, l := range lines {
			_, sql, ok := strings.Cut(l, "Remote SQL: ")
			if ok && !seen[sql] {
				seen[sql] = true
				out = append(out, sql)
			}
		}
		return out
	}
	for _, q := range []struct {
		sql   string
		fetch *[]string
	}{{clusterRefSQL, &rep.ReferenceFetch}, {clusterLowSQL, &rep.LowFetch}, {clusterHighSQL, &rep.HighFetch}} {
		lines, err := plan(q.sql)
		if err != nil {
			return err
		}
		*q.fetch = remote(lines)
		if q.sql == clusterLowSQL {
			rep.LowPlan = strings.Join(lines, "\n")
		}
		if len(*q.fetch) == 0 {
			return fmt.Errorf("the plan of %q has no foreign scan:\n%s", q.sql, strings.Join(lines, "\n"))
		}
	}
	for _, f := range rep.LowFetch {
		r.p.step("low-priority join fetches: %s", f)
	}
	return nil
}

// clientURL is the URL of a client session of user to the coordinator,
// through its route.
func (r *clusterRun) clientURL(user string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, r.passwords[user]), Host: r.coord, Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// connect opens a client session of user to the coordinator.
func (r *clusterRun) connect(ctx context.Context, user string) (*pgconn.PgConn, error) {
	c, err := pgconn.Connect(ctx, r.clientURL(user))
	if err != nil {
		return nil, fmt.Errorf("connect as %s: %w", user, err)
	}
	return c, nil
}

// count runs a count query on c and returns the count.
func count(ctx context.Context, c *pgconn.PgConn, q string) (int64, error) {
	res, err := c.Exec(ctx, q).ReadAll()
	if err != nil {
		return 0, err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 1 {
		return 0, fmt.Errorf("%s: no count", q)
	}
	return strconv.ParseInt(string(res[0].Rows[0][0]), 10, 64)
}

// shardBytes returns the bytes the data nodes sent through the shard
// link so far.
func (r *clusterRun) shardBytes() int64 {
	l := r.s.links.Link(clusterLink)
	if l == nil {
		return 0
	}
	var n int64
	for _, c := range l.Stats().Directions[link.Down].Classes {
		n += c.Bytes
	}
	return n
}

// shardClassBytes returns the bytes the data nodes sent through the
// shard link so far in class c.
func (r *clusterRun) shardClassBytes(c link.Class) int64 {
	l := r.s.links.Link(clusterLink)
	if l == nil {
		return 0
	}
	return l.Stats().Directions[link.Down].Classes[c].Bytes
}

// shardUserBytes returns the bytes the data nodes sent so far to the
// open shard sessions of the shard role user. A shard session's pool is
// its own (the same for both roles), its class its coordinator's, so the
// sessions' counters tell the two jobs apart where the link's cannot.
func (r *clusterRun) shardUserBytes(user string) int64 {
	var n int64
	for _, s := range r.s.reg.Sessions() {
		if r.shards[s.Info.Route] && s.User() == user {
			n += s.BytesDown()
		}
	}
	return n
}

// measureOnce runs q once as user and returns the bytes the data nodes
// sent for it and the count it returned.
func (r *clusterRun) measureOnce(ctx context.Context, user, q string) (bytes, n int64, err error) {
	c, err := r.connect(ctx, user)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	b0 := r.shardBytes()
	n, err = count(ctx, c, q)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", q, err)
	}
	if r.app == "" {
		// The coordinator backend keeps its shard connections while
		// its client's session lasts.
		r.app = r.shardApplication()
	}
	return r.shardBytes() - b0, n, nil
}

// shardApplication returns the application_name of an open shard
// session, "" if there is none.
func (r *clusterRun) shardApplication() string {
	for _, s := range r.s.reg.Sessions() {
		if r.shards[s.Info.Route] {
			return s.Application()
		}
	}
	return ""
}

// calibrate runs the low-priority join in a loop on one session through
// the unlimited shard link and returns the best rate the data nodes sent
// at over three 0.5 s windows after 0.5 s of warm-up, in bytes/s.
func (r *clusterRun) calibrate(ctx context.Context) (float64, error) {
	r.p.step("calibration: one low-priority join in a loop through an unlimited shard link")
	j, err := r.startLow(ctx, 0)
	if err != nil {
		return 0, err
	}
	const warm, window, windows = 500 * time.Millisecond, 500 * time.Millisecond, 3
	var rate float64
	err = clock.Sleep(ctx, r.clk, warm)
	for i := 0; i < windows && err == nil; i++ {
		n0, t0 := r.shardBytes(), r.clk.Now()
		err = clock.Sleep(ctx, r.clk, window)
		if secs := r.clk.Now().Sub(t0).Seconds(); secs > 0 {
			rate = max(rate, float64(r.shardBytes()-n0)/secs)
		}
	}
	jerr := r.stopLow(ctx, []*lowJob{j})
	r.drain(ctx)
	if err != nil {
		return 0, err
	}
	if jerr != nil {
		return 0, jerr
	}
	if rate == 0 {
		return 0, errors.New("calibration: the low-priority join moved nothing")
	}
	return rate, nil
}

// lowJob is one client session running the low-priority join in a loop.
type lowJob struct {
	c *pgconn.PgConn
	// cancel ends the loop's context: stopLow's last resort.
	cancel  context.CancelFunc
	stopped atomic.Bool
	done    chan struct{}
	err     error // set before done is closed
}

// startLow connects a low-priority session and starts its loop. i
// numbers it in errors.
func (r *clusterRun) startLow(ctx context.Context, i int) (*lowJob, error) {
	c, err := r.connect(ctx, clusterLowUser)
	if err != nil {
		return nil, err
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &lowJob{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		ctx := jctx
		for !j.stopped.Load() {
			n, err := count(ctx, c, clusterLowSQL)
			switch {
			case err != nil && j.stopped.Load():
				return
			case err != nil:
				j.err = fmt.Errorf("low-priority join %d: %w", i, err)
				return
			case n != int64(r.plan.LowRows):
				j.err = fmt.Errorf("low-priority join %d counted %d rows, want %d", i, n, r.plan.LowRows)
				return
			}
		}
	}()
	return j, nil
}

// failed returns the job's error once it has ended on one, else nil.
func (j *lowJob) failed() error {
	select {
	case <-j.done:
		return j.err
	default:
		return nil
	}
}

// stopLow ends the jobs. A data node's backend that is sending a
// partition into the congested link acts on a cancel only once its
// answer is sent, which can take a minute, so stopLow terminates the
// low-priority user's backends on the data nodes (the coordinator's
// statements then fail at once) and cancels the coordinator's
// statements, again every 250 ms until every loop has ended, for up to
// 30 s, then ends the loops' contexts. It closes the sessions and
// returns the first error a job met before it was stopped.
func (r *clusterRun) stopLow(ctx context.Context, jobs []*lowJob) error {
	if len(jobs) == 0 {
		return nil
	}
	for _, j := range jobs {
		j.stopped.Store(true)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	kill := fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '%s'", clusterLowShardUser)
	for {
		pending := 0
		for _, j := range jobs {
			select {
			case <-j.done:
			default:
				pending++
			}
		}
		if pending == 0 || cctx.Err() != nil {
			break
		}
		for _, n := range r.nodes[1:] {
			if err := adminExec(cctx, n, kill); err != nil {
				r.log.Warn("terminate low-priority shard backends", "err", err)
			}
		}
		for _, j := range jobs {
			select {
			case <-j.done:
			default:
				j.c.CancelRequest(cctx)
			}
		}
		if clock.Sleep(cctx, r.clk, 250*time.Millisecond) != nil {
			break
		}
	}
	var first error
	for _, j := range jobs {
		j.cancel()
		<-j.done
		j.c.Close(context.WithoutCancel(ctx))
		if j.err != nil && first == nil {
			first = j.err
		}
	}
	return first
}

// lowJoins counts the low-priority joins running on the coordinator
// (their client statements, each a distributed statement) and how many
// of them are penalised.
func (r *clusterRun) lowJoins() (running, penalised int) {
	for _, st := range r.s.reg.Active() {
		snap := st.Snapshot()
		if snap.User == clusterLowUser && snap.Route == clusterCoord {
			running++
			if snap.Penalized {
				penalised++
			}
		}
	}
	return running, penalised
}

// lowShardRunning reports whether a statement of the low-priority shard
// role runs on a shard route.
func (r *clusterRun) lowShardRunning() bool {
	for _, st := range r.s.reg.Active() {
		if s := st.Session; r.shards[s.Info.Route] && s.User() == clusterLowShardUser {
			return true
		}
	}
	return false
}

// drain waits, for up to 10 s, until no low-priority join and none of
// its shard statements runs and the shard link's queues are empty.
func (r *clusterRun) drain(ctx context.Context) {
	waitIdle(ctx, r.clk, func() bool {
		if running, _ := r.lowJoins(); running > 0 || r.lowShardRunning() {
			return false
		}
		l := r.s.links.Link(clusterLink)
		if l == nil {
			return true
		}
		st := l.Stats()
		return st.Directions[link.Down].QueueBytes()+st.Directions[link.Up].QueueBytes() == 0
	})
}

// waitPenalised waits until every job's low-priority join runs and is
// penalised (the rule fired on the distributed statement), printing
// progress when verbose. After PenaltyTimeout it prints a warning and
// lets the measurement go on; it fails when a low-priority job fails.
func (r *clusterRun) waitPenalised(ctx context.Context, jobs []*lowJob, verbose bool) error {
	deadline := r.clk.Now().Add(r.plan.PenaltyTimeout)
	next := r.clk.Now().Add(2 * time.Second)
	for {
		for _, j := range jobs {
			if err := j.failed(); err != nil {
				return err
			}
		}
		running, pen := r.lowJoins()
		if running == len(jobs) && pen == running {
			return nil
		}
		now := r.clk.Now()
		if now.After(deadline) {
			r.p.step("  warning: %d of %d low-priority joins penalised after %s (%d running); measuring anyway", pen, len(jobs), r.plan.PenaltyTimeout, running)
			return nil
		}
		if verbose && now.After(next) {
			r.p.step("  %d/%d low-priority joins running, %d penalised", running, len(jobs), pen)
			next = now.Add(2 * time.Second)
		}
		if err := clock.Sleep(ctx, r.clk, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// highRun is what one high-priority join did on the shard connections.
type highRun struct {
	bytes      int64  // bytes the data nodes sent for it
	statements int    // statements it ran on them
	kinds      string // those statements counted by first word
}

// point measures the high-priority join under n low-priority joins and
// returns the row and what the last high-priority join did on the shard
// connections (its statements are counted at N = 0 only).
func (r *clusterRun) point(ctx context.Context, control string, n int) (row ClusterRow, one highRun, err error) {
	row = ClusterRow{Control: control, N: n}
	high, err := r.connect(ctx, clusterHighUser)
	if err != nil {
		return row, one, err
	}
	defer high.Close(context.WithoutCancel(ctx))
	// Warm up: the coordinator backend opens its shard connections.
	if _, err := count(ctx, high, clusterHighSQL); err != nil {
		return row, one, fmt.Errorf("high-priority join: %w", err)
	}

	var jobs []*lowJob
	c0, f0 := r.watch.snapshot(), r.s.rules.Stats().RuleFirings(clusterRule)
	defer func() {
		if serr := r.stopLow(ctx, jobs); serr != nil && err == nil {
			err = serr
		}
		r.drain(ctx)
		d := r.watch.snapshot().minus(c0)
		row.Distributed, row.LowJoins, row.LowPenalised, row.LowFirings, row.LowAllNodes = d.Distributed, d.LowJoins, d.LowPenalised, d.LowFirings, d.LowAllNodes
		row.ShardStatements, row.ShardPenalised = d.Shard, d.ShardPenalised
		row.RuleFirings = int(r.s.rules.Stats().RuleFirings(clusterRule) - f0)
	}()
	for i := 0; i < n; i++ {
		j, err := r.startLow(ctx, i)
		if err != nil {
			return row, one, err
		}
		jobs = append(jobs, j)
	}
	if n > 0 {
		r.p.step("network_control %s, N=%d: started %s; waiting until each is penalised", control, n, plural(n, "low-priority join"))
		t0 := r.clk.Now()
		if err := r.waitPenalised(ctx, jobs, true); err != nil {
			return row, one, err
		}
		row.PenaltySeconds = r.clk.Now().Sub(t0).Seconds()
		// Let the bytes queued before the penalty leave the FIFO.
		settle := max(100*time.Millisecond, 2*time.Duration(float64(link.DefaultQueueSize)/float64(r.capacity)*float64(time.Second)))
		if err := clock.Sleep(ctx, r.clk, settle); err != nil {
			return row, one, err
		}
	}

	var done atomic.Int64
	prog := r.p.every(ctx, 2*time.Second, func() string {
		return fmt.Sprintf("network_control %s, N=%d: measured %d/%d", control, n, done.Load(), r.plan.Reps)
	})
	defer prog()
	var times []float64
	var samples, unpen int
	var measured time.Duration
	var lowBytes, highBytes, highClass int64
	for i := 0; i < r.plan.Reps; i++ {
		if n > 0 {
			if err := r.waitPenalised(ctx, jobs, false); err != nil {
				return row, one, err
			}
		}
		// Sample the low-priority joins while the high-priority one runs.
		sctx, stopSampling := context.WithCancel(ctx)
		sampled := make(chan [2]int, 1)
		go func() {
			var s, u int
			for {
				if running, pen := r.lowJoins(); running > pen {
					u++
				}
				s++
				if clock.Sleep(sctx, r.clk, 20*time.Millisecond) != nil {
					sampled <- [2]int{s, u}
					return
				}
			}
		}()
		b0, l0, h0, t0 := r.shardUserBytes(clusterHighShardUser), r.shardUserBytes(clusterLowShardUser), r.shardClassBytes(link.High), r.clk.Now()
		got, err := count(ctx, high, clusterHighSQL)
		d := r.clk.Now().Sub(t0)
		stopSampling()
		su := <-sampled
		if err != nil {
			return row, one, fmt.Errorf("high-priority join: %w", err)
		}
		if got != int64(r.plan.HighRows) {
			return row, one, fmt.Errorf("high-priority join counted %d rows, want %d", got, r.plan.HighRows)
		}
		one.bytes = r.shardUserBytes(clusterHighShardUser) - b0
		highBytes += one.bytes
		highClass += r.shardClassBytes(link.High) - h0
		if n == 0 {
			one.statements, one.kinds = r.highStatements(t0)
		}
		lowBytes += r.shardUserBytes(clusterLowShardUser) - l0
		measured += d
		samples += su[0]
		unpen += su[1]
		times = append(times, durMs(d))
		done.Add(1)
	}
	if n > 0 && measured > 0 {
		row.LowMBps = float64(lowBytes) / 1e6 / measured.Seconds()
	}
	if highBytes > 0 {
		row.HighClassShare = float64(highClass) / float64(highBytes)
	}
	if n > 0 && samples > 0 {
		row.Unpenalised = float64(unpen) / float64(samples)
	}
	row.ElapsedMs, row.MeanMs, row.MinMs, row.MaxMs = summarize(times)
	row.SamplesMs = times
	return row, one, nil
}

// highStatements counts the high-priority join's statements on the shard
// connections that began at or after since, and them by first word.
func (r *clusterRun) highStatements(since time.Time) (n int, kinds string) {
	by := map[string]int{}
	var order []string
	for _, st := range r.s.reg.Recent() {
		snap := st.Snapshot()
		if snap.User != clusterHighShardUser || !r.shards[snap.Route] || snap.Started.Before(since) {
			continue
		}
		n++
		w, _, _ := strings.Cut(strings.TrimSpace(snap.SQL), " ")
		w = strings.ToUpper(w)
		if by[w] == 0 {
			order = append(order, w)
		}
		by[w]++
	}
	parts := make([]string, len(order))
	for i, w := range order {
		parts[i] = fmt.Sprintf("%d %s", by[w], w)
	}
	return n, strings.Join(parts, ", ")
}

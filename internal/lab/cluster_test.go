package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

// tinyClusterPlan is the cluster experiment at the smallest scale that
// still goes through every step: two points, small tables. The
// low-priority join's partitions (2000 wide rows, 16 MB) still take
// seconds each at the link's share, longer than the rule needs.
func tinyClusterPlan() Plan {
	return Plan{Name: "tiny", Cluster: ClusterPlan{
		Ns: []int{0, 2}, Reps: 3, LowRows: 6000, HighRows: 150,
		PenaltyRule: PenaltyRule{RuleBandwidth: 0.05, RuleElapsed: 0.5, CheckPeriod: 100 * time.Millisecond, PenaltyTimeout: 20 * time.Second},
	}}
}

// TestRunCluster is `sluice lab --backend postgres --experiment cluster`
// at a small scale: four throwaway servers, postgres_fdw through sluice
// routes, and the report.
func TestRunCluster(t *testing.T) {
	if !needFDW(t, "37s") {
		return
	}
	out := t.TempDir()
	tmp := privateTmp(t)
	rep, progress := runProgress(t, 5*time.Minute, Options{Backend: BackendPostgres, Plan: tinyClusterPlan(), Out: out, Logger: testLogger()})
	if rep.Latency != nil || rep.Flow != nil || rep.Concurrency != nil || rep.Cluster == nil {
		t.Fatalf("experiments run: latency %v, flow %v, concurrency %v, cluster %v", rep.Latency != nil, rep.Flow != nil, rep.Concurrency != nil, rep.Cluster != nil)
	}
	checkReportFiles(t, out, rep)
	c := checkClusterFiles(t, out, rep.Cluster)
	for _, want := range []string{
		"== Experiment 5: cluster ==", "starting 4 throwaway PostgreSQL servers", "low-priority join fetches:",
		"calibration: one low-priority join", "the low-priority join is one distributed statement: nodes cluster_coord:",
		"waiting until each is penalised", "network_control  N  distributed statements", "low-priority joins N  off: elapsed (ms)", "wrote " + out,
	} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q", want)
		}
	}

	// The shapes, loosely: the wide columns are what loads the link,
	// sharing it slows the high-priority join, and control keeps it
	// faster than no control does.
	if c.ReferenceBytes <= 0 || c.LowBytes < int64(c.LowRows)*8000 || c.LowBytes < 100*c.ReferenceBytes {
		t.Errorf("one run moves %d bytes as the reference writes it, %d as it runs (%d rows)", c.ReferenceBytes, c.LowBytes, c.LowRows)
	}
	if c.HighBytes < int64(c.HighRows)*8000 {
		t.Errorf("the high-priority join moved %d bytes for %d rows", c.HighBytes, c.HighRows)
	}
	for _, f := range c.ReferenceFetch {
		if strings.Contains(f, "b1") || strings.Contains(f, "b2") {
			t.Errorf("the reference query fetches a wide column: %s", f)
		}
	}
	wide := false
	for _, f := range c.LowFetch {
		wide = wide || strings.Contains(f, "b2")
	}
	if !wide || len(c.LowFetch) < 2 {
		t.Errorf("low-priority join fetches %q, want wt1's wide columns and wt2", c.LowFetch)
	}
	if !strings.HasPrefix(c.ShardApplication, "fdw ") {
		t.Errorf("shard sessions named %q, want postgres_fdw.application_name's \"fdw PID\"", c.ShardApplication)
	}
	if c.HighStatements < 3*clusterDataNodes || !strings.Contains(c.HighStatementKinds, "FETCH") {
		t.Errorf("the high-priority join ran %d shard statements (%s)", c.HighStatements, c.HighStatementKinds)
	}
	off, on := c.row("off", 2), c.row("on", 2)
	if off == nil || on == nil {
		t.Fatalf("points %+v", c.Rows)
	}
	if off.Slowdown <= 1 || off.Slowdown <= on.Slowdown {
		t.Errorf("slowdown at N=2: off %.2fx, on %.2fx; want off > 1 and off > on", off.Slowdown, on.Slowdown)
	}
	if off.LowMBps <= 0 || on.LowMBps <= 0 || off.LowMBps > 1.1*float64(c.CapacityBytes)/1e6 {
		t.Errorf("low-priority joins moved %.1f / %.1f MB/s on a %s link", off.LowMBps, on.LowMBps, c.Capacity)
	}
	if on.PenaltySeconds < 0.5 {
		t.Errorf("penalised after %.2f s, before the rule's elapsedtime", on.PenaltySeconds)
	}
	checkClusterDistributed(t, c)
	if !strings.Contains(strings.Join(c.ClusterSetup, "\n"), "PASSWORD '***'") || strings.Contains(strings.Join(c.ClusterSetup, "\n"), "password '0") {
		t.Errorf("cluster setup shows a password or no mask:\n%s", strings.Join(c.ClusterSetup, "\n"))
	}
	// Every server stopped and its directory removed.
	if left := pgDirs(t, tmp); len(left) > 0 {
		t.Errorf("server directories left behind: %v", left)
	}
}

// checkClusterDistributed checks what sluice saw of the distributed
// statements: each low-priority join one distributed statement over the
// three shard routes, the rule firing once on each penalised one and on
// nothing else, and the high-priority join's shard flows in the high
// class with network_control on.
func checkClusterDistributed(t *testing.T, c *ClusterReport) {
	t.Helper()
	shardRoutes := func(name string, d *ClusterDistStatement) {
		t.Helper()
		if d == nil {
			t.Fatalf("%s: no distributed statement recorded", name)
		}
		routes := map[string]bool{}
		var up, down int64
		for _, n := range d.PerNode {
			routes[n.Route] = true
			up, down = up+n.BytesUp, down+n.BytesDown
			if n.Statements < 3 {
				t.Errorf("%s: %d shard statements on %s, want at least a DECLARE, a FETCH and a CLOSE", name, n.Statements, n.Route)
			}
		}
		for i := 1; i <= clusterDataNodes; i++ {
			if r := fmt.Sprintf("cluster_dn%d", i); !routes[r] {
				t.Errorf("%s: nodes %s lack %s", name, d.Nodes, r)
			}
		}
		if len(routes) != clusterDataNodes || len(d.PerNode) != clusterDataNodes {
			t.Errorf("%s: nodes %+v, want the %d shard routes once each", name, d.PerNode, clusterDataNodes)
		}
		if d.TotalUp != d.BytesUp+up || d.TotalDown != d.BytesDown+down {
			t.Errorf("%s: totals %d/%d, own %d/%d plus nodes %d/%d", name, d.TotalUp, d.TotalDown, d.BytesUp, d.BytesDown, up, down)
		}
		if want := fmt.Sprintf("%s:%d/%d,", clusterCoord, d.BytesUp, d.BytesDown); !strings.HasPrefix(d.Nodes, want) || strings.Count(d.Nodes, ",") != clusterDataNodes {
			t.Errorf("%s: nodes column %q, want %q first and one entry per shard route", name, d.Nodes, want)
		}
		if d.User != clusterLowUser || d.Pool != clusterBulkPool || d.SQL != clusterLowSQL {
			t.Errorf("%s: %s in pool %s ran %q", name, d.User, d.Pool, d.SQL)
		}
	}
	// The run that measured LowBytes: every byte the shard link carried
	// for it, but the new shard connections' start-up, is in its nodes.
	low := c.LowStatement
	shardRoutes("the low-priority join on the unlimited link", low)
	if low.TotalDown-low.BytesDown > c.LowBytes || float64(low.TotalDown-low.BytesDown) < 0.99*float64(c.LowBytes) || low.Outcome != "ok" {
		t.Errorf("the low-priority join's nodes received %d bytes (%s), the shard link carried %d", low.TotalDown-low.BytesDown, low.Outcome, c.LowBytes)
	}
	pen := c.PenalisedStatement
	shardRoutes("a penalised low-priority join", pen)
	if !pen.Penalised || len(pen.Except) != 1 || !strings.Contains(pen.Except[0], clusterRule) {
		t.Errorf("penalised statement: penalised %v, except_info %q; want one firing of %s", pen.Penalised, pen.Except, clusterRule)
	}
	// Every shard statement of the clients' roles belongs to a
	// distributed statement, the remote ABORTs and FETCHes of the joins
	// stopped at each point's end included.
	if c.Distributed == 0 || c.ShardStatements <= c.Distributed || c.ShardUnlinked != 0 {
		t.Errorf("%d distributed statements, %d shard statements, %d of the clients' unlinked (%s)", c.Distributed, c.ShardStatements, c.ShardUnlinked, c.UnlinkedKinds)
	}
	for _, r := range c.Rows {
		name := fmt.Sprintf("network_control %s, N=%d", r.Control, r.N)
		// Every measured high-priority join and every low-priority join
		// is a distributed statement.
		if r.Distributed != c.Reps+r.LowJoins {
			t.Errorf("%s: %d distributed statements, want %d high-priority and %d low-priority joins", name, r.Distributed, c.Reps, r.LowJoins)
		}
		if r.ShardPenalised != 0 || r.ShardStatements < r.Distributed*clusterDataNodes {
			t.Errorf("%s: %d shard statements, %d penalised in their own right", name, r.ShardStatements, r.ShardPenalised)
		}
		// Once per penalised join, on nothing else.
		if r.LowFirings != r.LowPenalised || r.RuleFirings != r.LowFirings {
			t.Errorf("%s: rule fired %d times, %d in the low-priority joins' except_info, %d of them penalised", name, r.RuleFirings, r.LowFirings, r.LowPenalised)
		}
		if r.LowAllNodes < r.LowPenalised {
			t.Errorf("%s: %d penalised low-priority joins, %d with shard statements on every shard route", name, r.LowPenalised, r.LowAllNodes)
		}
		switch {
		case r.N == 0 && (r.LowJoins != 0 || r.RuleFirings != 0):
			t.Errorf("%s: %d low-priority joins, %d firings", name, r.LowJoins, r.RuleFirings)
		case r.N > 0 && (r.LowJoins < r.N || r.LowPenalised < r.N):
			// The harness waited until each of the N was penalised.
			t.Errorf("%s: %d low-priority joins ended, %d penalised; want at least %d of each", name, r.LowJoins, r.LowPenalised, r.N)
		}
		// With no low-priority join ended before the point's end, none
		// began during a measurement: each was penalised throughout.
		if r.N > 0 && r.LowJoins == r.N && r.Unpenalised != 0 {
			t.Errorf("%s: unpenalised low-priority joins in %.0f%% of samples, though every one was penalised before the measurements", name, 100*r.Unpenalised)
		}
		if r.Control == "on" && r.HighClassShare < 0.99 {
			t.Errorf("%s: %.0f%% of the high-priority join's shard bytes in the high class, want all", name, 100*r.HighClassShare)
		}
	}
}

// privateTmp points TMPDIR at a directory of the test's own, so that the
// servers' directories go there (other tests may run servers at the same
// time), readable by the server's system user when the test runs as
// root, and returns it.
func privateTmp(t *testing.T) string {
	t.Helper()
	tmp, err := os.MkdirTemp("", "lab-cluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	return tmp
}

// TestRunClusterCancelled: a run cancelled while the low-priority joins
// load the link stops every server and removes its directory.
func TestRunClusterCancelled(t *testing.T) {
	if _, ok := needPostgres(t, "16s"); !ok {
		return
	}
	tmp := privateTmp(t)
	o := Options{Backend: BackendPostgres, Plan: tinyClusterPlan(), Logger: testLogger()}
	_, err := cancelRun(t, o, "N=2: started 2 low-priority joins", 3*time.Minute, 2*time.Minute, func() {
		if len(pgDirs(t, tmp)) != clusterDataNodes+2 {
			t.Errorf("server directories while running: %v, want the lab's server and the cluster's %d", pgDirs(t, tmp), clusterDataNodes+1)
		}
	})
	if err == nil {
		t.Fatal("cancelled Run returned no error")
	}
	if left := pgDirs(t, tmp); len(left) > 0 {
		t.Errorf("server directories left behind: %v", left)
	}
}

// pgDirs lists pgtemp's directories in dir.
func pgDirs(t *testing.T, dir string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(dir, "sluice-pg-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// checkClusterFiles checks the cluster section of report.md and its
// chart against report.json, and returns what report.json holds.
func checkClusterFiles(t *testing.T, dir string, rep *ClusterReport) *ClusterReport {
	t.Helper()
	all, md := readReport(t, dir)
	js := all.Cluster
	if js == nil {
		t.Fatal("report.json has no cluster experiment")
	}
	if !strings.Contains(md, "## Experiment 5: cluster") {
		t.Fatal("report.md has no cluster section")
	}
	if len(js.Rows) != len(rep.Rows) {
		t.Fatalf("report.json has %d cluster points, the run %d", len(js.Rows), len(rep.Rows))
	}
	checkSweep(t, "cluster", dir, md, "| low-priority joins N", FileClusterSlowdown, js.Rows, func(control string, n int, r *ClusterRow) {
		med, _, lo, hi := summarize(r.SamplesMs)
		if len(r.SamplesMs) != js.Reps || med != r.ElapsedMs || lo != r.MinMs || hi != r.MaxMs {
			t.Errorf("N=%d %s: samples %v do not give median %v, min %v, max %v (%d reps)", n, control, r.SamplesMs, r.ElapsedMs, r.MinMs, r.MaxMs, js.Reps)
		}
		if r.Unpenalised < 0 || r.Unpenalised > 1 || (n == 0 && (r.LowMBps != 0 || r.Unpenalised != 0)) {
			t.Errorf("N=%d %s: low %.1f MB/s, unpenalised share %v", n, control, r.LowMBps, r.Unpenalised)
		}
	})
	// The distributed statements' table: one row per point, as the JSON.
	dist := mdTableOf(t, md, "| network_control | N | distributed statements", len(js.Rows))
	for i, r := range js.Rows {
		cells := dist[i+1]
		if cells[0] != r.Control || cellNum(t, cells[1]) != float64(r.N) || cellNum(t, cells[2]) != float64(r.Distributed) ||
			cellNum(t, cells[4]) != float64(r.LowPenalised) || cellNum(t, cells[5]) != float64(r.RuleFirings) {
			t.Errorf("distributed statements row %v, JSON %+v", cells, r)
		}
	}
	if js.Scale <= 1 || js.CapacityBytes <= 0 || !near(js.Scale, tenGE/float64(js.CapacityBytes), 1e-9) {
		t.Errorf("scale %v for capacity %d", js.Scale, js.CapacityBytes)
	}
	return js
}

// sampleCluster is a cluster report with plausible figures, no database
// needed.
func sampleCluster() *ClusterReport {
	c := &ClusterReport{
		Nodes:   []string{"coordinator: PostgreSQL 15", "data node 1: PostgreSQL 15", "data node 2: PostgreSQL 15", "data node 3: PostgreSQL 15"},
		LowRows: 24000, HighRows: 300, CapacityBytes: 10e6, Capacity: "10MB/s", Scale: tenGE / 10e6, Calibrated: true, StreamMBps: 129,
		LinkQueue: LinkQueue{QueueBytes: 2 << 20, LowQueueBytes: 64 << 10}, ReferenceSQL: clusterRefSQL, LowSQL: clusterLowSQL, HighSQL: clusterHighSQL,
		ReferenceFetch: []string{"SELECT c2 FROM public.wt1", "SELECT c2 FROM public.wt2"},
		LowFetch:       []string{"SELECT c2, b1, b2 FROM public.wt1", "SELECT c2 FROM public.wt2"},
		HighFetch:      []string{"SELECT c2, b1, b2 FROM public.wt3", "SELECT c2 FROM public.wt4"},
		LowPlan:        "Aggregate\n  ->  Hash Join",
		ReferenceBytes: 748_000, LowBytes: 192_900_000, HighBytes: 2_410_000, HighStatements: 24, HighStatementKinds: "3 START, 6 DECLARE, 6 FETCH, 6 CLOSE, 3 COMMIT",
		FetchSize: clusterFetchSize, Reps: 3, ShardApplication: "fdw 4711",
		Distributed: 60, ShardStatements: 9000,
		LowStatement: &ClusterDistStatement{User: clusterLowUser, Pool: clusterBulkPool, SQL: clusterLowSQL, Outcome: "ok", ElapsedMs: 2100,
			Nodes:   "cluster_coord:115/66,cluster_dn1:1372/64305060,cluster_dn2:1418/64231196,cluster_dn3:1418/64199014",
			PerNode: []ClusterNode{{"cluster_dn1", 170, 1372, 64305060}, {"cluster_dn2", 172, 1418, 64231196}, {"cluster_dn3", 172, 1418, 64199014}},
			BytesUp: 115, BytesDown: 66, TotalUp: 4323, TotalDown: 192735336},
		PenalisedStatement: &ClusterDistStatement{User: clusterLowUser, Pool: clusterBulkPool, SQL: clusterLowSQL, Outcome: "error", ElapsedMs: 14200,
			Nodes:   "cluster_coord:115/0,cluster_dn1:1372/34305060,cluster_dn2:418/1231196,cluster_dn3:418/1199014",
			PerNode: []ClusterNode{{"cluster_dn1", 90, 1372, 34305060}, {"cluster_dn2", 2, 418, 1231196}, {"cluster_dn3", 2, 418, 1199014}},
			BytesUp: 115, TotalUp: 2323, TotalDown: 36735270, Penalised: true, Except: []string{"cluster_bulk_rule: bandwidth 9.80 MB/s > 0.05 (penalty)"}},
		Setup:        []string{"CREATE LINK cluster_net"},
		ClusterSetup: []string{"CREATE ROLE cluster_low LOGIN PASSWORD '***'"},
	}
	for _, control := range []string{"off", "on"} {
		for _, n := range []int{0, 1, 4, 10} {
			e := 300.0
			if control == "off" {
				e += 450 * float64(n)
			} else {
				e += 15 * float64(n)
			}
			row := ClusterRow{Control: control, N: n, PointTimes: PointTimes{ElapsedMs: e, MeanMs: e, MinMs: e - 1, MaxMs: e + 1, Slowdown: e / 300},
				SamplesMs: []float64{e - 1, e, e + 1}}
			row.Distributed, row.ShardStatements = 4+n, 100+300*n
			if control == "on" {
				row.HighClassShare = 1
			}
			if n > 0 {
				row.LowMBps, row.PenaltySeconds, row.Unpenalised = 9.5, 1.2, 0.1
				row.LowJoins, row.LowPenalised, row.LowFirings, row.RuleFirings, row.LowAllNodes = n, n, n, n, n
			}
			if control == "off" {
				row.ModelMs = 300 + float64(int64(n)*c.HighBytes+int64(c.HighStatements)*c.QueueBytes)/float64(c.CapacityBytes)*1000*float64(min(n, 1))
			}
			c.Rows = append(c.Rows, row)
		}
	}
	return c
}

func TestClusterReportFiles(t *testing.T) {
	rep := &Report{Plan: "full", Backend: BackendPostgres, Database: "throwaway PostgreSQL", Protocol: protoPostgres,
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 200, Cluster: sampleCluster()}
	rep.Targets = rep.evaluate()
	dir, files := writeFiles(t, rep)
	if len(files) != 3 || !strings.HasSuffix(files[2], FileClusterSlowdown) {
		t.Fatalf("wrote %v, want report.md, report.json and the cluster chart", files)
	}
	checkReportFiles(t, dir, rep)
	js := checkClusterFiles(t, dir, rep.Cluster)
	if js.Rows[7].Slowdown != rep.Cluster.Rows[7].Slowdown || js.HighStatements != 24 {
		t.Error("report.json does not round-trip the figures")
	}
	md, err := os.ReadFile(filepath.Join(dir, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("report.md:\n%s", md)
	}
	for _, want := range []string{
		clusterRefSQL, clusterLowSQL, clusterHighSQL, "SELECT c2, b1, b2 FROM public.wt1", "Hash Join",
		"10GE scaled down 125x", "postgres_fdw's default fetch_size (100 rows)", "The reference measured 55x at N = 10",
		"cluster_coord:115/66,cluster_dn1:1372/64305060", "| cluster_dn2 | 172 | 1418 | 64231196 |", "| network_control | N | distributed statements |",
		"sluice saw 60 distributed statements in the run, with 9000 shard statements", "The rule fired 15 times with network_control on for 15 penalised low-priority joins",
		"except_info `cluster_bulk_rule: bandwidth 9.80 MB/s > 0.05 (penalty)`", "100% of what they received went in the shard link's high class",
		"at N = 10 the high-priority join took 4800.0 ms against 300.0 ms on an idle link, 16.00x", "3 START, 6 DECLARE", "sessions named `fdw 4711`",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

func TestClusterReportSkipped(t *testing.T) {
	rep := &Report{Plan: "full", Cluster: &ClusterReport{Skipped: clusterSkip(&database{kind: BackendEmbedded})}}
	rep.Targets = rep.evaluate()
	dir, files := writeFiles(t, rep)
	if len(files) != 2 {
		t.Errorf("wrote %v, want no chart", files)
	}
	md, err := os.ReadFile(filepath.Join(dir, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Experiment 5: cluster\n\nNot measured: the embedded backend cannot host postgres_fdw") {
		t.Errorf("report.md does not say why the cluster experiment was not measured:\n%s", md)
	}
}

// TestRunClusterSkipped: on the embedded backend and on a DSN the
// experiment is skipped with one line, and the run goes on.
func TestRunClusterSkipped(t *testing.T) {
	plan, err := FullPlan().Only(ExperimentCluster)
	if err != nil {
		t.Fatal(err)
	}
	var progress testenv.Buffer
	rep, err := Run(context.Background(), Options{Plan: plan, Progress: &progress, Logger: testLogger()})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if rep.Cluster == nil || !strings.Contains(rep.Cluster.Skipped, "embedded backend") || len(rep.Cluster.Rows) != 0 {
		t.Fatalf("cluster report %+v", rep.Cluster)
	}
	if !strings.Contains(progress.String(), "skipped: the embedded backend cannot host postgres_fdw") {
		t.Errorf("progress:\n%s", progress.String())
	}
	if why := clusterSkip(&database{kind: "dsn"}); !strings.Contains(why, "--dsn") {
		t.Errorf("skip reason on a DSN: %q", why)
	}
	if why := clusterSkip(&database{kind: BackendPostgres}); why != "" {
		t.Errorf("skipped on the throwaway PostgreSQL: %q", why)
	}
}

func TestClusterPlan(t *testing.T) {
	p, err := FullPlan().Only(ExperimentCluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Cluster.Ns) == 0 || len(p.Latency.RTTs)+len(p.Flow.Ns)+len(p.Concurrency.Limits) != 0 {
		t.Errorf("Only(cluster) = %+v", p)
	}
	if q, _ := QuickPlan().Only(ExperimentCluster); len(q.Cluster.Ns) != 0 {
		t.Errorf("the quick plan has cluster points %v", q.Cluster.Ns)
	}
	o := Options{Plan: Plan{Cluster: ClusterPlan{Ns: []int{4, 1, 4}}}}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if c := o.Plan.Cluster; fmt.Sprint(c.Ns) != "[0 1 4]" || c.Reps != 10 || c.LowRows != 24000 || c.HighRows != 300 ||
		c.MaxCapacity != 100e6 || c.CheckPeriod != 100*time.Millisecond || c.PenaltyTimeout != 30*time.Second {
		t.Errorf("cluster defaults not applied: %+v", c)
	}
	for _, c := range []ClusterPlan{{Ns: []int{-1}}, {Ns: []int{31}}, {Ns: []int{1}, LowRows: 2_000_000}} {
		o := Options{Plan: Plan{Cluster: c}}
		var ue *UsageError
		if err := o.validate(); !errors.As(err, &ue) {
			t.Errorf("validate(%+v) = %v, want a UsageError", c, err)
		}
	}
}

func TestMaskPasswords(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"CREATE ROLE a LOGIN PASSWORD 'secret'", "CREATE ROLE a LOGIN PASSWORD '***'"},
		{"CREATE USER MAPPING FOR a SERVER s OPTIONS (user 'a', password 'x1')", "CREATE USER MAPPING FOR a SERVER s OPTIONS (user 'a', password '***')"},
		{"password 'a' and PASSWORD 'b'", "password '***' and PASSWORD '***'"},
		{"ALTER ROLE a WITH ENCRYPTED PASSWORD E'it''s \\\\ secret' VALID UNTIL 'infinity'", "ALTER ROLE a WITH ENCRYPTED PASSWORD '***' VALID UNTIL 'infinity'"},
		{"no secret here", "no secret here"},
	} {
		if got := maskPasswords(tt.in); got != tt.want {
			t.Errorf("maskPasswords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

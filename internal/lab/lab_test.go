package lab

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/litepg"
	"github.com/sluicelab/sluice/internal/testenv"
)

// tinyPlan is smaller than --quick: enough to go through every step of
// every experiment in a few seconds. One benchmark thread: with several,
// oltp_read_write on a 1,000-row table meets PostgreSQL deadlocks, whose
// one-second detection would swamp one-second runs.
func tinyPlan() Plan {
	return Plan{
		Name: "tiny",
		Latency: LatencyPlan{
			RTTs: ms(0, 10), PrepareRTTs: ms(0, 10),
			BenchPlan: BenchPlan{Threads: 1, Tables: 1, TableSize: 1000, Time: time.Second, ReportInterval: time.Second},
		},
		Flow: FlowPlan{
			Ns: []int{0, 2}, Reps: 3,
			PenaltyRule: PenaltyRule{RuleBandwidth: 0.05, RuleElapsed: 0.5, CheckPeriod: 100 * time.Millisecond, PenaltyTimeout: 20 * time.Second},
		},
		Concurrency: ConcurrencyPlan{Limits: []int{0, 2}, Sessions: 16, Reps: 15, Settle: time.Second, Measure: 2 * time.Second},
		WhatIf:      tinyWhatIf(),
	}
}

func testLogger() *slog.Logger { return testenv.Logger(slog.LevelWarn) }

// runTiny runs the tiny plan with o's target and checks what every run
// must produce: the report files, consistent with each other, and the
// progress lines.
func runTiny(t *testing.T, o Options) *Report {
	t.Helper()
	o.Plan, o.Out, o.Logger = tinyPlan(), t.TempDir(), testLogger()
	rep, out := runProgress(t, 3*time.Minute, o)
	checkReportFiles(t, o.Out, rep)
	for _, want := range []string{
		"== Experiment 1: latency ==", "prepare at added RTT 10 ms", "RTT 10 ms: a minimal round trip", "[ 1s ] thds:",
		"added RTT (ms)  ping (ms)", "dropped the benchmark tables",
		"== Experiment 2: flow control ==", "calibration: one bulk session streams", "waiting until their statements are penalised",
		"bulk sessions N  off: elapsed (ms)", "slowdown at N=10 with network_control off",
		"== Experiment 3: concurrency ==", "active_statements unlimited: started 16 ordinary sessions", "active_statements  high p50 (ms)",
		"high-priority p50 with active_statements=4 vs unlimited",
		"== Experiment 4: what-if ==", "sluice predicts oltp_read_write at added RTT 10 ms", "RTT 10 ms: loader, 10 rows per INSERT",
		"added RTT (ms)  predicted TPS  measured TPS", "oltp_read_write TPS at +10 ms vs sluice's prediction", "wrote " + o.Out,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q", want)
		}
	}

	// The shapes, loosely: latency costs throughput, and control keeps
	// the normal query faster than no control does.
	l := rep.Latency
	if len(l.Rows) != 2 || l.Rows[1].TPS >= l.Rows[0].TPS {
		t.Errorf("TPS did not fall with RTT: %+v", l.Rows)
	}
	if l.RoundTrips < 18 || l.RoundTrips > 24 {
		t.Errorf("%.1f round trips per transaction, want about 20", l.RoundTrips)
	}
	if len(l.Prepare) != 2 || l.Prepare[0].RTTMs != 0 || l.Prepare[1].RTTMs != 10 {
		t.Errorf("prepare rows %+v", l.Prepare)
	}
	if l.Rows[1].PingMs < 10 {
		t.Errorf("ping at 10 ms RTT took %.2f ms", l.Rows[1].PingMs)
	}
	// Every statement and answer at 10 ms waited in a delay line; none
	// did without a delay.
	if l.Rows[0].Releases != 0 || float64(l.Rows[1].Releases) < l.RoundTrips*float64(l.Rows[1].Transactions) {
		t.Errorf("delayed chunks: %d at RTT 0, %d at 10 ms for %d transactions", l.Rows[0].Releases, l.Rows[1].Releases, l.Rows[1].Transactions)
	}
	f := rep.Flow
	off, on := f.row("off", 2), f.row("on", 2)
	if off == nil || on == nil || off.Slowdown <= on.Slowdown {
		t.Errorf("slowdown at N=2: off %+v, on %+v; want off > on", off, on)
	}
	if f.NormalBytes < 990_000 || f.NormalBytes > 1_010_000 {
		t.Errorf("normal query returned %d bytes, want about 1 MB", f.NormalBytes)
	}
	if on.PenaltySeconds <= 0 {
		t.Error("no penalty wait recorded")
	}
	checkConcurrencyShape(t, rep.Concurrency)
	checkWhatIfShape(t, rep.WhatIf, l.RoundTrips)
	return rep
}

// checkConcurrencyShape checks what limiting the ordinary pool must do:
// a shorter device queue and a faster high-priority query, with the
// ordinary sessions still moving data.
func checkConcurrencyShape(t *testing.T, c *ConcurrencyReport) {
	t.Helper()
	if c.Unsupported != "" {
		t.Fatalf("concurrency experiment not measured: %s", c.Unsupported)
	}
	un, lim := c.row(0), c.row(2)
	if un == nil || lim == nil {
		t.Fatalf("concurrency points %+v, want unlimited and 2", c.Rows)
	}
	if c.OrdinaryBytes < 500_000 || c.OrdinaryBytes > 520_000 {
		t.Errorf("ordinary statement returned %d bytes, want about 512 kB", c.OrdinaryBytes)
	}
	// Unlimited, the 16 sessions keep about 16 windows queued; limited
	// to 2, a few.
	if un.QueueMeanBytes < 4*float64(c.WindowBytes) || lim.QueueMeanBytes > un.QueueMeanBytes/2 {
		t.Errorf("device queue mean %.0f B unlimited, %.0f B at active_statements 2 (window %d B)", un.QueueMeanBytes, lim.QueueMeanBytes, c.WindowBytes)
	}
	// Admission held the statements beyond the limit.
	if lim.RunningMax < 1 || lim.RunningMax > 2 || lim.WaitingMean < 1 {
		t.Errorf("at active_statements 2: %d running at most, %.1f waiting on average", lim.RunningMax, lim.WaitingMean)
	}
	if lim.P50Ms >= un.P50Ms {
		t.Errorf("high-priority p50 %.1f ms at active_statements 2, %.1f ms unlimited; want it faster", lim.P50Ms, un.P50Ms)
	}
	// Two windows in flight cover the slot's pass to the next statement
	// many times over: the link stays busy. Loosely, for a busy machine.
	if lim.ThroughputRatio < 0.5 {
		t.Errorf("ordinary throughput at active_statements 2 is %.2fx unlimited (%.1f against %.1f MB/s)", lim.ThroughputRatio, lim.MBps, un.MBps)
	}
	for _, r := range c.Rows {
		if r.MBps <= 0 || r.StatementsPerSec <= 0 {
			t.Errorf("active_statements %s: ordinary sessions moved %.1f MB/s, %.1f statements/s", limitName(r.ActiveStatements), r.MBps, r.StatementsPerSec)
		}
	}
	// Held statements wait in sluice: an ordinary statement takes longer
	// limited than unlimited only by its time held, never vanishes.
	if lim.OrdinaryMs <= 0 || un.OrdinaryMs <= 0 {
		t.Errorf("ordinary statement times %.1f / %.1f ms", un.OrdinaryMs, lim.OrdinaryMs)
	}
}

// TestRunEmbedded is `sluice lab --quick` at a smaller scale on the
// embedded backend.
func TestRunEmbedded(t *testing.T) {
	testenv.SkipShort(t, "takes 20s here")
	rep := runTiny(t, Options{Clock: clock.Real{}})
	if rep.Backend != BackendEmbedded || rep.Protocol != protoPostgres {
		t.Errorf("backend %s, protocol %s", rep.Backend, rep.Protocol)
	}
	if !strings.HasPrefix(rep.Flow.Binding, "user bulk") {
		t.Errorf("bulk binding %q, want the user binding", rep.Flow.Binding)
	}
	if !rep.Flow.Calibrated || rep.Flow.CapacityBytes < 1e6 || rep.Flow.CapacityBytes > 100e6 {
		t.Errorf("capacity %d (calibrated %v)", rep.Flow.CapacityBytes, rep.Flow.Calibrated)
	}
}

// TestRunConcurrencyOnly is `sluice lab --experiment concurrency` at a
// small scale on the embedded backend: the experiment alone, with its
// files and no others.
func TestRunConcurrencyOnly(t *testing.T) {
	testenv.SkipShort(t, "takes 5s here")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	plan, err := tinyPlan().Only(ExperimentConcurrency)
	if err != nil {
		t.Fatal(err)
	}
	var progress testenv.Buffer
	out := t.TempDir()
	rep, err := Run(ctx, Options{Plan: plan, Out: out, Progress: &progress, Logger: testLogger()})
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	if rep.Latency != nil || rep.Flow != nil || rep.Concurrency == nil {
		t.Fatalf("experiments run: latency %v, flow %v, concurrency %v", rep.Latency != nil, rep.Flow != nil, rep.Concurrency != nil)
	}
	checkReportFiles(t, out, rep)
	checkConcurrencyShape(t, rep.Concurrency)
	for _, f := range []string{FileTPSChart, FileSlowdown} {
		if _, err := os.Stat(out + "/" + f); !os.IsNotExist(err) {
			t.Errorf("%s written without its experiment: %v", f, err)
		}
	}
	if !strings.Contains(progress.String(), "== Experiment 3: concurrency ==") || strings.Contains(progress.String(), "Experiment 1") {
		t.Errorf("progress:\n%s", progress.String())
	}
	if !rep.Concurrency.Calibrated || rep.Concurrency.CapacityBytes < 1e6 || rep.Concurrency.CapacityBytes > 100e6 {
		t.Errorf("capacity %d (calibrated %v)", rep.Concurrency.CapacityBytes, rep.Concurrency.Calibrated)
	}
}

// TestRunPostgresDSN runs the experiments against the real PostgreSQL,
// in a database of their own.
func TestRunPostgresDSN(t *testing.T) {
	testenv.SkipShort(t, "takes 20s here")
	admin := testenv.PostgresURL(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	name := "lab_test_" + randomName(t)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	defer c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	// A role named bulk that the lab did not make: it must leave it
	// alone and reach the bulk pool through a second route.
	var exists bool
	c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bulk')").Scan(&exists)
	if !exists {
		if _, err := c.Exec(ctx, "CREATE ROLE bulk NOLOGIN"); err != nil {
			t.Fatal(err)
		}
		defer c.Exec(ctx, "DROP ROLE IF EXISTS bulk")
	}
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	rep := runTiny(t, Options{DSN: u.String()})
	if rep.Backend != "dsn" || rep.Latency.Driver != bench.DriverPgSQL {
		t.Errorf("backend %s, driver %s", rep.Backend, rep.Latency.Driver)
	}
	if !strings.Contains(rep.Flow.Binding, "second route") || !strings.Contains(rep.Flow.Binding, "exists already") {
		t.Errorf("bulk binding %q, want the second route because a role bulk exists", rep.Flow.Binding)
	}
	uc, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close(ctx)
	var tables int
	uc.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sbtest%'").Scan(&tables)
	if tables != 0 {
		t.Errorf("%d sbtest tables left behind", tables)
	}
	c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bulk')").Scan(&exists)
	if !exists {
		t.Error("the lab dropped a role it did not create")
	}
}

// TestRunMySQLDSN runs the experiments against the real MariaDB, in a
// database of their own.
func TestRunMySQLDSN(t *testing.T) {
	testenv.SkipShort(t, "takes 18s here")
	cfg := testenv.MySQLConfig(t)
	root, err := sql.Open("mysql", testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	name := "lab_test_" + randomName(t)
	if _, err := root.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	defer root.Exec("DROP DATABASE IF EXISTS " + name)
	bulkBefore := mysqlUserExists(t, root)
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + name}
	rep := runTiny(t, Options{DSN: u.String()})
	if rep.Protocol != protoMySQL || rep.Latency.Driver != bench.DriverMySQL || !strings.Contains(rep.Flow.BulkSQL, "seq_1_to_100000") {
		t.Errorf("protocol %s, driver %s, bulk %q", rep.Protocol, rep.Latency.Driver, rep.Flow.BulkSQL)
	}
	if !bulkBefore && !strings.HasPrefix(rep.Flow.Binding, "user bulk") {
		t.Errorf("bulk binding %q, want a login the lab created", rep.Flow.Binding)
	}
	if mysqlUserExists(t, root) != bulkBefore {
		t.Error("the bulk login the lab created is still there")
	}
	var tables int
	root.QueryRow("SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name LIKE 'sbtest%'", name).Scan(&tables)
	if tables != 0 {
		t.Errorf("%d sbtest tables left behind", tables)
	}
}

// TestRunThrowawayPostgres is `sluice lab --backend postgres`: a server
// from the installed binaries, where the lab creates its bulk login.
func TestRunThrowawayPostgres(t *testing.T) {
	if _, ok := needPostgres(t, "20s"); !ok {
		return
	}
	rep := runTiny(t, Options{Backend: BackendPostgres})
	if rep.Backend != BackendPostgres || !strings.Contains(rep.Database, "throwaway PostgreSQL") {
		t.Errorf("backend %s: %s", rep.Backend, rep.Database)
	}
	if !strings.HasPrefix(rep.Flow.Binding, "user bulk") {
		t.Errorf("bulk binding %q, want a login the lab created", rep.Flow.Binding)
	}
	dir := strings.TrimSuffix(strings.SplitAfter(rep.Database, "initdb in ")[1], ", removed at the end)")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("throwaway server directory %s still there: %v", dir, err)
	}
}

// TestRunRefusesExistingTables: the lab never drops tables it did not
// make.
func TestRunRefusesExistingTables(t *testing.T) {
	ctx := context.Background()
	srv, addr := startLitepg(t)
	defer srv.Close()
	dsn := "postgres://lab@" + addr + "/lab"
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE TABLE sbtest1 (id INTEGER PRIMARY KEY, mine TEXT)"); err != nil {
		t.Fatal(err)
	}
	plan := tinyPlan()
	plan.Flow = FlowPlan{}
	_, err = Run(ctx, Options{DSN: dsn, Plan: plan})
	if err == nil || !strings.Contains(err.Error(), "already has sbtest tables") || !strings.Contains(err.Error(), "cleanup") {
		t.Fatalf("Run over existing tables: %v", err)
	}
	if _, err := c.Exec(ctx, "SELECT mine FROM sbtest1"); err != nil {
		t.Errorf("the existing table was touched: %v", err)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, o := range []Options{
		{Backend: "oracle", Plan: tinyPlan()},
		{DSN: "oracle://x", Plan: tinyPlan()},
		{Plan: Plan{}},
	} {
		_, err := Run(context.Background(), o)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("Run(%+v) = %v, want a UsageError", o, err)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	progress, err := cancelRun(t, Options{Plan: tinyPlan()}, "RTT 0 ms: a minimal round trip", 3*time.Minute, 30*time.Second, nil)
	if err == nil {
		t.Fatal("cancelled Run returned no error")
	}
	if !strings.Contains(progress, "dropped the benchmark tables") {
		t.Errorf("no cleanup after cancel:\n%s", progress)
	}
}

// BenchmarkEmbeddedOLTP measures the embedded backend under
// `sluice bench oltp_read_write --threads=10`, directly and through a
// sluice route; ns/op is per transaction, and tps is reported.
//
//	go test -run '^$' -bench EmbeddedOLTP -benchtime 3000x ./internal/lab/
func BenchmarkEmbeddedOLTP(b *testing.B) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	db, err := startEmbedded(ctx, clock.Real{}, log)
	if err != nil {
		b.Fatal(err)
	}
	defer db.close()
	s, err := startSluice(clock.Real{}, log, db)
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	route, err := s.addRoute("lab", "")
	if err != nil {
		b.Fatal(err)
	}
	lr := &latencyRun{env: &env{db: db, s: s, route: route, clk: clock.Real{}}, plan: LatencyPlan{BenchPlan: BenchPlan{Tables: 1, TableSize: 10000, Threads: 10}}}
	o := lr.options()
	o.Time, o.Format = 0, bench.FormatJSON
	if err := bench.Prepare(ctx, o, io.Discard); err != nil {
		b.Fatal(err)
	}
	for _, via := range []struct{ name, addr string }{{"direct", db.upstream}, {"sluice", route}} {
		b.Run(via.name, func(b *testing.B) {
			o := o
			o.DSN = db.urlAt(via.addr, "", "", false)
			o.Events = int64(b.N)
			b.ReportAllocs()
			b.ResetTimer()
			res, err := bench.Run(ctx, o, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.TPS(), "tps")
			b.ReportMetric(float64(res.IgnoredErrors), "ignored-errors")
		})
	}
}

// startLitepg serves a litepg database on a loopback port.
func startLitepg(t *testing.T) (*litepg.Server, string) {
	t.Helper()
	srv, err := litepg.New(litepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), ln)
	return srv, ln.Addr().String()
}

func randomName(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func mysqlUserExists(t *testing.T, db *sql.DB) bool {
	var n int
	if err := db.QueryRow("SELECT count(*) FROM mysql.user WHERE user = 'bulk'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

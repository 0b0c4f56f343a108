package lab

import (
	"bytes"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/lab/flowsql"
)

// sampleReport is a report with plausible figures, no database needed.
func sampleReport() *Report {
	r := &Report{Plan: "quick", Backend: BackendEmbedded, Database: "embedded", Protocol: protoPostgres,
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 61}
	r.Latency = &LatencyReport{BenchSetup: BenchSetup{Workload: "oltp_read_write", Driver: "pgsql", Threads: 1, Tables: 1, TableSize: 10000,
		RunSeconds: 3, WarmupSeconds: 1}, LatencyModel: LatencyModel{BaseLatencyMs: 1.8, RoundTrips: 20}, Command: "sluice bench ..."}
	for _, rtt := range []float64{0, 1, 5, 10} {
		pred := 1 / (0.0018 + 0.020*rtt)
		tps := pred * (1 - 0.01*rtt)
		r.Latency.Rows = append(r.Latency.Rows, LatencyRow{RTTMs: rtt, PingMs: rtt + 0.03, TPS: tps, QPS: 20 * tps,
			AvgMs: 1000 / tps, P95Ms: 1100 / tps, MinMs: 900 / tps, MaxMs: 1500 / tps,
			PredictedTPS: pred, Deviation: tps/pred - 1, RoundTrips: 20, Transactions: 100})
	}
	r.Latency.Prepare = []PrepareRow{{RTTMs: 0, Seconds: 0.1, Rows: 10000}, {RTTMs: 10, Seconds: 0.13, Rows: 10000}}
	r.Flow = &FlowReport{LinkCapacity: LinkCapacity{CapacityBytes: 20e6, Capacity: "20MB/s", Calibrated: true, StreamMBps: 250},
		LinkQueue: LinkQueue{QueueBytes: 2 << 20, LowQueueBytes: 64 << 10}, FlowWorkload: FlowWorkload{BulkSQL: flowsql.PGBulk, NormalSQL: flowsql.PGNormal,
			NormalBytes: 1e6, Reps: 3, Setup: []string{"CREATE EXCEPT RULE ..."}, Binding: "user bulk"}}
	for _, c := range []string{"off", "on"} {
		for _, n := range []int{0, 1, 4, 10} {
			e := 52.0
			if c == "off" {
				e += 50*float64(n) + 105*float64(min(n, 1))
			} else {
				e += 0.4 * float64(n)
			}
			r.Flow.Rows = append(r.Flow.Rows, FlowRow{Control: c, N: n, PointTimes: PointTimes{ElapsedMs: e, MeanMs: e, MinMs: e, MaxMs: e,
				Slowdown: e / 52}, SamplesMs: []float64{e, e, e}})
		}
	}
	r.Concurrency = sampleConcurrency()
	r.Targets = r.evaluate()
	return r
}

// sampleConcurrency is a concurrency report with plausible figures.
func sampleConcurrency() *ConcurrencyReport {
	c := &ConcurrencyReport{LinkCapacity: LinkCapacity{CapacityBytes: 20e6, Capacity: "20MB/s", Calibrated: true, StreamMBps: 400},
		QueueBytes: 2 << 20, WindowBytes: 64 << 10, Sessions: 32, OrdinarySQL: pgOrdinarySQL, HighSQL: pgHighSQL,
		OrdinaryBytes: 512000, Reps: 3, MeasureSeconds: 2, Setup: []string{"CREATE RESOURCE POOL conc_pool"}}
	for _, limit := range []int{0, 2, 4, 8} {
		n := 32
		if limit > 0 {
			n = limit
		}
		q := float64(n) * 70e3
		p50 := 2 + q/20e3
		c.Rows = append(c.Rows, ConcurrencyRow{ActiveStatements: limit, P50Ms: p50, P99Ms: 1.2 * p50, MeanMs: 3.2 * p50 / 3, MaxMs: 1.2 * p50,
			MBps: 19.5 - 4/float64(n), StatementsPerSec: 38, OrdinaryMs: 800, QueueMeanBytes: q, QueueMaxBytes: int64(1.1 * q),
			BoundMs: c.boundMs(limit), SamplesMs: []float64{p50, p50, 1.2 * p50}})
		if limit > 0 {
			c.Rows[len(c.Rows)-1].RunningMax, c.Rows[len(c.Rows)-1].WaitingMean = limit, float64(32-limit)-0.5
		}
	}
	c.ratios()
	return c
}

// writeFiles writes rep into a new temporary directory and returns it
// and the files written.
func writeFiles(t *testing.T, rep *Report) (dir string, files []string) {
	t.Helper()
	dir = t.TempDir()
	files, err := rep.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, files
}

func TestWriteFilesConsistent(t *testing.T) {
	rep := sampleReport()
	dir, files := writeFiles(t, rep)
	if len(files) != 6 {
		t.Fatalf("wrote %v, want report.md, report.json and four charts", files)
	}
	js := checkReportFiles(t, dir, rep)
	if js.Latency.Rows[3].TPS != rep.Latency.Rows[3].TPS || js.Flow.Rows[7].Slowdown != rep.Flow.Rows[7].Slowdown {
		t.Error("report.json does not round-trip the figures")
	}
	c := readChart(t, dir+"/"+FileSlowdown)
	if _, ok := c.series["off: FIFO model"]; ok {
		t.Error("FIFO model series drawn without model figures")
	}
}

func TestWriteFilesOneExperiment(t *testing.T) {
	rep := sampleReport()
	rep.Flow = nil
	rep.Targets = rep.evaluate()
	dir, files := writeFiles(t, rep)
	for _, f := range files {
		if strings.HasSuffix(f, FileSlowdown) {
			t.Error("slowdown chart written without the flow-control experiment")
		}
	}
	checkReportFiles(t, dir, rep)
}

func TestWriteFilesConcurrencyUnsupported(t *testing.T) {
	rep := sampleReport()
	rep.Concurrency = &ConcurrencyReport{Unsupported: "resource pool parameter active_statements is not supported"}
	rep.Targets = rep.evaluate()
	dir, files := writeFiles(t, rep)
	for _, f := range files {
		if strings.HasSuffix(f, FileConcLatency) || strings.HasSuffix(f, FileConcThroughput) {
			t.Errorf("%s written without measurements", f)
		}
	}
	checkReportFiles(t, dir, rep)
	md, err := os.ReadFile(dir + "/" + FileMarkdown)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Experiment 3: concurrency\n\nNot measured: this build of sluice refuses `active_statements` (resource pool parameter") {
		t.Errorf("report.md does not say why the concurrency experiment was not measured:\n%s", md)
	}
	for _, tg := range rep.Targets {
		if (tg.Name == TargetConcLatency || tg.Name == TargetConcTput) && tg.Measured {
			t.Errorf("target %s measured without measurements", tg.Name)
		}
	}
}

func TestEvaluate(t *testing.T) {
	rep := sampleReport()
	got := map[string]Target{}
	for _, tg := range rep.evaluate() {
		got[tg.Name] = tg
	}
	if m := got[TargetModel]; !m.Measured || !m.Met || !near(m.Value, -0.1, 1e-9) {
		t.Errorf("model target %+v, want measured, met, -10%%", m)
	}
	if off := got[TargetSlowdownOff]; !off.Measured || !off.Met || off.Value < 6 {
		t.Errorf("off target %+v", off)
	}
	if on := got[TargetSlowdownOn]; !on.Measured || !on.Met {
		t.Errorf("on target %+v", on)
	}
	rep.Flow.row("on", 10).Slowdown = 1.5
	rep.Latency.Rows = rep.Latency.Rows[:2]
	for _, tg := range rep.evaluate() {
		switch tg.Name {
		case TargetModel:
			if tg.Measured || tg.verdict() != "not measured" {
				t.Errorf("model target measured without a 10 ms run: %+v", tg)
			}
		case TargetSlowdownOn:
			if tg.Met || tg.verdict() != "MISSED" || tg.measured() != "1.50x" {
				t.Errorf("on target met at 1.5x: %+v", tg)
			}
		}
	}
}

func TestEvaluateConcurrency(t *testing.T) {
	tests := []struct {
		name                 string
		edit                 func(c *ConcurrencyReport)
		measured, latMet, tp bool
	}{
		{"sample", func(*ConcurrencyReport) {}, true, true, true},
		{"queue not shortened", func(c *ConcurrencyReport) { c.row(4).P50Ms = 0.9 * c.row(0).P50Ms }, true, false, true},
		{"p99 alone stalled", func(c *ConcurrencyReport) { c.row(4).P99Ms = c.row(0).P99Ms }, true, true, true},
		{"throughput lost", func(c *ConcurrencyReport) { c.row(4).MBps = 0.8 * c.row(0).MBps }, true, true, false},
		{"no limit 4", func(c *ConcurrencyReport) {
			c.Rows = slices.DeleteFunc(c.Rows, func(r ConcurrencyRow) bool { return r.ActiveStatements == 4 })
		}, false, false, false},
		{"no baseline", func(c *ConcurrencyReport) { c.Rows = c.Rows[1:] }, false, false, false},
		{"unsupported", func(c *ConcurrencyReport) { *c = ConcurrencyReport{Unsupported: "no"} }, false, false, false},
	}
	for _, tt := range tests {
		rep := sampleReport()
		tt.edit(rep.Concurrency)
		rep.Concurrency.ratios()
		got := map[string]Target{}
		for _, tg := range rep.evaluate() {
			got[tg.Name] = tg
		}
		lat, tp := got[TargetConcLatency], got[TargetConcTput]
		if lat.Measured != tt.measured || tp.Measured != tt.measured {
			t.Errorf("%s: measured %v %v, want %v", tt.name, lat.Measured, tp.Measured, tt.measured)
			continue
		}
		if tt.measured && (lat.Met != tt.latMet || tp.Met != tt.tp) {
			t.Errorf("%s: latency met %v (%.2fx), throughput met %v (%.2fx); want %v, %v", tt.name, lat.Met, lat.Value, tp.Met, tp.Value, tt.latMet, tt.tp)
		}
	}
}

func TestConcurrencyBound(t *testing.T) {
	c := &ConcurrencyReport{LinkCapacity: LinkCapacity{CapacityBytes: 20e6}, QueueBytes: 2 << 20, WindowBytes: 64 << 10, Sessions: 32}
	for _, tt := range []struct {
		limit int
		want  float64 // ms
	}{
		{0, float64(2<<20) / 20e3},      // 32 windows and chunks: more than the queue
		{4, float64(4*(96<<10)) / 20e3}, // 4 windows and chunks
		{64, float64(2<<20) / 20e3},     // above the sessions: as unlimited
	} {
		if got := c.boundMs(tt.limit); !near(got, tt.want, 1e-9) {
			t.Errorf("boundMs(%d) = %v, want %v", tt.limit, got, tt.want)
		}
	}
	c.QueueBytes = 1 << 20 // a smaller queue caps the bound
	if got := c.boundMs(0); !near(got, float64(1<<20)/20e3, 1e-9) {
		t.Errorf("boundMs(0) with a 1 MiB queue = %v", got)
	}
	if (&ConcurrencyReport{}).boundMs(4) != 0 {
		t.Error("bound without a capacity")
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i)
	}
	for _, tt := range []struct {
		v    []float64
		q    float64
		want float64
	}{
		{nil, 0.99, 0},
		{[]float64{7}, 0.99, 7},
		{[]float64{3, 1, 2}, 0.5, 2},
		{[]float64{4, 1, 3, 2}, 0.5, 2},
		{[]float64{5, 1, 4, 2, 3}, 0.99, 5},
		{hundred, 0.99, 99},
		{hundred, 1, 100},
	} {
		if got := percentile(tt.v, tt.q); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tt.v, tt.q, got, tt.want)
		}
	}
}

func TestPlanOnly(t *testing.T) {
	full := FullPlan()
	for _, tt := range []struct {
		name                  string
		latency, flow, concur bool
	}{
		{"", true, true, true},
		{ExperimentLatency, true, false, false},
		{ExperimentFlow, false, true, false},
		{ExperimentConcurrency, false, false, true},
	} {
		p, err := full.Only(tt.name)
		if err != nil {
			t.Fatalf("Only(%q): %v", tt.name, err)
		}
		if got := [3]bool{len(p.Latency.RTTs) > 0, len(p.Flow.Ns) > 0, len(p.Concurrency.Limits) > 0}; got != [3]bool{tt.latency, tt.flow, tt.concur} {
			t.Errorf("Only(%q) keeps latency, flow, concurrency = %v", tt.name, got)
		}
		if p.Name != "full" {
			t.Errorf("Only(%q) renamed the plan %q", tt.name, p.Name)
		}
	}
	var ue *UsageError
	if _, err := full.Only("flow-control"); !errors.As(err, &ue) {
		t.Errorf("Only(unknown) = %v, want a UsageError", err)
	}
}

func TestConcurrencyChartsOrder(t *testing.T) {
	c := sampleConcurrency()
	slices.Reverse(c.Rows) // drawn by x whatever the order of the points
	for _, ch := range []struct {
		name   string
		series string
		chart  string
	}{{"latency", "p99", c.LatencyChart().String()}, {"throughput", "ordinary MB/s", c.ThroughputChart().String()}} {
		dir := t.TempDir()
		path := dir + "/c.svg"
		if err := os.WriteFile(path, []byte(ch.chart), 0o644); err != nil {
			t.Fatal(err)
		}
		pts := readChart(t, path).series[ch.series]
		if len(pts) != len(c.Rows) {
			t.Fatalf("%s chart: %d points, want %d", ch.name, len(pts), len(c.Rows))
		}
		for i := 1; i < len(pts); i++ {
			if pts[i][0] <= pts[i-1][0] {
				t.Errorf("%s chart: x not increasing at point %d: %v", ch.name, i, pts)
			}
		}
	}
}

func TestTableText(t *testing.T) {
	tb := table{head: []string{"name", "value"}, rows: [][]string{{"a", "1.0"}, {"long name", "12.25"}}}
	var b bytes.Buffer
	tb.text(&b)
	want := "name       value\n---------  -----\na            1.0\nlong name  12.25\n"
	if b.String() != want {
		t.Errorf("text table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	tb.markdown(&b)
	want = "| name | value |\n|---|---:|\n| a | 1.0 |\n| long name | 12.25 |\n"
	if b.String() != want {
		t.Errorf("markdown table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestPickCapacity(t *testing.T) {
	tests := []struct {
		rate float64
		max  int64
		want int64
	}{
		{4e9, 100e6, 100e6},
		{441e6, 100e6, 20e6},
		{330e6, 100e6, 20e6},
		{150e6, 100e6, 10e6},
		{600e6, 100e6, 50e6},
		{4e9, 30e6, 20e6},
		{1e6, 100e6, 1e6},
		{0, 100e6, 1e6},
	}
	for _, tt := range tests {
		if got := pickCapacity(tt.rate, tt.max); got != tt.want {
			t.Errorf("pickCapacity(%v, %v) = %v, want %v", tt.rate, tt.max, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		in                   []float64
		median, mean, lo, hi float64
	}{
		{nil, 0, 0, 0, 0},
		{[]float64{5}, 5, 5, 5, 5},
		{[]float64{3, 1, 2}, 2, 2, 1, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 2.5, 1, 4},
	}
	for _, tt := range tests {
		m, a, lo, hi := summarize(tt.in)
		if m != tt.median || a != tt.mean || lo != tt.lo || hi != tt.hi {
			t.Errorf("summarize(%v) = %v %v %v %v", tt.in, m, a, lo, hi)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{{0, "0"}, {0.3, "0.3"}, {10, "10"}, {1.2345, "1.234"}, {-0.0001, "0"}} {
		if got := fmtNum(tt.v); got != tt.want {
			t.Errorf("fmtNum(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
	if fmtRTT(300*time.Microsecond) != "0.3 ms" || fmtRTT(10*time.Millisecond) != "10 ms" {
		t.Errorf("fmtRTT: %q %q", fmtRTT(300*time.Microsecond), fmtRTT(10*time.Millisecond))
	}
	if plural(1, "thread") != "1 thread" || plural(4, "table") != "4 tables" {
		t.Error("plural")
	}
	if roundMB(1_000_000) != 1_000_000 || roundMB(1_011_000) != 1_000_000 || roundMB(1_500_000) != 1_500_000 || roundMB(500) != 500 {
		t.Error("roundMB")
	}
}

func TestLineFilter(t *testing.T) {
	var out bytes.Buffer
	f := &lineFilter{out: &out, prefix: "[ ", indent: "  "}
	for _, chunk := range []string{"preamble\n[ 1s ] tps: 1", "0\nother\n[ 2s ]", " tps: 20\n[ 3s ] partial"} {
		if _, err := f.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if want := "  [ 1s ] tps: 10\n  [ 2s ] tps: 20\n"; out.String() != want {
		t.Errorf("filtered %q, want %q", out.String(), want)
	}
}

func TestParseDSN(t *testing.T) {
	tlsOn := &config.UpstreamTLS{}
	tests := []struct {
		dsn  string
		want database // compared: protocol, upstream, user, dbname, and whether upstreamTLS is set
		err  string
	}{
		{dsn: "postgres://u:p@db1:5433/bench", want: database{protocol: protoPostgres, upstream: "db1:5433", user: "u", dbname: "bench"}},
		{dsn: "postgresql://u@127.0.0.1/bench?sslmode=require", want: database{protocol: protoPostgres, upstream: "127.0.0.1:5432", user: "u", dbname: "bench", upstreamTLS: tlsOn}},
		{dsn: "mysql://u:p@db2:3307/bench", want: database{protocol: protoMySQL, upstream: "db2:3307", user: "u", dbname: "bench"}},
		{dsn: "mysql://u:p@db2/bench", want: database{protocol: protoMySQL, upstream: "db2:3306", user: "u", dbname: "bench"}},
		{dsn: "u:p@tcp(127.0.0.1:13306)/bench", want: database{protocol: protoMySQL, upstream: "127.0.0.1:13306", user: "u", dbname: "bench"}},
		{dsn: "mysql://u:p@db2:3306/", err: "name a database"},
		{dsn: "mysql://u:p@db2:99999/x", err: "port"},
		{dsn: "postgres://u@/db?host=/var/run/postgresql", err: "Unix sockets"},
		{dsn: "http://example.com", err: "want postgres://"},
		{dsn: "", err: "want postgres://"},
	}
	for _, tt := range tests {
		d, err := parseDSN(tt.dsn)
		if tt.err != "" {
			var ue *UsageError
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &ue) {
				t.Errorf("parseDSN(%q) = %v, want a usage error containing %q", tt.dsn, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tt.dsn, err)
			continue
		}
		w := tt.want
		if d.protocol != w.protocol || d.upstream != w.upstream || d.user != w.user || d.dbname != w.dbname || (d.upstreamTLS != nil) != (w.upstreamTLS != nil) {
			t.Errorf("parseDSN(%q) = %s %s %s %s tls=%v", tt.dsn, d.protocol, d.upstream, d.user, d.dbname, d.upstreamTLS != nil)
		}
	}
}

func TestURLs(t *testing.T) {
	d, err := parseDSN("postgres://u:p%40ss@db1:5433/bench?sslmode=require&application_name=x")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.urlAt("127.0.0.1:6432", "", "", false); got != "postgres://u:p%40ss@127.0.0.1:6432/bench?sslmode=disable" {
		t.Errorf("route URL %s", got)
	}
	if got := d.directURL(); !strings.Contains(got, "@db1:5433/bench?") || !strings.Contains(got, "sslmode=require") || !strings.Contains(got, "application_name=x") {
		t.Errorf("direct URL %s", got)
	}
	if got := d.urlAt("h:1", "bulk", "", false); got != "postgres://bulk@h:1/bench?sslmode=disable" {
		t.Errorf("bulk URL %s", got)
	}
	m, _ := parseDSN("mysql://u:p@db2:3306/bench")
	if got := m.urlAt("127.0.0.1:1", "", "", false); got != "mysql://u:p@127.0.0.1:1/bench" {
		t.Errorf("mysql route URL %s", got)
	}
	if c := m.mysqlConfig("a:1", "bulk", "pw"); c.User != "bulk" || c.Passwd != "pw" || c.Addr != "a:1" || c.DBName != "bench" {
		t.Errorf("mysql config %+v", c)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		err  string
	}{
		{"quick", Options{Plan: QuickPlan()}, ""},
		{"full", Options{Plan: FullPlan()}, ""},
		{"both targets", Options{DSN: "postgres://u@h/db", Backend: BackendPostgres, Plan: QuickPlan()}, "not both"},
		{"unknown backend", Options{Backend: "oracle", Plan: QuickPlan()}, "unknown backend"},
		{"bad dsn", Options{DSN: "oracle://x", Plan: QuickPlan()}, "bad --dsn"},
		{"empty plan", Options{}, "no experiment"},
		{"negative RTT", Options{Plan: Plan{Latency: LatencyPlan{RTTs: []time.Duration{-1}}}}, "out of range"},
		{"too many sessions", Options{Plan: Plan{Flow: FlowPlan{Ns: []int{1000}}}}, "out of range"},
		{"negative limit", Options{Plan: Plan{Concurrency: ConcurrencyPlan{Limits: []int{-1}}}}, "out of range"},
		{"too many ordinary sessions", Options{Plan: Plan{Concurrency: ConcurrencyPlan{Limits: []int{4}, Sessions: 500}}}, "out of range"},
	}
	for _, tt := range tests {
		err := tt.o.validate()
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var ue *UsageError
		if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error containing %q", tt.name, err, tt.err)
		}
	}
	o := Options{Plan: Plan{Latency: LatencyPlan{RTTs: []time.Duration{5 * time.Millisecond, time.Millisecond, 5 * time.Millisecond}}, Flow: FlowPlan{Ns: []int{10, 2}}}}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if got := o.Plan.Latency.RTTs; len(got) != 3 || got[0] != 0 || got[1] != time.Millisecond || got[2] != 5*time.Millisecond {
		t.Errorf("RTTs %v, want 0 added, sorted, deduplicated", got)
	}
	if got := o.Plan.Flow.Ns; len(got) != 3 || got[0] != 0 || got[2] != 10 {
		t.Errorf("Ns %v, want 0 added and sorted", got)
	}
	if o.Plan.Flow.Reps != 20 || o.Plan.Flow.MaxCapacity != 100e6 || o.Plan.Flow.CheckPeriod != 100*time.Millisecond {
		t.Errorf("flow defaults not applied: %+v", o.Plan.Flow)
	}
	o = Options{Plan: Plan{Concurrency: ConcurrencyPlan{Limits: []int{8, 2, 8}}}}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if c := o.Plan.Concurrency; !slices.Equal(c.Limits, []int{0, 2, 8}) || c.Sessions != 32 || c.Reps != 50 || c.Window != 64<<10 || c.Settle != time.Second || c.MaxCapacity != 100e6 {
		t.Errorf("concurrency defaults not applied: %+v", c)
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{
		"postgres://u:p@db1:5433/bench", "postgresql://u@127.0.0.1/bench?sslmode=require",
		"mysql://u:p@db2:3307/bench", "u:p@tcp(127.0.0.1:13306)/bench", "mysql://:@:/", "postgres://%zz", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		d, err := parseDSN(dsn)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseDSN(%q): %v is not a UsageError", dsn, err)
			}
			return
		}
		if d.protocol != protoPostgres && d.protocol != protoMySQL {
			t.Fatalf("parseDSN(%q): protocol %q", dsn, d.protocol)
		}
		if _, _, err := net.SplitHostPort(d.upstream); err != nil {
			t.Fatalf("parseDSN(%q): upstream %q: %v", dsn, d.upstream, err)
		}
		_ = d.urlAt("127.0.0.1:1", "", "", false)
	})
}

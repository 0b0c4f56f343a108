package lab

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/config"
)

// sampleReport is a report with plausible figures, no database needed.
func sampleReport() *Report {
	r := &Report{Plan: "quick", Backend: BackendEmbedded, Database: "embedded", Protocol: protoPostgres,
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 61}
	r.Latency = &LatencyReport{Workload: "oltp_read_write", Driver: "pgsql", Threads: 1, Tables: 1, TableSize: 10000,
		RunSeconds: 3, WarmupSeconds: 1, BaseLatencyMs: 1.8, RoundTrips: 20, Command: "sluice bench ..."}
	for _, rtt := range []float64{0, 1, 5, 10} {
		pred := 1 / (0.0018 + 0.020*rtt)
		tps := pred * (1 - 0.01*rtt)
		r.Latency.Rows = append(r.Latency.Rows, LatencyRow{RTTMs: rtt, PingMs: rtt + 0.03, TPS: tps, QPS: 20 * tps,
			AvgMs: 1000 / tps, P95Ms: 1100 / tps, MinMs: 900 / tps, MaxMs: 1500 / tps,
			PredictedTPS: pred, Deviation: tps/pred - 1, RoundTrips: 20, Transactions: 100})
	}
	r.Latency.Prepare = []PrepareRow{{RTTMs: 0, Seconds: 0.1, Rows: 10000}, {RTTMs: 10, Seconds: 0.13, Rows: 10000}}
	r.Flow = &FlowReport{CapacityBytes: 20e6, Capacity: "20MB/s", Calibrated: true, StreamMBps: 250,
		QueueBytes: 2 << 20, LowQueueBytes: 64 << 10, BulkSQL: pgBulkSQL, NormalSQL: pgNormalSQL,
		NormalBytes: 1e6, Reps: 3, Setup: []string{"CREATE EXCEPT RULE ..."}, Binding: "user bulk"}
	for _, c := range []string{"off", "on"} {
		for _, n := range []int{0, 1, 4, 10} {
			e := 52.0
			if c == "off" {
				e += 50*float64(n) + 105*float64(min(n, 1))
			} else {
				e += 0.4 * float64(n)
			}
			r.Flow.Rows = append(r.Flow.Rows, FlowRow{Control: c, N: n, ElapsedMs: e, MeanMs: e, MinMs: e, MaxMs: e,
				Slowdown: e / 52, SamplesMs: []float64{e, e, e}})
		}
	}
	r.Targets = r.evaluate()
	return r
}

func TestWriteFilesConsistent(t *testing.T) {
	rep := sampleReport()
	dir := t.TempDir()
	files, err := rep.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("wrote %v, want report.md, report.json and two charts", files)
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
	dir := t.TempDir()
	files, err := rep.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, FileSlowdown) {
			t.Error("slowdown chart written without the flow-control experiment")
		}
	}
	checkReportFiles(t, dir, rep)
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

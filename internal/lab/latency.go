package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/lab/svg"
)

// LatencyReport is the latency experiment's outcome.
type LatencyReport struct {
	BenchSetup
	// Command is the equivalent `sluice bench` command line of a run
	// (against the sluice route).
	Command string `json:"command"`
	// LatencyModel is the model's inputs.
	LatencyModel
	// Rows are the runs, by added RTT.
	Rows []LatencyRow `json:"runs"`
	// Prepare are the timed table loads.
	Prepare []PrepareRow `json:"prepare"`
}

// LatencyPlan is the scale of the latency experiment.
type LatencyPlan struct {
	// RTTs are the added round-trip times; 0 is always measured (it is
	// the model's base) and added when missing. Empty skips the
	// experiment.
	RTTs []time.Duration
	// PrepareRTTs are the added RTTs at which the table load (sluice
	// bench prepare) is timed.
	PrepareRTTs []time.Duration
	// BenchPlan is the benchmark's flags; Threads 0 picks 1 on the
	// embedded backend (SQLite admits one writer at a time, so more
	// threads would queue on its lock instead of on the network) and 4
	// on a server.
	BenchPlan
}

// LatencyModel is the latency model's inputs, from the run at added RTT
// 0: the average transaction latency in ms and the round trips per
// transaction.
type LatencyModel struct {
	BaseLatencyMs float64 `json:"base_latency_ms"`
	RoundTrips    float64 `json:"round_trips_per_transaction"`
}

// BenchPlan is how an experiment runs the benchmark (sluice bench
// oltp_read_write).
type BenchPlan struct {
	// Threads is --threads; 0 picks the experiment's default.
	Threads int
	// Tables and TableSize are --tables and --table-size; 0 means 1 and
	// 10000.
	Tables, TableSize int
	// Time and Warmup are --time and --warmup-time of each run; Time 0
	// means 10 s.
	Time, Warmup time.Duration
	// ReportInterval is --report-interval: how often a run prints a
	// progress line. 0 prints none.
	ReportInterval time.Duration
}

// validate checks b and fills in its defaults.
func (b *BenchPlan) validate() error {
	orDefault(&b.Tables, 1)
	orDefault(&b.TableSize, 10000)
	orDefault(&b.Time, 10*time.Second)
	if b.Threads < 0 {
		return &UsageError{Msg: "threads must be >= 0"}
	}
	return nil
}

// validate checks l and fills in its defaults; a plan with no points is
// left alone (skipped).
func (l *LatencyPlan) validate() error {
	if len(l.RTTs) == 0 {
		return nil
	}
	if err := inRange(append(slices.Clone(l.RTTs), l.PrepareRTTs...), 10*time.Second, "added RTT", "0 to 10 s"); err != nil {
		return err
	}
	l.RTTs = withZero(l.RTTs)
	return l.BenchPlan.validate()
}

// latencyRun is the state of one latency experiment.
type latencyRun struct {
	*env
	plan LatencyPlan
}

// BenchSetup is how an experiment runs the benchmark (sluice bench).
type BenchSetup struct {
	Workload  string `json:"workload"`
	Driver    string `json:"driver"`
	Threads   int    `json:"threads"`
	Tables    int    `json:"tables"`
	TableSize int    `json:"table_size"`
	// RunSeconds and WarmupSeconds are each run's --time and
	// --warmup-time.
	RunSeconds    float64 `json:"run_seconds"`
	WarmupSeconds float64 `json:"warmup_seconds"`
}

// scale spells the benchmark's threads and tables: "4 threads, 2 tables
// of 10000 rows".
func (b BenchSetup) scale() string {
	return fmt.Sprintf("%s, %s of %d rows", plural(b.Threads, "thread"), plural(b.Tables, "table"), b.TableSize)
}

// benchSetup describes the benchmark options o.
func benchSetup(o bench.Options) BenchSetup {
	return BenchSetup{Workload: o.Workload, Driver: o.Driver, Threads: o.Threads, Tables: o.Tables, TableSize: o.TableSize,
		RunSeconds: o.Time.Seconds(), WarmupSeconds: o.WarmupTime.Seconds()}
}

// options returns the benchmark options of a run through the route.
func (r *latencyRun) options() bench.Options {
	o := bench.DefaultOptions()
	// The lab runs the benchmark in the process that runs the proxy; it
	// keeps the runtime's threads to itself.
	o.IOModel = bench.IOPoller
	o.Workload = "oltp_read_write"
	o.Driver = bench.DriverPgSQL
	if r.db.protocol == protoMySQL {
		o.Driver = bench.DriverMySQL
	}
	o.DSN = r.db.urlAt(r.route, "", "", false)
	o.Threads = r.plan.Threads
	if o.Threads == 0 {
		o.Threads = 4
		if r.db.kind == BackendEmbedded {
			o.Threads = 1
		}
	}
	o.Tables, o.TableSize = r.plan.Tables, r.plan.TableSize
	o.Time, o.WarmupTime, o.ReportInterval = r.plan.Time, r.plan.Warmup, r.plan.ReportInterval
	o.Clock = r.clk
	return o
}

// command renders o as a `sluice bench` command line, password hidden.
func command(o bench.Options, dsn string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sluice bench %s --db-driver=%s --dsn=%s --threads=%d --tables=%d --table-size=%d --time=%d",
		o.Workload, o.Driver, dsn, o.Threads, o.Tables, o.TableSize, int(o.Time.Seconds()))
	if o.WarmupTime > 0 {
		fmt.Fprintf(&b, " --warmup-time=%d", int(o.WarmupTime.Seconds()))
	}
	if !o.AutoInc {
		b.WriteString(" --auto-inc=off")
	}
	if o.Secondary {
		b.WriteString(" --secondary=on")
	}
	b.WriteString(" run")
	return b.String()
}

func runLatency(ctx context.Context, e *env) (*LatencyReport, error) {
	r := &latencyRun{env: e, plan: e.plan.Latency}
	o := r.options()
	p := r.p
	shown := o.DSN
	if r.db.password != "" {
		shown = r.db.urlAt(r.route, r.db.user, "***", false)
	}
	rep := &LatencyReport{
		BenchSetup: benchSetup(o), Command: command(o, shown),
	}
	p.printf("== Experiment 1: latency ==\n")
	p.printf("%s, %s, %s x %d rows, %s per run after %s warm-up; added RTT is path emulation on the link (delay = RTT/2 each way)\n",
		o.Workload, plural(o.Threads, "thread"), plural(o.Tables, "table"), o.TableSize, o.Time, o.WarmupTime)

	// Load the tables at each timed RTT, the largest first, ending with a
	// load at RTT 0 that the runs use.
	loads := slices.Clone(r.plan.PrepareRTTs)
	slices.Sort(loads)
	loads = slices.Compact(loads)
	slices.Reverse(loads)
	timed := map[time.Duration]bool{}
	for _, l := range loads {
		timed[l] = true
	}
	if len(loads) == 0 || loads[len(loads)-1] != 0 {
		loads = append(loads, 0)
	}
	created := false // the tables may exist and are ours to drop
	defer func() {
		if created {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			r.s.setRTT(cctx, 0)
			if err := bench.Cleanup(cctx, o); err != nil {
				p.step("cleanup failed: %v (drop the sbtest tables by hand)", err)
			} else {
				p.step("dropped the benchmark tables")
			}
		}
	}()
	for i, rtt := range loads {
		if err := r.s.setRTT(ctx, rtt); err != nil {
			return nil, err
		}
		p.step("prepare at added RTT %s: loading %s x %d rows", fmtRTT(rtt), plural(o.Tables, "table"), o.TableSize)
		t0 := r.clk.Now()
		err := r.prepare(ctx, o)
		// A load that failed midway may have made some of the tables, but
		// the tables that were there before are not ours.
		created = created || !errors.Is(err, errTablesExist)
		if err != nil {
			return nil, err
		}
		d := r.clk.Now().Sub(t0)
		p.step("prepare at added RTT %s: %.2f s", fmtRTT(rtt), d.Seconds())
		if timed[rtt] {
			rep.Prepare = append(rep.Prepare, PrepareRow{RTTMs: rttMs(rtt), Seconds: d.Seconds(), Rows: o.Tables * o.TableSize})
		}
		if i < len(loads)-1 {
			if err := bench.Cleanup(ctx, o); err != nil {
				return nil, fmt.Errorf("cleanup: %w", err)
			}
		}
	}
	slices.SortFunc(rep.Prepare, func(a, b PrepareRow) int { return cmpFloat(a.RTTMs, b.RTTMs) })

	var base bench.Result
	for _, rtt := range r.plan.RTTs {
		if err := r.s.setRTT(ctx, rtt); err != nil {
			return nil, err
		}
		ping, err := r.ping(ctx)
		if err != nil {
			return nil, fmt.Errorf("ping at RTT %s: %w", fmtRTT(rtt), err)
		}
		p.step("RTT %s: a minimal round trip takes %.2f ms (median of %d); running %s for %s (+%s warm-up)",
			fmtRTT(rtt), ping, pings, o.Workload, o.Time, o.WarmupTime)
		res, chunks, lateUs, err := r.benchRun(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("run at RTT %s: %w", fmtRTT(rtt), err)
		}
		if rtt == 0 {
			base = res
			rep.BaseLatencyMs = durMs(res.Latency.Avg)
			rep.RoundTrips = res.RoundTripsPerTransaction()
		}
		row := LatencyRow{
			RTTMs: rttMs(rtt), PingMs: ping, TPS: res.TPS(), QPS: res.QPS(),
			AvgMs: durMs(res.Latency.Avg), P95Ms: durMs(res.Latency.PercentileValue),
			MinMs: durMs(res.Latency.Min), MaxMs: durMs(res.Latency.Max),
			PredictedTPS: base.PredictTPS(rtt), RoundTrips: res.RoundTripsPerTransaction(),
			Transactions: res.Transactions, IgnoredErrors: res.IgnoredErrors, Releases: chunks, LateUs: lateUs,
		}
		if row.PredictedTPS > 0 {
			row.Deviation = row.TPS/row.PredictedTPS - 1
		}
		rep.Rows = append(rep.Rows, row)
		p.step("RTT %s: %.1f TPS (model %.1f, %+.1f%%), %.1f QPS, latency avg %.2f ms, p95 %.2f ms, %.1f round trips/txn",
			fmtRTT(rtt), row.TPS, row.PredictedTPS, 100*row.Deviation, row.QPS, row.AvgMs, row.P95Ms, row.RoundTrips)
		if row.Releases > 0 {
			p.step("RTT %s: sluice released %d delayed chunks %+.1f µs from their emulated times on average",
				fmtRTT(rtt), row.Releases, row.LateUs)
		}
	}
	if err := r.s.setRTT(ctx, 0); err != nil {
		return nil, err
	}
	return rep, nil
}

// ping returns the median time in ms of a minimal round trip through the
// route, on a connection of its own.
func (r *latencyRun) ping(ctx context.Context) (float64, error) {
	c, err := r.db.connect(ctx, r.route, "", "")
	if err != nil {
		return 0, err
	}
	defer c.close()
	return medianPing(ctx, r.clk, c)
}

// LatencyRow is one run.
type LatencyRow struct {
	RTTMs float64 `json:"rtt_ms"` // added round-trip time
	// PingMs is the median time of a minimal round trip (SELECT 1, or a
	// MySQL ping) through the route at this setting: the RTT the
	// benchmark's statements actually paid, emulation overhead included.
	PingMs float64 `json:"ping_ms"`
	TPS    float64 `json:"tps"`
	QPS    float64 `json:"qps"`
	AvgMs  float64 `json:"avg_latency_ms"`
	P95Ms  float64 `json:"p95_latency_ms"`
	MinMs  float64 `json:"min_latency_ms"`
	MaxMs  float64 `json:"max_latency_ms"`
	// PredictedTPS is threads / (base latency + round trips x RTT).
	PredictedTPS float64 `json:"predicted_tps"`
	// Deviation is TPS / PredictedTPS - 1.
	Deviation     float64 `json:"deviation"`
	RoundTrips    float64 `json:"round_trips_per_transaction"`
	Transactions  uint64  `json:"transactions"`
	IgnoredErrors uint64  `json:"ignored_errors"`
	// Releases counts the chunks sluice's delay lines held during the run
	// (0 at RTT 0), and LateUs is how late they left after their emulated
	// release time, mean in µs (negative: early): sluice's own error in
	// applying the RTT.
	Releases uint64  `json:"delayed_chunks"`
	LateUs   float64 `json:"release_late_us"`
}

// PrepareRow is one timed `prepare`.
type PrepareRow struct {
	RTTMs   float64 `json:"rtt_ms"`
	Seconds float64 `json:"seconds"`
	Rows    int     `json:"rows"`
}

// tables prints the runs.
func (l *LatencyReport) tables(p *printer) { p.table(l.table()) }

// table returns the latency runs.
func (l *LatencyReport) table() table {
	t := table{head: []string{"added RTT (ms)", "ping (ms)", "TPS", "predicted TPS", "deviation", "QPS", "avg latency (ms)", "95th pct (ms)", "round trips/txn", "release late (µs)"}}
	for _, r := range l.Rows {
		late := "-"
		if r.Releases > 0 {
			late = fmt.Sprintf("%+.1f", r.LateUs)
		}
		t.rows = append(t.rows, []string{
			fmtNum(r.RTTMs), f2(r.PingMs), f1(r.TPS), f1(r.PredictedTPS), fmt.Sprintf("%+.1f%%", 100*r.Deviation),
			f1(r.QPS), f2(r.AvgMs), f2(r.P95Ms), f1(r.RoundTrips), late,
		})
	}
	return t
}

// prepareTable returns the timed loads.
func (l *LatencyReport) prepareTable() table {
	t := table{head: []string{"added RTT (ms)", "prepare (s)", "rows"}}
	for _, r := range l.Prepare {
		t.rows = append(t.rows, []string{fmtNum(r.RTTMs), f2(r.Seconds), fmt.Sprint(r.Rows)})
	}
	return t
}

// charts returns the TPS chart.
func (l *LatencyReport) charts() []chartFile { return []chartFile{{FileTPSChart, l.TPSChart}} }

// TPSChart is the chart of TPS against added RTT, measured and
// predicted, on a logarithmic TPS axis.
func (l *LatencyReport) TPSChart() *svg.Chart {
	c := &svg.Chart{
		Title:  fmt.Sprintf("%s: TPS vs added RTT (%s)", l.Workload, plural(l.Threads, "thread")),
		XLabel: "added round-trip time (ms)",
		YLabel: "throughput (transactions/s, log scale)",
		ZeroX:  true,
		LogY:   true,
	}
	measured := svg.Series{Name: "measured"}
	model := svg.Series{Name: fmt.Sprintf("model: threads / (%.2f ms + %.1f round trips x RTT)", l.BaseLatencyMs, l.RoundTrips), Dashed: true}
	for _, r := range l.Rows {
		measured.Points = append(measured.Points, svg.Point{X: r.RTTMs, Y: r.TPS})
		model.Points = append(model.Points, svg.Point{X: r.RTTMs, Y: r.PredictedTPS})
	}
	c.Series = []svg.Series{measured, model}
	return c
}

func (l *LatencyReport) writeMarkdown(w io.Writer) {
	heading(w, 1, "latency", "")
	fmt.Fprintf(w, "An OLTP transaction is a chain of round trips: the client sends a statement and waits for the answer before it sends the next. "+
		"`%s` (sysbench's statements, %s, %.0f s per run after %.0f s of warm-up) "+
		"made %.1f round trips per transaction, counted by the benchmark. "+
		"sluice adds a round-trip time to the route with path emulation on its link (`ALTER LINK default WITH (delay='RTT/2')`: the delay is one-way and applies to each direction), "+
		"so every round trip costs that much more.\n\n",
		l.Workload, l.scale(), l.RunSeconds, l.WarmupSeconds, l.RoundTrips)
	fmt.Fprintf(w, "The model: **predicted TPS = threads / (base latency + round trips x RTT)**, with base latency = %.2f ms "+
		"(the average transaction latency at added RTT 0) and %.1f round trips per transaction. "+
		"The ping column is the median of %d minimal round trips through the route at each setting: what a round trip really cost, emulation included.\n\n",
		l.BaseLatencyMs, l.RoundTrips, pings)
	l.table().markdown(w)
	fmt.Fprintf(w, "\nEach run: `%s`\n\n", l.Command)
	fmt.Fprintf(w, "![TPS vs added RTT](%s)\n\n", FileTPSChart)
	var base, at10 *LatencyRow
	for i := range l.Rows {
		switch l.Rows[i].RTTMs {
		case 0:
			base = &l.Rows[i]
		case 10:
			at10 = &l.Rows[i]
		}
	}
	if base != nil && at10 != nil && at10.TPS > 0 {
		fmt.Fprintf(w, "What the numbers show: 10 ms of RTT took the benchmark from %.1f to %.1f TPS (%.0fx fewer), "+
			"because each transaction now waits %.1f x 10 ms = %.0f ms on the network against %.2f ms of work. "+
			"The model predicted %.1f TPS (%+.1f%%). Throughput at a given RTT is bounded by threads / (round trips x RTT): "+
			"more round trips per transaction or more distance cost the same way, and only fewer round trips "+
			"(batching, stored procedures) or more concurrency buy it back.\n\n",
			base.TPS, at10.TPS, base.TPS/at10.TPS, l.RoundTrips, l.RoundTrips*10, l.BaseLatencyMs, at10.PredictedTPS, 100*at10.Deviation)
		if at10.Deviation < -0.05 {
			modelMs := l.BaseLatencyMs + l.RoundTrips*10
			fmt.Fprintf(w, "Where TPS falls short of the model, the difference is time per round trip that the model does not count. "+
				"Part is the emulation itself: a round trip took %.2f ms at 10 ms (ping). "+
				"The rest is waiting to run: after each delayed message the client, sluice and the server must be scheduled again, "+
				"which costs more on a busy machine; the fastest transaction at 10 ms took %.1f ms against the model's %.1f ms, the average %.1f ms.\n\n",
				at10.PingMs, at10.MinMs, modelMs, at10.AvgMs)
		}
	}
	if len(l.Prepare) > 0 {
		fmt.Fprintf(w, "Loading the tables (`prepare`) at each RTT:\n\n")
		l.prepareTable().markdown(w)
		fmt.Fprintf(w, "\nA bulk load streams large messages (COPY or multi-row INSERTs) over a handful of round trips, "+
			"so added RTT barely moves it; it is the chatty, row-at-a-time path that latency punishes.\n\n")
	}
}

// TargetModel names the latency experiment's target.
const TargetModel = "tps_at_10ms_vs_model"

// targets returns the latency experiment's target: TPS at added RTT
// 10 ms within 15% of the model's prediction. A nil report (experiment
// not run) leaves it unmeasured.
func (l *LatencyReport) targets() []Target {
	t := Target{Name: TargetModel, Description: "TPS at added RTT 10 ms vs the model's prediction", Want: "within 15%"}
	if l == nil {
		return []Target{t}
	}
	for _, row := range l.Rows {
		if row.RTTMs == 10 {
			t.Measured, t.Value = true, row.Deviation
			t.Met = math.Abs(row.Deviation) <= 0.15
		}
	}
	return []Target{t}
}

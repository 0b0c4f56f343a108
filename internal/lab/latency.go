package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/clock"
)

// LatencyReport is the latency experiment's outcome.
type LatencyReport struct {
	Workload  string `json:"workload"`
	Driver    string `json:"driver"`
	Threads   int    `json:"threads"`
	Tables    int    `json:"tables"`
	TableSize int    `json:"table_size"`
	// RunSeconds and WarmupSeconds are each run's --time and
	// --warmup-time.
	RunSeconds    float64 `json:"run_seconds"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	// Command is the equivalent `sluice bench` command line of a run
	// (against the sluice route).
	Command string `json:"command"`
	// BaseLatencyMs and RoundTrips are the model's inputs, from the run
	// at added RTT 0: average transaction latency and round trips per
	// transaction.
	BaseLatencyMs float64 `json:"base_latency_ms"`
	RoundTrips    float64 `json:"round_trips_per_transaction"`
	// Rows are the runs, by added RTT.
	Rows []LatencyRow `json:"runs"`
	// Prepare are the timed table loads.
	Prepare []PrepareRow `json:"prepare"`
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

// latencyRun is the state of one latency experiment.
type latencyRun struct {
	plan  LatencyPlan
	db    *database
	s     *sluice
	route string
	clk   clock.Clock
	p     *printer
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

func runLatency(ctx context.Context, r *latencyRun) (*LatencyReport, error) {
	o := r.options()
	p := r.p
	shown := o.DSN
	if r.db.password != "" {
		shown = r.db.urlAt(r.route, r.db.user, "***", false)
	}
	rep := &LatencyReport{
		Workload: o.Workload, Driver: o.Driver, Threads: o.Threads, Tables: o.Tables, TableSize: o.TableSize,
		RunSeconds: o.Time.Seconds(), WarmupSeconds: o.WarmupTime.Seconds(), Command: command(o, shown),
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
		err := bench.Prepare(ctx, o, &lineFilter{out: p, indent: "           "})
		if err != nil {
			if strings.Contains(err.Error(), "already exists") {
				return nil, fmt.Errorf("prepare: %w (the database already has sbtest tables; drop them with `sluice bench oltp_read_write cleanup --db-driver=%s --dsn=URL` or use another database)", err, o.Driver)
			}
			created = true // a load that failed midway may have made some
			return nil, fmt.Errorf("prepare: %w", err)
		}
		created = true
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
		before := r.s.lateness()
		res, err := bench.Run(ctx, o, &lineFilter{out: p, prefix: "[ ", indent: "           "})
		if err != nil {
			return nil, fmt.Errorf("run at RTT %s: %w", fmtRTT(rtt), err)
		}
		late := r.s.lateness()
		if res.Transactions == 0 {
			return nil, fmt.Errorf("run at RTT %s: no transaction completed", fmtRTT(rtt))
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
			Transactions: res.Transactions, IgnoredErrors: res.IgnoredErrors,
			Releases: late.Count - before.Count,
		}
		if row.Releases > 0 {
			row.LateUs = float64(late.Sum-before.Sum) / float64(row.Releases) / float64(time.Microsecond)
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

// pings is how many round trips ping times.
const pings = 25

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

// medianPing returns the median time in ms of a minimal round trip on c
// (pings of them, after one untimed).
func medianPing(ctx context.Context, clk clock.Clock, c conn) (float64, error) {
	if err := c.ping(ctx); err != nil {
		return 0, err
	}
	times := make([]float64, 0, pings)
	for range pings {
		t0 := clk.Now()
		if err := c.ping(ctx); err != nil {
			return 0, err
		}
		times = append(times, durMs(clk.Now().Sub(t0)))
	}
	median, _, _, _ := summarize(times)
	return median, nil
}

// plural writes "1 thread", "4 threads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fmtRTT writes an RTT in milliseconds: "0.3 ms".
func fmtRTT(d time.Duration) string { return fmtNum(rttMs(d)) + " ms" }

func rttMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

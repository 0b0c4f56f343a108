package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// The statements of the concurrency experiment: an ordinary statement
// returning about 512 kB, several windows of the link, and a small
// high-priority query.
const (
	pgOrdinarySQL    = `SELECT repeat('o', 1000) FROM generate_series(1, 512)`
	pgHighSQL        = `SELECT repeat('h', 100)`
	mysqlOrdinarySQL = `SELECT REPEAT('o', 1000) FROM seq_1_to_512`
	mysqlHighSQL     = `SELECT REPEAT('h', 100)`
)

// ordinaryPayload is the payload of one ordinary result, in bytes.
const ordinaryPayload = 512 * 1000

// Catalog names the concurrency experiment creates in sluice, and its
// routes.
const (
	concPool      = "conc_pool"
	concHighPool  = "conc_high_pool"
	concRoute     = "conc"
	concHighRoute = "conc_high"
)

// chunkBytes is the largest chunk a pump reads (package proxy's read
// buffer): a flow whose window is full may have one more chunk admitted
// to the device queue, waiting for the window.
const chunkBytes = 32 << 10

// queueSample is how often a point samples the link's device queue.
const queueSample = 10 * time.Millisecond

// ConcurrencyReport is the concurrency experiment's outcome.
type ConcurrencyReport struct {
	// Unsupported, when set, says why nothing was measured: this build
	// of sluice refuses active_statements. The other fields are then
	// mostly empty.
	Unsupported string `json:"unsupported,omitempty"`
	// LinkCapacity is the link's.
	LinkCapacity
	// QueueBytes is the link's device FIFO; WindowBytes each flow's
	// window on the link.
	QueueBytes  int64 `json:"device_queue_bytes"`
	WindowBytes int64 `json:"window_bytes"`
	// RTTMs is the link's round-trip time.
	RTTMs       float64 `json:"rtt_ms"`
	Sessions    int     `json:"ordinary_sessions"`
	OrdinarySQL string  `json:"ordinary_sql"`
	HighSQL     string  `json:"high_priority_sql"`
	// OrdinaryBytes is the payload of one ordinary result.
	OrdinaryBytes int64 `json:"ordinary_result_bytes"`
	Reps          int   `json:"reps_per_point"`
	// MeasureSeconds is the least time throughput is measured over.
	MeasureSeconds float64 `json:"measure_seconds"`
	// Setup are the console statements that made the pools; each point
	// then sets the ordinary pool's active_statements.
	Setup []string         `json:"setup"`
	Rows  []ConcurrencyRow `json:"points"`
}

// ConcurrencyPlan is the scale of the concurrency experiment.
type ConcurrencyPlan struct {
	// Limits are the ordinary pool's active_statements at each point; 0
	// is unlimited, always measured (the base of the ratios) and added
	// when missing. Empty skips the experiment.
	Limits []int
	// Sessions is the number of ordinary sessions, each running the
	// ordinary statement in a loop; 0 means 32.
	Sessions int
	// Reps is how many times the high-priority query is measured per
	// point; 0 means 50.
	Reps int
	// Capacity is the link capacity in bytes/s; 0 calibrates it as
	// FlowPlan.Capacity says, capped by MaxCapacity (0: 100 MB/s).
	Capacity, MaxCapacity int64
	// Window is each flow's window on the link in bytes (the socket
	// buffer a connection may fill); 0 means 64 KiB, with which 32
	// sessions together fill the 2 MiB device queue. It should stay well
	// below the ordinary result (512 kB): a statement then keeps at most
	// a window in the queue.
	Window int64
	// RTT is the link's round-trip time (a one-way delay of RTT/2 in
	// each direction); 0 means 1 ms. Each flow's window is in flight for
	// a round trip, so what the sessions' windows hold beyond capacity x
	// RTT waits in the device queue.
	RTT time.Duration
	// Settle is how long the ordinary sessions run before a point is
	// measured; 0 means 1 s.
	Settle time.Duration
	// Measure is the least time a point's throughput is measured over:
	// the ordinary sessions go on after the last high-priority query
	// until it has passed, and at least until each could complete two
	// statements at the link's capacity; 0 means 2 s.
	Measure time.Duration
}

// validate checks c and fills in its defaults; a plan with no points is
// left alone (skipped).
func (c *ConcurrencyPlan) validate() error {
	if run, err := points(&c.Limits, 1000, "active_statements", "0 (unlimited) to 1000"); !run {
		return err
	}
	orDefault(&c.Sessions, 32)
	if c.Sessions > 200 {
		return &UsageError{Msg: fmt.Sprintf("%d ordinary sessions out of range (1 to 200)", c.Sessions)}
	}
	orDefault(&c.Reps, 50)
	orDefault(&c.MaxCapacity, 100_000_000)
	orDefault(&c.Settle, time.Second)
	orDefault(&c.Measure, 2*time.Second)
	orDefault(&c.Window, 64<<10)
	orDefault(&c.RTT, time.Millisecond)
	return nil
}

// concRun is the state of one concurrency experiment.
type concRun struct {
	*env
	plan ConcurrencyPlan
	// ordinary and high are the routes whose sessions default to the
	// ordinary and the high-priority pool.
	ordinary, high string
	capacity       int64
}

func (r *concRun) sql() (ordinary, high string) {
	if r.db.protocol == protoMySQL {
		return mysqlOrdinarySQL, mysqlHighSQL
	}
	return pgOrdinarySQL, pgHighSQL
}

// activeStatements is the console statement that sets the ordinary
// pool's limit n (0 unlimited).
func activeStatements(n int) string {
	v := "-1"
	if n > 0 {
		v = fmt.Sprint(n)
	}
	return fmt.Sprintf("ALTER RESOURCE POOL %s WITH (active_statements=%s)", concPool, v)
}

func runConcurrency(ctx context.Context, e *env) (rep *ConcurrencyReport, err error) {
	r := &concRun{env: e, plan: e.plan.Concurrency}
	p := r.p
	ordinarySQL, highSQL := r.sql()
	rep = &ConcurrencyReport{
		OrdinarySQL: ordinarySQL, HighSQL: highSQL, Reps: r.plan.Reps, Sessions: r.plan.Sessions,
		QueueBytes: link.DefaultQueueSize, WindowBytes: r.plan.Window, RTTMs: durMs(r.plan.RTT),
	}
	p.printf("\n== Experiment 3: concurrency ==\n")
	p.printf("high-priority query %q measured %d times per point while %d ordinary sessions run %q in a loop\n",
		highSQL, r.plan.Reps, r.plan.Sessions, ordinarySQL)
	rep.Setup = []string{
		fmt.Sprintf("CREATE RESOURCE POOL %s", concPool),
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (network_priority='high')", concHighPool),
		"SET network_control = on",
	}
	if err := r.s.exec(ctx, rep.Setup...); err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		r.s.exec(cctx, "ALTER LINK default WITH (capacity=DEFAULT, window=DEFAULT, delay=DEFAULT)", "RESET network_control")
	}()
	if err := r.s.exec(ctx, activeStatements(0)); err != nil {
		var de *ddl.Error
		if errors.As(err, &de) && de.Code == sqlstate.FeatureNotSupported {
			rep.Unsupported = de.Message
			p.step("skipped: this build of sluice refuses active_statements (%s)", de.Message)
			return rep, nil
		}
		return nil, err
	}
	if r.ordinary, err = r.s.addRoute(concRoute, concPool); err != nil {
		return nil, err
	}
	if r.high, err = r.s.addRoute(concHighRoute, concHighPool); err != nil {
		return nil, err
	}
	p.step("ordinary sessions through %s (pool %s), the high-priority query through %s (pool %s, network_priority high)",
		r.ordinary, concPool, r.high, concHighPool)

	if rep.LinkCapacity, err = r.linkCapacity(ctx, r.plan.Capacity, r.plan.MaxCapacity, r.ordinary); err != nil {
		return nil, err
	}
	capacity := rep.CapacityBytes
	r.capacity = capacity
	rep.MeasureSeconds = r.measure().Seconds()
	if err := r.s.exec(ctx, fmt.Sprintf("ALTER LINK default WITH (capacity='%s', window='%s', delay='%dus')",
		units.FormatRate(capacity), units.FormatBytes(r.plan.Window), (r.plan.RTT/2).Microseconds())); err != nil {
		return nil, err
	}
	p.step("link: capacity %s, device queue %s, RTT %s, window %s per flow (%d sessions x %s = %s)",
		rep.Capacity, units.FormatBytes(rep.QueueBytes), fmtRTT(r.plan.RTT), units.FormatBytes(rep.WindowBytes),
		rep.Sessions, units.FormatBytes(rep.WindowBytes), units.FormatBytes(int64(rep.Sessions)*rep.WindowBytes))

	for _, limit := range r.plan.Limits {
		if err := r.s.exec(ctx, activeStatements(limit)); err != nil {
			return nil, err
		}
		row, ob, err := r.point(ctx, limit)
		if err != nil {
			return nil, fmt.Errorf("active_statements %s: %w", limitName(limit), err)
		}
		rep.OrdinaryBytes = max(rep.OrdinaryBytes, ob)
		row.BoundMs = rep.boundMs(limit)
		rep.Rows = append(rep.Rows, row)
		p.step("active_statements %s: high-priority query p50 %.1f ms, p99 %.1f ms (bound %.1f ms); ordinary %.1f MB/s, %.1f statements/s, %.0f ms each, %d running at most, %.1f waiting on average; device queue mean %s, max %s",
			limitName(limit), row.P50Ms, row.P99Ms, row.BoundMs, row.MBps, row.StatementsPerSec, row.OrdinaryMs, row.RunningMax, row.WaitingMean,
			units.FormatBytes(int64(row.QueueMeanBytes)), units.FormatBytes(row.QueueMaxBytes))
	}
	rep.ratios()
	return rep, nil
}

// limitName spells an active_statements limit, 0 as "unlimited".
func limitName(n int) string {
	if n <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// ConcurrencyRow is one point: the ordinary pool at one
// active_statements.
type ConcurrencyRow struct {
	// ActiveStatements is the ordinary pool's limit; 0 is unlimited.
	ActiveStatements int `json:"active_statements"`
	// P50Ms, P99Ms, MeanMs and MaxMs describe the high-priority query's
	// elapsed times (P99 by nearest rank: with fewer than 100
	// measurements it is the largest but one or the largest).
	P50Ms  float64 `json:"high_p50_ms"`
	P99Ms  float64 `json:"high_p99_ms"`
	MeanMs float64 `json:"high_mean_ms"`
	MaxMs  float64 `json:"high_max_ms"`
	// MBps and StatementsPerSec are what the ordinary sessions received
	// and completed together from the first high-priority query on, over
	// at least the plan's Measure (see concRun.measure).
	MBps             float64 `json:"ordinary_mb_per_s"`
	StatementsPerSec float64 `json:"ordinary_statements_per_s"`
	// OrdinaryMs is the mean elapsed time of an ordinary statement as
	// its client saw it: time held by admission included.
	OrdinaryMs float64 `json:"ordinary_mean_ms"`
	// QueueMeanBytes and QueueMaxBytes are the device FIFO occupancy
	// (server to client), sampled every 10 ms during the measurement.
	QueueMeanBytes float64 `json:"device_queue_mean_bytes"`
	QueueMaxBytes  int64   `json:"device_queue_max_bytes"`
	// RunningMax and WaitingMean are the ordinary pool's statements
	// holding a slot (at most) and waiting for one (on average), sampled
	// with the device queue; both 0 unlimited, where admission does not
	// count.
	RunningMax  int     `json:"running_max"`
	WaitingMean float64 `json:"waiting_mean"`
	// BoundMs is the model's wait behind the device queue: what
	// min(active statements, sessions) flows hold in it at most (a window
	// and a chunk each), capped by the FIFO, drained at the capacity.
	BoundMs float64 `json:"queue_bound_ms"`
	// P50Ratio and LatencyRatio are P50Ms and P99Ms over their values
	// unlimited; ThroughputRatio MBps over MBps unlimited.
	P50Ratio        float64   `json:"high_p50_vs_unlimited"`
	LatencyRatio    float64   `json:"high_p99_vs_unlimited"`
	ThroughputRatio float64   `json:"throughput_vs_unlimited"`
	SamplesMs       []float64 `json:"samples_ms"`
}

// point measures the high-priority query while the ordinary sessions
// run, and returns the row and the ordinary result's payload bytes.
func (r *concRun) point(ctx context.Context, limit int) (ConcurrencyRow, int64, error) {
	row := ConcurrencyRow{ActiveStatements: limit}
	ordinarySQL, highSQL := r.sql()
	high, err := r.db.connect(ctx, r.high, "", "")
	if err != nil {
		return row, 0, err
	}
	defer high.close()
	if _, err := high.run(ctx, highSQL, nil); err != nil { // warm the session up
		return row, 0, err
	}

	var bytes, stmts, stmtNanos, resultBytes atomic.Int64
	errs, stopOrdinary := sessions(ctx, r.plan.Sessions, "ordinary session",
		func(ctx context.Context) (conn, error) { return r.db.connect(ctx, r.ordinary, "", "") },
		func(ctx context.Context, c conn) error {
			t0 := r.clk.Now()
			n, err := c.run(ctx, ordinarySQL, &bytes)
			if err != nil {
				return err
			}
			stmts.Add(1)
			stmtNanos.Add(int64(r.clk.Now().Sub(t0)))
			resultBytes.Store(n)
			return nil
		},
		func() { r.drain(ctx) })
	defer stopOrdinary()

	r.p.step("active_statements %s: started %s; measuring after %s", limitName(limit), plural(r.plan.Sessions, "ordinary session"), r.plan.Settle)
	if err := clock.Sleep(ctx, r.clk, r.plan.Settle); err != nil {
		return row, 0, err
	}
	if err := failed(errs); err != nil {
		return row, 0, err
	}

	// The device queue, sampled until the measurements end.
	finish := r.s.sampleQueue(ctx, r.clk, queueSample, concPool)
	b0, s0, n0, m0 := bytes.Load(), stmts.Load(), stmtNanos.Load(), r.clk.Now()
	times, err := measureReps(ctx, r.p, "active_statements "+limitName(limit), r.plan.Reps,
		func() error { return failed(errs) },
		func() error {
			// The ordinary sessions go on until the least measuring time
			// has passed.
			if rest := m0.Add(r.measure()).Sub(r.clk.Now()); rest > 0 {
				return clock.Sleep(ctx, r.clk, rest)
			}
			return nil
		},
		func() (time.Duration, error) {
			t0 := r.clk.Now()
			if _, err := high.run(ctx, highSQL, nil); err != nil {
				return 0, fmt.Errorf("high-priority query: %w", err)
			}
			return r.clk.Now().Sub(t0), nil
		})
	if err != nil {
		finish()
		return row, 0, err
	}
	secs := r.clk.Now().Sub(m0).Seconds()
	b1, s1, n1 := bytes.Load(), stmts.Load(), stmtNanos.Load()
	q := finish()
	if secs > 0 {
		row.MBps = float64(b1-b0) / 1e6 / secs
		row.StatementsPerSec = float64(s1-s0) / secs
	}
	if s1 > s0 {
		row.OrdinaryMs = float64(n1-n0) / float64(s1-s0) / float64(time.Millisecond)
	}
	if q.n > 0 {
		row.QueueMeanBytes = float64(q.queueSum) / float64(q.n)
		row.WaitingMean = float64(q.waitingSum) / float64(q.n)
	}
	row.RunningMax, row.QueueMaxBytes = q.runningMax, q.queueMax
	stopOrdinary()
	row.P50Ms, row.MeanMs, _, row.MaxMs = summarize(times)
	row.P99Ms = percentile(times, 0.99)
	row.SamplesMs = times
	return row, resultBytes.Load(), nil
}

// measure is the least time a point's throughput is measured over: the
// plan's Measure, or long enough for every session to complete about two
// statements at the link's capacity (2 x sessions x 512 kB / capacity)
// if that is longer, so that statements/s counts whole statements even
// on a slow link.
func (r *concRun) measure() time.Duration {
	d := r.plan.Measure
	if r.capacity > 0 {
		d = max(d, time.Duration(2*float64(r.plan.Sessions)*ordinaryPayload/float64(r.capacity)*float64(time.Second)))
	}
	return d
}

// drain waits, for up to 10 s, until the link's queues are empty, so the
// next point starts on an idle link.
func (r *concRun) drain(ctx context.Context) {
	waitIdle(ctx, r.clk, func() bool { return r.s.queuedBytes() == 0 })
}

// boundMs is the model's wait behind the device queue at limit (0
// unlimited): min(limit or sessions, sessions) windows and chunks, at
// most the FIFO, over the capacity, in ms.
func (c *ConcurrencyReport) boundMs(limit int) float64 {
	if c.CapacityBytes <= 0 {
		return 0
	}
	n := c.Sessions
	if limit > 0 {
		n = min(n, limit)
	}
	q := min(c.QueueBytes, int64(n)*(c.WindowBytes+chunkBytes))
	return float64(q) / float64(c.CapacityBytes) * 1000
}

// ratios fills each row's ratios to the unlimited point.
func (c *ConcurrencyReport) ratios() {
	base := c.row(0)
	if base == nil {
		return
	}
	for i := range c.Rows {
		r := &c.Rows[i]
		if base.P50Ms > 0 {
			r.P50Ratio = r.P50Ms / base.P50Ms
		}
		if base.P99Ms > 0 {
			r.LatencyRatio = r.P99Ms / base.P99Ms
		}
		if base.MBps > 0 {
			r.ThroughputRatio = r.MBps / base.MBps
		}
	}
}

// row returns the point at limit, or nil.
func (c *ConcurrencyReport) row(limit int) *ConcurrencyRow {
	for i := range c.Rows {
		if c.Rows[i].ActiveStatements == limit {
			return &c.Rows[i]
		}
	}
	return nil
}

// tables prints the points, unless nothing was measured.
func (c *ConcurrencyReport) tables(p *printer) { p.tableIf(c.Unsupported == "", c.table) }

// table returns the concurrency points, one row per active_statements.
func (c *ConcurrencyReport) table() table {
	t := table{head: []string{"active_statements", "high p50 (ms)", "high p99 (ms)", "queue bound (ms)", "p50 vs unlimited", "p99 vs unlimited",
		"ordinary MB/s", "ordinary stmts/s", "throughput vs unlimited", "ordinary stmt (ms)", "running max", "waiting mean",
		"device queue mean (kB)", "device queue max (kB)"}}
	for _, r := range c.Rows {
		t.rows = append(t.rows, []string{
			limitName(r.ActiveStatements), f1(r.P50Ms), f1(r.P99Ms), f1(r.BoundMs), x2(r.P50Ratio), x2(r.LatencyRatio),
			f1(r.MBps), f1(r.StatementsPerSec), x2(r.ThroughputRatio), f1(r.OrdinaryMs), counted(r.ActiveStatements, fmt.Sprint(r.RunningMax)), counted(r.ActiveStatements, f1(r.WaitingMean)),
			f1(r.QueueMeanBytes / 1e3), f1(float64(r.QueueMaxBytes) / 1e3),
		})
	}
	return t
}

// counted returns v, or "-" at an unlimited point, where admission does
// not count statements.
func counted(limit int, v string) string {
	if limit <= 0 {
		return "-"
	}
	return v
}

// charts returns the latency and throughput charts.
func (c *ConcurrencyReport) charts() []chartFile {
	return chartsIf(len(c.Rows) > 0, chartFile{FileConcLatency, c.LatencyChart}, chartFile{FileConcThroughput, c.ThroughputChart})
}

// x is where a point is drawn: its limit, or the number of sessions for
// unlimited (as many statements as there are sessions may run).
func (c *ConcurrencyReport) x(r ConcurrencyRow) float64 {
	if r.ActiveStatements <= 0 || r.ActiveStatements > c.Sessions {
		return float64(c.Sessions)
	}
	return float64(r.ActiveStatements)
}

// chart is a chart of the points against active_statements, both axes
// from zero.
func (c *ConcurrencyReport) chart(title, yLabel string) *svg.Chart {
	return &svg.Chart{
		Title:  title,
		XLabel: fmt.Sprintf("active_statements of the ordinary pool (unlimited drawn at %d, the sessions)", c.Sessions),
		YLabel: yLabel,
		ZeroX:  true, ZeroY: true,
	}
}

// series is y of every point against its x.
func (c *ConcurrencyReport) series(name string, dashed bool, y func(ConcurrencyRow) float64) svg.Series {
	return seriesOf(name, dashed, c.Rows, c.x, y)
}

// LatencyChart is the chart of the high-priority query's p50 and p99
// against the ordinary pool's active_statements, beside the device-queue
// bound.
func (c *ConcurrencyReport) LatencyChart() *svg.Chart {
	ch := c.chart(fmt.Sprintf("High-priority query under %d ordinary sessions (link %s)", c.Sessions, c.Capacity), "high-priority query elapsed (ms)")
	ch.Series = []svg.Series{
		c.series("p50", false, func(r ConcurrencyRow) float64 { return r.P50Ms }),
		c.series("p99", false, func(r ConcurrencyRow) float64 { return r.P99Ms }),
		c.series("device-queue bound: min(statements x (window + chunk), queue) / capacity", true, func(r ConcurrencyRow) float64 { return r.BoundMs }),
	}
	return ch
}

// ThroughputChart is the chart of the ordinary sessions' aggregate
// throughput against active_statements, with the 0.85 x unlimited line.
func (c *ConcurrencyReport) ThroughputChart() *svg.Chart {
	ch := c.chart(fmt.Sprintf("Throughput of %d ordinary sessions (link %s)", c.Sessions, c.Capacity), "ordinary sessions together (MB/s)")
	if c.CapacityBytes > 0 {
		ch.Guides = append(ch.Guides, svg.Guide{Y: float64(c.CapacityBytes) / 1e6, Label: "link capacity"})
	}
	if base := c.row(0); base != nil && base.MBps > 0 {
		ch.Guides = append(ch.Guides, svg.Guide{Y: 0.85 * base.MBps, Label: "0.85 x unlimited"})
	}
	ch.Series = []svg.Series{c.series("ordinary MB/s", false, func(r ConcurrencyRow) float64 { return r.MBps })}
	return ch
}

func (c *ConcurrencyReport) writeMarkdown(w io.Writer) {
	why := ""
	if c.Unsupported != "" {
		why = fmt.Sprintf("this build of sluice refuses `active_statements` (%s)", c.Unsupported)
	}
	if !heading(w, 3, "concurrency", why) {
		return
	}
	drain := func(b int64) float64 { return drainMs(b, c.CapacityBytes) }
	fmt.Fprintf(w, "The routes' link has a capacity of %s, a device queue of %s (%.1f ms to drain at that capacity) and a round trip of %s; "+
		"each flow may have %s in flight on it, the send buffer a connection fills. ",
		c.Capacity, units.FormatBytes(c.QueueBytes), drain(c.QueueBytes), units.FormatDuration(time.Duration(c.RTTMs*float64(time.Millisecond))), units.FormatBytes(c.WindowBytes))
	if c.Calibrated {
		fmt.Fprintf(w, "The capacity was chosen as in experiment 2, well below what one session streams (%.0f MB/s), so that the link, not the processor, is the bottleneck. ", c.StreamMBps)
	}
	fmt.Fprintf(w, "%d ordinary sessions run, each in a loop, a statement returning about %.0f kB:\n\n```sql\n%s\n```\n\n"+
		"so that together (%d x %s, a window and a chunk each, see below) they fill the device queue, while a session of a high-priority pool runs a small query, measured %d times per point:\n\n```sql\n%s\n```\n\n",
		c.Sessions, float64(c.OrdinaryBytes)/1e3, c.OrdinarySQL, c.Sessions, units.FormatBytes(c.WindowBytes+chunkBytes),
		c.Reps, c.HighSQL)
	fmt.Fprintf(w, "The pools, and network_control on so the high-priority pool's bytes enter the device queue first:\n\n```sql\n%s;\n```\n\n",
		strings.Join(c.Setup, ";\n"))
	fmt.Fprintf(w, "Each point sets the ordinary pool's limit (`ALTER RESOURCE POOL %s WITH (active_statements=N)`, -1 for unlimited); "+
		"a statement beyond the limit is held in sluice, its request unsent, until a running one ends. "+
		"Ratios are to the unlimited point; throughput is what the ordinary sessions received together from the first high-priority query on, over at least %s, "+
		"ordinary stmt (ms) the mean time of one ordinary statement as its client saw it, time held included; "+
		"running max and waiting mean are the pool's statements holding a slot and waiting for one (SHOW POOLS' running and waiting), sampled with the device queue. "+
		"The device queue is sampled every 10 ms over the same time.\n\n", concPool, units.FormatDuration(time.Duration(c.MeasureSeconds*float64(time.Second))))
	c.table().markdown(w)
	fmt.Fprintf(w, "\n![high-priority latency vs active_statements](%s)\n\n![throughput vs active_statements](%s)\n\n", FileConcLatency, FileConcThroughput)
	perFlow := c.WindowBytes + chunkBytes
	fmt.Fprintf(w, "Why limiting concurrency keeps the device queue short: priority decides which byte enters the device queue next, "+
		"but a byte already inside is ahead of every byte that comes after it, however important. "+
		"A streaming flow keeps its window (%s) in flight, and one more chunk (%s) waits in the queue for the window to free, as a TCP connection keeps its send buffer full; "+
		"what the flows hold beyond capacity x RTT waits in the device queue. "+
		"So the queue holds about %s per running statement: %d unlimited statements fill it (%d x %s against %s, %.1f ms ahead of every high-priority byte), "+
		"while with active_statements = N at most N statements stream and the high-priority query waits behind about N x %s instead "+
		"(the queue bound column: min(N x %s, queue) / capacity). "+
		"The link stays busy as long as the N running statements' windows cover the time a slot takes to pass to the next statement, so the ordinary sessions keep their throughput: "+
		"their statements wait their turn in sluice, where a wait costs only the statements that wait, instead of in the device queue, where it costs every byte behind them.",
		units.FormatBytes(c.WindowBytes), units.FormatBytes(chunkBytes), units.FormatBytes(perFlow),
		c.Sessions, c.Sessions, units.FormatBytes(perFlow), units.FormatBytes(c.QueueBytes),
		drain(min(c.QueueBytes, int64(c.Sessions)*perFlow)), units.FormatBytes(perFlow), units.FormatBytes(perFlow))
	if base, lim := c.row(0), c.row(concTargetLimit); base != nil && lim != nil {
		fmt.Fprintf(w, " Here, at active_statements = %d the high-priority query's p50 went from %.1f ms to %.1f ms (%.2fx), its p99 from %.1f ms to %.1f ms (%.2fx), "+
			"and the device queue from %.0f kB to %.0f kB on average, while the ordinary sessions moved %.1f MB/s against %.1f MB/s unlimited (%.2fx). "+
			"With fewer than 100 measurements p99 is the slowest one, so a single stall of the machine sets it; p50 is what the queue costs.",
			concTargetLimit, base.P50Ms, lim.P50Ms, lim.P50Ratio, base.P99Ms, lim.P99Ms, lim.LatencyRatio, base.QueueMeanBytes/1e3, lim.QueueMeanBytes/1e3,
			lim.MBps, base.MBps, lim.ThroughputRatio)
	}
	fmt.Fprintf(w, "\n\n")
}

// Target names of the concurrency experiment.
const (
	TargetConcLatency = "high_p50_active4_vs_unlimited"
	TargetConcTput    = "throughput_active4_vs_unlimited"
)

// concTargetLimit is the active_statements the concurrency targets are
// about.
const concTargetLimit = 4

// targets returns the concurrency experiment's targets: with
// active_statements 4 against unlimited, the high-priority p50 at most
// 0.5x and the ordinary throughput at least 0.85x. A nil report
// (experiment not run) leaves them unmeasured.
func (c *ConcurrencyReport) targets() []Target {
	cl := Target{Name: TargetConcLatency, Description: "high-priority p50 with active_statements=4 vs unlimited", Want: "<= 0.5x"}
	ct := Target{Name: TargetConcTput, Description: "ordinary throughput with active_statements=4 vs unlimited", Want: ">= 0.85x"}
	if c == nil || c.row(0) == nil {
		return []Target{cl, ct}
	}
	if row := c.row(concTargetLimit); row != nil {
		cl.Measured, cl.Value, cl.Met = true, row.P50Ratio, row.P50Ratio <= 0.5
		ct.Measured, ct.Value, ct.Met = true, row.ThroughputRatio, row.ThroughputRatio >= 0.85
	}
	return []Target{cl, ct}
}

package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
)

// penaltyWait waits, at a point of an off/on sweep, until the
// statements of the point's background jobs are penalised.
type penaltyWait struct {
	clk clock.Clock
	p   *printer
	// timeout bounds a wait: after it the wait warns and lets the point
	// go on; period is the time between progress lines.
	timeout, period time.Duration
	// noun names the statements in the progress lines ("bulk
	// statements"); only comes before the warning's count ("only ").
	noun, only string
	// state counts the jobs' running statements and the penalised ones,
	// and returns a job's error.
	state func() (running, penalised int, err error)
	// done reports whether n jobs' statements are all penalised.
	done func(n, running, penalised int) bool
}

// wait waits until n jobs' statements are penalised, printing progress
// when verbose. After the timeout it prints a warning and lets the
// measurement go on (the report then shows what the unpenalised
// statements did); it fails when a job fails.
func (w *penaltyWait) wait(ctx context.Context, n int, verbose bool) error {
	deadline := w.clk.Now().Add(w.timeout)
	next := w.clk.Now().Add(w.period)
	for {
		running, pen, err := w.state()
		if err != nil {
			return err
		}
		if w.done(n, running, pen) {
			return nil
		}
		now := w.clk.Now()
		if now.After(deadline) {
			w.p.step("  warning: %s%d of %d %s penalised after %s (%d running); measuring anyway", w.only, pen, n, w.noun, w.timeout, running)
			return nil
		}
		if verbose && now.After(next) {
			w.p.step("  %d/%d %s running, %d penalised", running, n, w.noun, pen)
			next = now.Add(w.period)
		}
		if err := clock.Sleep(ctx, w.clk, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// before returns what a point with n jobs does before each measurement:
// wait, quietly, until they are penalised again (a job may have begun a
// new statement); nil, nothing, with no job.
func (w *penaltyWait) before(ctx context.Context, n int) func() error {
	if n == 0 {
		return nil
	}
	return func() error { return w.wait(ctx, n, false) }
}

// penalise waits, printing progress, until n jobs' statements are
// penalised, then until the bytes queued before the penalty have left
// the device FIFO (twice its drain time at capacity bytes/s, at least
// 100 ms). It returns how long the penalty took, in seconds.
func (w *penaltyWait) penalise(ctx context.Context, n int, capacity int64) (float64, error) {
	t0 := w.clk.Now()
	if err := w.wait(ctx, n, true); err != nil {
		return 0, err
	}
	secs := w.clk.Now().Sub(t0).Seconds()
	settle := max(100*time.Millisecond, 2*time.Duration(float64(link.DefaultQueueSize)/float64(capacity)*float64(time.Second)))
	return secs, clock.Sleep(ctx, w.clk, settle)
}

// sweep measures with network_control off, then on, a point at each n
// of ns in order: point gets the setting, n, and the elapsed time in ms
// that the same setting measured at N = 0 (0 while it measures N = 0),
// and returns its own. An error names the point.
func sweep(ctx context.Context, s *sluice, ns []int, point func(control string, n int, baseMs float64) (float64, error)) error {
	for _, control := range []string{"off", "on"} {
		if err := s.exec(ctx, "SET network_control = "+control); err != nil {
			return err
		}
		var base float64
		for _, n := range ns {
			ms, err := point(control, n, base)
			if err != nil {
				return fmt.Errorf("network_control %s, N=%d: %w", control, n, err)
			}
			if n == 0 {
				base = ms
			}
		}
	}
	return nil
}

// PointTimes are the measured job's times at one point of an off/on
// sweep, in ms, and its slowdown.
type PointTimes struct {
	// ElapsedMs is the median of the measurements; MeanMs, MinMs and
	// MaxMs describe the same measurements.
	ElapsedMs float64 `json:"elapsed_ms"`
	MeanMs    float64 `json:"mean_ms"`
	MinMs     float64 `json:"min_ms"`
	MaxMs     float64 `json:"max_ms"`
	// Slowdown is ElapsedMs over ElapsedMs at N = 0 with the same
	// network_control.
	Slowdown float64 `json:"slowdown"`
}

// pointTimes summarises the measurements times, in ms.
func pointTimes(times []float64) PointTimes {
	var t PointTimes
	t.ElapsedMs, t.MeanMs, t.MinMs, t.MaxMs = summarize(times)
	return t
}

// against sets t's slowdown against baseMs, the elapsed time at N = 0
// with the same setting (t's own at N = 0), and returns, with control
// off, what a device FIFO of queue bytes that n flows keep full
// predicts for a job that moves bytes bytes in waits round trips on a
// link of capacity bytes/s: baseMs plus (n x bytes + waits x queue) /
// capacity, the extra transfer of sharing the link with n flows and a
// wait behind the full FIFO per round trip, in ms (baseMs at n = 0). It
// returns 0 with control on.
func (t *PointTimes) against(control string, n int, baseMs float64, bytes, waits, queue, capacity int64) (modelMs float64) {
	if n == 0 {
		baseMs = t.ElapsedMs
	}
	if baseMs > 0 {
		t.Slowdown = t.ElapsedMs / baseMs
	}
	if control != "off" {
		return 0
	}
	if n == 0 {
		return baseMs
	}
	return baseMs + float64(int64(n)*bytes+waits*queue)/float64(capacity)*1000
}

// sweepRow is a point of an off/on sweep (the flow-control and the
// cluster experiments): the measured job at N with network_control off
// or on.
type sweepRow interface {
	// point returns the setting ("off" or "on"), N, the job's times and,
	// with control off, the FIFO model's elapsed time in ms.
	point() (control string, n int, t PointTimes, modelMs float64)
}

func (r FlowRow) point() (string, int, PointTimes, float64) {
	return r.Control, r.N, r.PointTimes, r.ModelMs
}

func (r ClusterRow) point() (string, int, PointTimes, float64) {
	return r.Control, r.N, r.PointTimes, r.ModelMs
}

// sweepNs returns the Ns of rows, in order of first appearance.
func sweepNs[R sweepRow](rows []R) []int {
	var out []int
	for _, r := range rows {
		if _, n, _, _ := r.point(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// sweepAt returns the row of rows at control and n, or nil.
func sweepAt[R sweepRow](rows []R, control string, n int) *R {
	for i := range rows {
		if c, k, _, _ := rows[i].point(); c == control && k == n {
			return &rows[i]
		}
	}
	return nil
}

// sweepMaxN returns the largest N of rows, 0 for none.
func sweepMaxN[R sweepRow](rows []R) int {
	m := 0
	for _, r := range rows {
		_, n, _, _ := r.point()
		m = max(m, n)
	}
	return m
}

// sweepTable returns one row per N of rows, both settings side by side:
// N (its column named nHead), with control off the elapsed time, the
// FIFO model and the slowdown, with it on the elapsed time and the
// slowdown, then the cells more returns (one per name of moreHead) of
// the off and on points, either of which may be nil. A missing point's
// cells are "-".
func sweepTable[R sweepRow](rows []R, nHead string, moreHead []string, more func(off, on *R) []string) table {
	t := table{head: append([]string{nHead, "off: elapsed (ms)", "off: FIFO model (ms)", "off: slowdown", "on: elapsed (ms)", "on: slowdown"}, moreHead...)}
	for _, n := range sweepNs(rows) {
		off, on := sweepAt(rows, "off", n), sweepAt(rows, "on", n)
		cells := []string{fmt.Sprint(n), "-", "-", "-", "-", "-"}
		if off != nil {
			_, _, tm, model := (*off).point()
			cells[1], cells[2], cells[3] = f1(tm.ElapsedMs), f1(model), x2(tm.Slowdown)
		}
		if on != nil {
			_, _, tm, _ := (*on).point()
			cells[4], cells[5] = f1(tm.ElapsedMs), x2(tm.Slowdown)
		}
		t.rows = append(t.rows, append(cells, more(off, on)...))
	}
	return t
}

// mbpsCell formats a point's MB/s, "-" for no point.
func mbpsCell[R any](r *R, v func(*R) float64) string {
	if r == nil {
		return "-"
	}
	return f1(v(r))
}

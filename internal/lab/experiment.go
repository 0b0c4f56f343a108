package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/units"
)

// env is what every experiment runs with.
type env struct {
	plan Plan
	// pgBin is the directory of PostgreSQL's programs; "" searches.
	pgBin string
	db    *database
	s     *sluice
	// route is the lab's route to the database, on the default link.
	route string
	clk   clock.Clock
	log   *slog.Logger
	p     *printer
	// netRate (bytes/s) and netQueue are the kernel network's
	// bottleneck.
	netRate  int64
	netQueue time.Duration
	// etcd is where the kernel network's cluster runs its fleet's
	// catalog; nil: nowhere (the experiment is skipped).
	etcd *etcd.Config
}

// experiment adapts run, an experiment, to Run's loop: it stores the
// report run returns in *field and returns it as a section.
func experiment[R section](run func(context.Context, *env) (R, error), field *R) func(context.Context, *env) (section, error) {
	return func(ctx context.Context, e *env) (section, error) {
		r, err := run(ctx, e)
		*field = r
		return r, err
	}
}

// headroom is how many times the calibrated single-session rate must
// exceed the link capacity. When the database, sluice and every client
// share a small machine, bulk traffic costs processor time that the
// normal query's server, proxy and client then wait for, whatever the
// link does; a link well below what the machine can move keeps the link,
// not the processor, the bottleneck being measured. On two cores, 20 MB/s
// keeps that cost within a few percent of the normal query's time where
// 100 MB/s more than doubles it.
const headroom = 10

// LinkCapacity is the capacity an experiment gave its link.
type LinkCapacity struct {
	// CapacityBytes is the link capacity, in bytes/s; Capacity spells it.
	CapacityBytes int64  `json:"capacity_bytes_per_second"`
	Capacity      string `json:"capacity"`
	// Calibrated is set when the capacity came from StreamMBps, what one
	// bulk session streamed through an unlimited link.
	Calibrated bool    `json:"calibrated"`
	StreamMBps float64 `json:"one_session_stream_mb_per_s,omitempty"`
}

// LinkQueue is a link's device FIFO, in bytes, and the bound on the
// low-class bytes in it with network_control on.
type LinkQueue struct {
	QueueBytes    int64 `json:"device_queue_bytes,omitempty"`
	LowQueueBytes int64 `json:"low_priority_queue_bytes,omitempty"`
}

// defaultQueue is the device FIFO of every link the lab uses.
func defaultQueue() LinkQueue {
	return LinkQueue{QueueBytes: link.DefaultQueueSize, LowQueueBytes: link.DefaultLowPriorityQueueBytes}
}

// linkCapacity returns planned, in bytes/s, when it is positive;
// otherwise it calibrates: it streams the bulk statement on one session
// through route with the default link's capacity removed (streamRate),
// says what it measured, and returns the capacity pickCapacity chooses
// from that rate, at most max.
func (e *env) linkCapacity(ctx context.Context, planned, max int64, route string) (LinkCapacity, error) {
	if planned > 0 {
		return LinkCapacity{CapacityBytes: planned, Capacity: units.FormatRate(planned)}, nil
	}
	rate, err := e.streamRate(ctx, route)
	if err != nil {
		return LinkCapacity{}, err
	}
	capacity := pickCapacity(rate, max)
	e.p.step("calibration: one bulk session streams %.0f MB/s through an unlimited link; link capacity %s", rate/1e6, units.FormatRate(capacity))
	return LinkCapacity{CapacityBytes: capacity, Capacity: units.FormatRate(capacity), Calibrated: true, StreamMBps: rate / 1e6}, nil
}

// pickCapacity returns the largest of 100, 50, 20, 10, 5, 2 and 1 MB/s
// that is at most max and at most rate/headroom (rate in bytes/s), or
// 1 MB/s.
func pickCapacity(rate float64, max int64) int64 {
	for _, c := range []int64{100e6, 50e6, 20e6, 10e6, 5e6, 2e6, 1e6} {
		if c <= max && float64(c) <= rate/headroom {
			return c
		}
	}
	return 1e6
}

// streamRate streams the bulk statement on one session to route with the
// default link's capacity removed and returns the best rate it reached,
// in bytes/s (see bestRate). It leaves the capacity removed.
func (e *env) streamRate(ctx context.Context, route string) (float64, error) {
	e.p.step("calibration: streaming the bulk statement on one session through an unlimited link")
	if err := e.s.setCapacity(ctx, 0); err != nil {
		return 0, err
	}
	c, err := e.db.connect(ctx, route, "", "")
	if err != nil {
		return 0, err
	}
	defer c.close()
	bctx, cancel := context.WithCancel(ctx)
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		for {
			if err := c.bulk(bctx, &n); err != nil {
				done <- err
				return
			}
		}
	}()
	rate, err := bestRate(ctx, e.clk, n.Load)
	cancel()
	berr := <-done
	if err != nil {
		return 0, err
	}
	if rate == 0 {
		return 0, fmt.Errorf("calibration: the bulk statement streamed nothing (%v)", berr)
	}
	return rate, nil
}

// bestRate returns the best rate, in bytes/s, at which the byte counter
// count grew over three 0.5 s windows of clk after 0.5 s of warm-up: what
// the machine can stream, not what a neighbour's burst of work left of
// it. It returns the end of ctx as an error.
func bestRate(ctx context.Context, clk clock.Clock, count func() int64) (float64, error) {
	const warm, window, windows = 500 * time.Millisecond, 500 * time.Millisecond, 3
	var rate float64
	err := clock.Sleep(ctx, clk, warm)
	for i := 0; i < windows && err == nil; i++ {
		n0, t0 := count(), clk.Now()
		err = clock.Sleep(ctx, clk, window)
		if secs := clk.Now().Sub(t0).Seconds(); secs > 0 {
			rate = max(rate, float64(count()-n0)/secs)
		}
	}
	return rate, err
}

// summarize returns the median, mean, minimum and maximum of v.
func summarize(v []float64) (median, mean, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		median = s[len(s)/2]
	} else {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	return median, sum / float64(len(s)), s[0], s[len(s)-1]
}

// percentile returns the q-th quantile of v (0 < q <= 1) by nearest rank:
// the smallest value with at least q of the values at or below it; 0 for
// no values.
func percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// pings is how many round trips ping times.
const pings = 25

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

// waitIdle polls idle every 20 ms of clk, for up to 10 s, until it
// reports true; the end of ctx ends the wait early. It reports nothing:
// a point that starts on a busy link is measured all the same.
func waitIdle(ctx context.Context, clk clock.Clock, idle func() bool) {
	deadline := clk.Now().Add(10 * time.Second)
	for clk.Now().Before(deadline) && !idle() {
		if clock.Sleep(ctx, clk, 20*time.Millisecond) != nil {
			return
		}
	}
}

// sessions runs n background sessions until the returned stop is
// called: each connects with open, then calls one again and again. stop
// ends them, waits for them and then calls drain; later calls do
// nothing (stop is not safe for concurrent use). A session's error, but
// one stop caused, goes to errs, named what ("bulk session: ...").
func sessions(ctx context.Context, n int, what string, open func(context.Context) (conn, error), one func(context.Context, conn) error, drain func()) (errs <-chan error, stop func()) {
	sctx, cancel := context.WithCancel(ctx)
	ch := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := open(sctx)
			if err != nil {
				if sctx.Err() == nil {
					ch <- fmt.Errorf("%s: %w", what, err)
				}
				return
			}
			defer c.close()
			for sctx.Err() == nil {
				if err := one(sctx, c); err != nil && sctx.Err() == nil {
					ch <- fmt.Errorf("%s: %w", what, err)
					return
				}
			}
		}()
	}
	stopped := false
	return ch, func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
			drain()
		}
	}
}

// failed returns an error waiting on errs, else nil.
func failed(errs <-chan error) error {
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// measureReps measures reps repetitions of a point's job and returns
// their times in ms: before each it calls before (nil: nothing), then
// rep, which returns the time it measured; after the last it calls
// after (nil: nothing). Until then it prints "label: measured i/reps"
// every 2 s.
func measureReps(ctx context.Context, p *printer, label string, reps int, before, after func() error, rep func() (time.Duration, error)) ([]float64, error) {
	var done atomic.Int64 // len(times), for the progress goroutine
	defer p.every(ctx, 2*time.Second, func() string {
		return fmt.Sprintf("%s: measured %d/%d", label, done.Load(), reps)
	})()
	times := make([]float64, 0, reps)
	for range reps {
		if before != nil {
			if err := before(); err != nil {
				return times, err
			}
		}
		d, err := rep()
		if err != nil {
			return times, err
		}
		times = append(times, durMs(d))
		done.Add(1)
	}
	if after != nil {
		return times, after()
	}
	return times, nil
}

// restore runs console statements that undo an experiment's settings,
// for up to 30 s, even when ctx has ended; it reports nothing (the
// stack is stopped at the end of the run anyway).
func (s *sluice) restore(ctx context.Context, stmts ...string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	s.exec(cctx, stmts...)
}

// errTablesExist is the error of a table load that found the
// benchmark's tables there already.
var errTablesExist = errors.New("the database already has sbtest tables")

// prepare loads the benchmark's tables (sluice bench prepare) with o,
// passing its progress lines to the printer. When the tables exist
// already the error wraps errTablesExist and says how to drop them.
func (e *env) prepare(ctx context.Context, o bench.Options) error {
	err := bench.Prepare(ctx, o, &lineFilter{out: e.p, indent: "           "})
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "already exists"):
		return fmt.Errorf("prepare: %w (%w; drop them with `sluice bench oltp_read_write cleanup --db-driver=%s --dsn=URL` or use another database)", err, errTablesExist, o.Driver)
	}
	return fmt.Errorf("prepare: %w", err)
}

// benchRun runs the benchmark with o, passing its interval lines to the
// printer, and returns its result and the chunks the delay lines
// released during it and their mean lateness in µs (see
// releasedSince). A run that completes no transaction is an error.
func (e *env) benchRun(ctx context.Context, o bench.Options) (res bench.Result, chunks uint64, lateUs float64, err error) {
	before := e.s.lateness()
	res, err = bench.Run(ctx, o, &lineFilter{out: e.p, prefix: "[ ", indent: "           "})
	if err != nil {
		return res, 0, 0, err
	}
	chunks, lateUs = e.s.releasedSince(before)
	if res.Transactions == 0 {
		return res, 0, 0, errors.New("no transaction completed")
	}
	return res, chunks, lateUs, nil
}

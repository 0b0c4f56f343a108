package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicelab/sluice/internal/bench/hist"
	"github.com/sluicelab/sluice/internal/bench/sbrand"
	"github.com/sluicelab/sluice/internal/clock"
)

// queueCap is the capacity of the --rate arrival queue, sysbench's
// MAX_QUEUE_LEN.
const queueCap = 131072

// Run runs o.Workload against the database o addresses and returns the
// report's figures. Unless o.Format is json it prints sysbench's run
// output to stdout as the run goes (preamble, interval lines, final
// report); with json it prints one JSON document at the end. Verbosity
// below 3 prints nothing but the JSON.
//
// The run ends at --time (after --warmup-time), after --events
// transactions, on a fatal error, or when ctx is done; in the last case
// the figures so far are reported and ctx's error is returned with them.
func Run(ctx context.Context, o Options, stdout io.Writer) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if o.Workload == "" {
		return Result{}, usageErrorf("no workload given")
	}
	d, err := newDialer(&o)
	if err != nil {
		return Result{}, err
	}
	return run(ctx, &o, d, stdout)
}

// runner is the state of one run shared by its goroutines.
type runner struct {
	o       *Options
	wl      *workload
	set     *stmtSet
	clk     clock.Clock
	out     io.Writer
	workers []*worker

	t0           time.Time // workers started
	measureStart time.Time // warm-up over; time origin of the report
	deadline     time.Time // zero: no time limit

	claimed     atomic.Int64 // measured events started, for --events
	running     atomic.Int32 // workers in their event loop
	concurrency atomic.Int32 // --rate: events in progress
	queue       chan time.Time
	queueFull   atomic.Bool
	stop        chan struct{} // closed to end the event loops early
	stopOnce    sync.Once

	errMu    sync.Mutex
	firstErr error // guarded by errMu
}

func (r *runner) fail(err error) {
	r.errMu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.errMu.Unlock()
	r.halt()
}

func (r *runner) halt() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *runner) err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.firstErr
}

func (r *runner) human() bool { return r.o.Format == FormatHuman && r.o.Verbosity >= 3 }

// run is Run with the connections supplied by d.
func run(ctx context.Context, o *Options, d Dialer, out io.Writer) (Result, error) {
	wl, ok := lookupWorkload(o.Workload)
	if !ok {
		return Result{}, usageErrorf("unknown workload %s", o.Workload)
	}
	r := &runner{o: o, wl: wl, set: buildStatements(wl, o), clk: o.clock(), out: out, stop: make(chan struct{})}
	seed := o.RandSeed
	if seed == 0 {
		seed = r.clk.Now().UnixNano()
	}
	if r.human() {
		if o.Time == 0 && o.Events == 0 {
			io.WriteString(out, "WARNING: Both event and time limits are disabled, running an endless test\n")
		}
		writeRunPreamble(out, o, seed)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := r.startWorkers(runCtx, d, uint64(seed)); err != nil {
		return Result{}, err
	}
	defer func() {
		for _, w := range r.workers {
			w.conn.Close()
		}
	}()

	r.t0 = r.clk.Now()
	r.measureStart = r.t0.Add(o.WarmupTime)
	if o.Time > 0 {
		r.deadline = r.measureStart.Add(o.Time)
	}
	if r.human() {
		io.WriteString(out, "Threads started!\n\n")
	}

	var bg sync.WaitGroup
	bgStop := make(chan struct{})
	if o.Rate > 0 {
		r.queue = make(chan time.Time, queueCap)
		rnd := sbrand.New(uint64(seed)^0x5deece66d, o.Rand)
		bg.Go(func() { r.generate(runCtx, rnd, bgStop) })
	}
	var intervals []Interval
	if o.ReportInterval > 0 {
		bg.Go(func() { intervals = r.report(runCtx, bgStop) })
	}

	var wg sync.WaitGroup
	r.running.Store(int32(len(r.workers)))
	for _, w := range r.workers {
		wg.Go(func() {
			defer r.running.Add(-1)
			if r.o.IOModel == IOThread {
				runtime.LockOSThread()
			}
			if err := r.loop(runCtx, w); err != nil {
				r.fail(err)
				cancel()
			}
		})
	}
	wg.Wait()
	end := r.clk.Now()
	close(bgStop)
	bg.Wait()

	if err := r.err(); err != nil {
		return Result{}, err
	}
	res := r.result(end, intervals)
	if ctx.Err() == nil || res.Transactions > 0 {
		if o.Format == FormatJSON {
			b, err := res.MarshalJSON()
			if err != nil {
				return res, fmt.Errorf("encode report: %w", err)
			}
			out.Write(append(b, '\n'))
		} else if r.human() {
			res.WriteReport(out, o.Histogram)
		}
	}
	return res, ctx.Err()
}

// startWorkers connects every worker and prepares its statements, in
// parallel, as sysbench's thread_init does. Worker 0 first checks that the
// workload's tables exist.
func (r *runner) startWorkers(ctx context.Context, d Dialer, seed uint64) error {
	o := r.o
	unique := sbrand.NewUnique(uint32(seed), uint32(seed>>32))
	r.workers = make([]*worker, o.Threads)
	errs := make([]error, o.Threads)
	var wg sync.WaitGroup
	for i := range r.workers {
		w := &worker{
			id:     i,
			o:      o,
			set:    r.set,
			rnd:    sbrand.New(seed+uint64(i)*0x9e3779b97f4a7c15, o.Rand),
			unique: unique,
			hdr:    newLatencyHistogram(),
		}
		if r.wl.name == "select_random_points" || r.wl.name == "select_random_ranges" {
			// Each worker draws from its own slice of the key range.
			rlen := float64(o.TableSize) / float64(o.Threads)
			rmin := rlen * float64(i%o.Threads)
			w.rmin, w.rmax = uint32(rmin), uint32(rmin+rlen)
			w.wide = make([]Arg, max(o.RandomPoints, 2*o.NumberOfRanges))
		}
		r.workers[i] = w
		wg.Go(func() {
			c, err := d.Dial(ctx, i)
			if err != nil {
				errs[i] = err
				return
			}
			w.conn = c
			if i == 0 {
				if err := r.probeTables(ctx, c); err != nil {
					errs[i] = err
					return
				}
			}
			if err := c.Prepare(ctx, r.set.all); err != nil {
				errs[i] = r.explain(err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for _, w := range r.workers {
				if w.conn != nil {
					w.conn.Close()
				}
			}
			return err
		}
	}
	return nil
}

// probeTables fails with a clear message when a table of the workload is
// missing (a run before prepare).
func (r *runner) probeTables(ctx context.Context, c Conn) error {
	for t := 1; t <= r.wl.tables(r.o); t++ {
		st := textStatement("sb_probe", fmt.Sprintf("SELECT 1 FROM sbtest%d WHERE 1=0", t), true)
		if _, err := c.Exec(ctx, st, nil); err != nil {
			return r.explain(err)
		}
	}
	return nil
}

// explain turns a missing-table error into advice.
func (r *runner) explain(err error) error {
	var se *SQLError
	if errors.As(err, &se) && se.MissingTable != "" {
		return missingTableError(se.MissingTable, r.wl.name)
	}
	return err
}

// yieldEvery is how often a worker of the thread model yields: under the
// 10 ms after which the runtime's monitor starts taking the processor of
// a goroutine that was not rescheduled, and as seldom as that allows,
// since each yield of a locked thread hands its processor over and back.
const yieldEvery = 5 * time.Millisecond

// loop is one worker's event loop (sysbench's thread_run).
func (r *runner) loop(ctx context.Context, w *worker) error {
	o := r.o
	for {
		select {
		case <-r.stop:
			return nil
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		now := r.clk.Now()
		if !r.deadline.IsZero() && !now.Before(r.deadline) {
			break
		}
		measured := !now.Before(r.measureStart)
		if measured && o.Events > 0 && r.claimed.Add(1) > o.Events {
			break
		}
		arrived := now
		if r.queue != nil {
			t, ok := r.dequeue(ctx)
			if !ok {
				break
			}
			arrived = t
			r.concurrency.Add(1)
		}
		w.tally = counters{}
		if o.IOModel == IOThread && now.Sub(w.yielded) >= yieldEvery {
			// A goroutine never rescheduled for 10 ms makes the
			// runtime's monitor take its processor at every system
			// call (package threadconn).
			w.yielded = now
			runtime.Gosched()
		}
		for {
			err := r.wl.event(w, ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			ignorable, reconnected := errorKind(err)
			if !ignorable {
				return r.explain(err)
			}
			if reconnected {
				w.tally.reconnects++
			} else {
				w.tally.errors++
			}
		}
		end := r.clk.Now()
		if r.queue != nil {
			r.concurrency.Add(-1)
		}
		if measured {
			lat := end.Sub(arrived)
			w.stats.record(lat, w.tally)
			w.hdr.RecordValue(max(int64(lat/time.Microsecond), 1))
		}
	}
	if r.wl.done != nil {
		w.tally = counters{}
		if err := r.wl.done(w, ctx); err != nil && ctx.Err() == nil {
			return r.explain(err)
		}
		w.stats.addCounts(w.tally)
	}
	return nil
}

// dequeue waits for the next --rate arrival; false means the run is over
// (deadline, stop, queue overflow or ctx).
func (r *runner) dequeue(ctx context.Context) (time.Time, bool) {
	select {
	case t := <-r.queue:
		return t, true
	default:
	}
	var timeout <-chan time.Time
	if !r.deadline.IsZero() {
		tm := r.clk.NewTimer(r.deadline.Sub(r.clk.Now()))
		defer tm.Stop()
		timeout = tm.C()
	}
	select {
	case t := <-r.queue:
		return t, true
	case <-timeout:
	case <-r.stop:
	case <-ctx.Done():
	}
	return time.Time{}, false
}

// generate feeds the --rate queue with Poisson arrivals (exponential gaps
// of mean 1/rate), catching up after oversleeping as sysbench does. A full
// queue ends the run.
func (r *runner) generate(ctx context.Context, rnd *sbrand.Rand, stop <-chan struct{}) {
	rate := float64(r.o.Rate)
	gap := func() time.Duration {
		return time.Duration(-math.Log(1-rnd.Float64()) / rate * float64(time.Second))
	}
	next := r.t0.Add(gap())
	for {
		next = next.Add(gap())
		if next.After(r.clk.Now()) && !waitUntil(ctx, r.clk, next, stop) {
			return
		}
		select {
		case r.queue <- r.clk.Now():
		default:
			r.queueFull.Store(true)
			if r.o.Verbosity >= 0 && r.o.Format == FormatHuman {
				io.WriteString(r.out, "FATAL: The event queue is full. This means the worker threads are unable to keep up with the specified event generation rate\n")
			}
			r.halt()
			return
		}
	}
}

// waitUntil waits on clk until deadline and returns true, or returns
// false as soon as stop is closed or ctx is done.
func waitUntil(ctx context.Context, clk clock.Clock, deadline time.Time, stop <-chan struct{}) bool {
	tm := clk.NewTimer(deadline.Sub(clk.Now()))
	defer tm.Stop()
	select {
	case <-tm.C():
		return true
	case <-stop:
	case <-ctx.Done():
	}
	return false
}

// report prints an interval line every --report-interval from the end of
// warm-up until stop is closed, and returns the intervals.
func (r *runner) report(ctx context.Context, stop <-chan struct{}) []Interval {
	step := r.o.ReportInterval
	prev := r.measureStart
	next := prev.Add(step)
	var out []Interval
	for {
		if !waitUntil(ctx, r.clk, next, stop) {
			return out
		}
		now := r.clk.Now()
		iv := r.interval(now, now.Sub(prev))
		out = append(out, iv)
		if r.human() {
			writeInterval(r.out, &iv)
		}
		prev = now
		for !now.Before(next) {
			next = next.Add(step)
		}
	}
}

// interval takes the workers' interval figures for a span of length span
// ending at now.
func (r *runner) interval(now time.Time, span time.Duration) Interval {
	var c counters
	var h hist.Log
	for _, w := range r.workers {
		w.stats.mu.Lock()
		w.stats.takeIntervalLocked(&c, &h)
		w.stats.mu.Unlock()
	}
	iv := Interval{
		Time:             now.Sub(r.measureStart),
		Threads:          int(r.running.Load()),
		TPS:              perSec(c.events, span),
		QPS:              perSec(c.queries(), span),
		ReadsPerSec:      perSec(c.reads, span),
		WritesPerSec:     perSec(c.writes, span),
		OtherPerSec:      perSec(c.other, span),
		ErrorsPerSec:     perSec(c.errors, span),
		ReconnectsPerSec: perSec(c.reconnects, span),
		percentile:       r.o.Percentile,
	}
	if r.o.Percentile > 0 {
		iv.LatencyPct = msDuration(h.Percentile(float64(r.o.Percentile)))
	}
	if r.queue != nil {
		iv.rate = true
		iv.QueueLength = len(r.queue)
		iv.Concurrency = int(r.concurrency.Load())
	}
	return iv
}

func msDuration(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// result merges the workers' figures.
func (r *runner) result(end time.Time, intervals []Interval) Result {
	o := r.o
	res := Result{
		Workload:  o.Workload,
		Driver:    o.Driver,
		Threads:   o.Threads,
		TotalTime: max(end.Sub(r.measureStart), 0),
		Intervals: intervals,
		QueueFull: r.queueFull.Load(),
		Histogram: newLatencyHistogram(),
	}
	var c counters
	var first = true
	events := make([]float64, len(r.workers))
	sums := make([]time.Duration, len(r.workers))
	for i, w := range r.workers {
		s := &w.stats
		s.mu.Lock()
		c.add(s.total)
		res.log.Merge(&s.hist)
		if s.total.events > 0 {
			if first || s.latMin < res.Latency.Min {
				res.Latency.Min = s.latMin
			}
			first = false
			res.Latency.Max = max(res.Latency.Max, s.latMax)
		}
		res.Latency.Sum += s.latSum
		events[i], sums[i] = float64(s.total.events), s.latSum
		s.mu.Unlock()
		res.Histogram.Merge(w.hdr)
	}
	res.Reads, res.Writes, res.Other = c.reads, c.writes, c.other
	res.Transactions, res.IgnoredErrors, res.Reconnects = c.events, c.errors, c.reconnects
	res.RoundTrips = c.roundTrips
	if c.events > 0 {
		res.Latency.Avg = res.Latency.Sum / time.Duration(c.events)
	}
	res.Latency.Percentile = o.Percentile
	if o.Percentile > 0 {
		res.Latency.PercentileValue = msDuration(res.log.Percentile(float64(o.Percentile)))
	}
	n := float64(len(r.workers))
	evAvg := float64(c.events) / n
	timeAvg := res.Latency.Sum.Seconds() / n
	var evVar, timeVar float64
	for i := range r.workers {
		evVar += (evAvg - events[i]) * (evAvg - events[i])
		dt := timeAvg - sums[i].Seconds()
		timeVar += dt * dt
	}
	res.Fairness = Fairness{
		EventsAvg:    evAvg,
		EventsStddev: math.Sqrt(evVar / n),
		TimeAvg:      time.Duration(timeAvg * float64(time.Second)),
		TimeStddev:   time.Duration(math.Sqrt(timeVar/n) * float64(time.Second)),
	}
	return res
}

// worker is one benchmark thread: a connection, its random numbers, its
// scratch buffers and its statistics. Only the worker's goroutine touches
// it, except stats (guarded by its mutex).
type worker struct {
	id      int
	o       *Options
	conn    Conn
	yielded time.Time // when the worker last yielded its thread (thread model)
	set     *stmtSet
	rnd     *sbrand.Rand
	unique  *sbrand.Unique // shared; safe for concurrent use

	args         [4]Arg
	wide         []Arg  // select_random_* parameters
	rmin, rmax   uint32 // select_random_*: this worker's key range
	cbuf, padbuf []byte

	bulk     []byte // bulk_insert: pending statement
	bulkHead int    // length of its "INSERT INTO ... VALUES" head
	bulkSize int64  // rows generated so far
	row      []byte

	tally counters // the current event's statements
	stats workerStats
	hdr   *hdrhistogram.Histogram // written by the worker, read after it ends
}

// exec runs one statement and counts it in the current event.
func (w *worker) exec(ctx context.Context, st *Statement, args []Arg) error {
	out, err := w.conn.Exec(ctx, st, args)
	w.tally.roundTrips += uint64(out.RoundTrips)
	if err != nil {
		return err
	}
	switch out.Counter {
	case CountRead:
		w.tally.reads++
	case CountWrite:
		w.tally.writes++
	default:
		w.tally.other++
	}
	return nil
}

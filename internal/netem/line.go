package netem

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/panics"
)

// ErrClosed is returned by Write and Flush once the Line is closed. It
// wraps net.ErrClosed.
var ErrClosed = fmt.Errorf("netem: line closed: %w", net.ErrClosed)

// maxKernelLate bounds the wake-up lateness a Line compensates for: a
// virtual machine's CPU that idled for milliseconds takes 0.1 to 0.3 ms to
// wake, and one far later wake-up (a busy host) must not make the next
// releases early.
const maxKernelLate = 400 * time.Microsecond

// DefaultSpin is the longest a Line yield-spins before a release deadline
// when LineOptions.Spin is 0.
const DefaultSpin = 2 * time.Millisecond

const (
	// spinMargin is added to the estimated timer lateness to get the spin
	// lead: how long before a deadline the writer stops sleeping.
	spinMargin = 100 * time.Microsecond
	// initialLate is the timer lateness assumed before any is observed:
	// about what Go's timers show on an idle Linux host, where the netpoller
	// sleeps in whole milliseconds.
	initialLate = time.Millisecond
)

// LineOptions configures a Line. The zero value is ready to use.
type LineOptions struct {
	// AckDelay returns the one-way delay of the reverse direction: how long
	// an acknowledgement takes to come back, typically
	// func() time.Duration { return reverse.Params().Delay }. It is called
	// once per Write, from the writing goroutine. nil means the path's own
	// Delay (a symmetric path); negative results count as 0.
	AckDelay func() time.Duration
	// Spin bounds how long before a release deadline the writer goroutine
	// stops sleeping and yield-spins on the clock (see Line). 0 means
	// DefaultSpin; negative disables spinning, leaving releases as precise
	// as the clock's timers. Disable it under a virtual clock: a spinning
	// writer busy-waits until the clock is moved.
	Spin time.Duration
	// Pool supplies the buffers chunks are copied into; nil means a pool
	// private to the Line.
	Pool *BufferPool
	// Precise and Timed, when not nil, record how late releases leave:
	// Precise those of a lone chunk, whose wait ends precisely (see
	// Line), Timed the others (queued behind another chunk, or coarse).
	Precise, Timed *Lateness
}

// Line is a delay line in front of an io.Writer: it holds each chunk
// written to it until the Path's release time, then passes it on to dst,
// in order, from one writer goroutine.
//
// The Line also emulates the flow's window: a chunk counts against
// Params.Window from its Write until its release time plus the
// acknowledgement's return trip (LineOptions.AckDelay), and a Write that
// would overfill the window blocks until enough of the window is
// acknowledged. The chunk enters the path at that moment, so a bulk flow's
// throughput is bounded by Window / RTT. Since a chunk also stays counted
// until the writer goroutine has passed it on, the bytes a Line holds never
// exceed the window (or one chunk, if a chunk is larger), however slow dst
// is.
//
// Precision: the writer sleeps on the clock until shortly before a release
// deadline, then finishes the wait precisely: with a clock that has
// high-resolution timers (clock.HighRes, the real one) on such a timer
// aimed at the deadline less the mean lateness of its wake-ups, so
// releases are right on average and no thread is held; with a clock that
// can only sleep precisely (clock.Precise) in a kernel sleep aimed the
// same way; with other clocks by yield-spinning (runtime.Gosched in a loop reading
// the clock) until the deadline. How early it wakes (the lead) is the observed
// lateness of its timers plus 100 µs, at most LineOptions.Spin: Go's timers
// wake up to about 1 ms late on an idle Linux host, because the netpoller
// sleeps in whole milliseconds, and much less when the process is busy.
// Spinning, with a clock that offers neither, costs up to one lead of one
// CPU per chunk released on its own (a request or a response). With
// high-resolution timers every release ends that way, also a chunk with
// more queued behind it (the first part of a response written in several
// chunks); with other clocks such a chunk is part of a stream and is
// released at timer precision, without spinning: up to one timer lateness
// late and never more, since every deadline is absolute. A coarse Line
// (SetCoarse) releases every chunk at timer precision. LineOptions.Precise
// and Timed measure both kinds of release as they happen.
//
// Write and Flush are called from one goroutine at a time (the flow's
// pump). Close may be called from any goroutine, also while Write or Flush
// blocks. To change the emulation of a live flow, call SetParams on the
// Path.
type Line struct {
	clk      clock.Clock
	hrClk    clock.HighRes // clk's high-resolution timers; nil when it has none
	dst      io.Writer
	path     *Path
	ackDelay func() time.Duration
	spinMax  time.Duration // 0 when spinning is disabled
	pool     *BufferPool
	precise  *Lateness // nil: not recorded
	timed    *Lateness // nil: not recorded

	coarse atomic.Bool // releases at timer precision only (SetCoarse)

	notify    chan struct{} // capacity 1; Write to writer: a chunk was queued
	progress  chan struct{} // capacity 1; writer to Write and Flush: a chunk was passed on
	quit      chan struct{} // closed by Close
	done      chan struct{} // closed when the writer goroutine has returned
	closeOnce sync.Once

	// Owned by the goroutine calling Write and Flush.
	fl      flight
	written uint64      // chunks queued so far; a chunk's sequence number
	wtimer  clock.Timer // admission timer, armed lazily

	// Owned by the writer goroutine.
	rtimer clock.Timer // release timer, armed lazily
	// hr is the high-resolution timer finishing a lone chunk's wait when
	// the clock has one (clock.HighRes), armed lazily; hrRelease frees it.
	hr        clock.Timer
	hrRelease func()
	lateEst   time.Duration // decaying maximum of observed timer lateness
	// kernelLate is the running mean of how late precise wake-ups come;
	// owned by the writer goroutine.
	kernelLate time.Duration

	mu sync.Mutex
	// The fields below are guarded by mu.
	queue    ring[*chunk] // chunks not yet passed on, in release order
	released uint64       // chunks passed on to dst so far
	lastOut  time.Time    // clock time when the last of them was passed on
	err      error        // first error: a dst write error or ErrClosed
}

// NewLine starts a Line that passes chunks on to dst at the release times
// path gives them. dst and path must not be nil. The Line does not close
// dst.
func NewLine(clk clock.Clock, dst io.Writer, path *Path, opts LineOptions) *Line {
	l := &Line{
		clk:        clk,
		dst:        dst,
		path:       path,
		ackDelay:   opts.AckDelay,
		pool:       opts.Pool,
		precise:    opts.Precise,
		timed:      opts.Timed,
		notify:     make(chan struct{}, 1),
		progress:   make(chan struct{}, 1),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		lateEst:    initialLate,
		kernelLate: 60 * time.Microsecond,
	}
	l.hrClk, _ = clk.(clock.HighRes)
	switch {
	case opts.Spin == 0:
		l.spinMax = DefaultSpin
	case opts.Spin > 0:
		l.spinMax = opts.Spin
	}
	if l.pool == nil {
		l.pool = new(BufferPool)
	}
	go l.run()
	return l
}

// Write queues a copy of p, which arrived at arrival (the clock's time when
// it was read), for release at the path's release time, and returns. If p
// does not fit in the window, Write first blocks until the window has room
// (backpressure); then p enters the path when the window freed, not at
// arrival. ctx, or Close, ends the wait, and p is then not written. After a
// dst write error or Close, Write returns that error (ErrClosed after
// Close). An empty p is a no-op.
func (l *Line) Write(ctx context.Context, p []byte, arrival time.Time) error {
	if err := l.failure(); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	n := int64(len(p))
	prm := l.path.Params()
	window := prm.Window
	if window <= 0 {
		window = DefaultWindow
	}
	admit, k := l.fl.admitAt(arrival, n, window)
	if admit.After(arrival) {
		if err := l.sleepUntil(ctx, admit); err != nil {
			return err
		}
	}
	released, err := l.state()
	if k > 0 {
		// The window frees only once the writer has passed the chunks on;
		// if it fell behind (dst held it back), the chunk enters the path
		// when the writer got there.
		need := l.fl.q.at(k - 1).seq
		lagged := false
		for err == nil && released <= need {
			if err = l.waitProgress(ctx); err != nil {
				return err
			}
			lagged = true
			released, err = l.state()
		}
		if lagged {
			l.mu.Lock()
			if l.lastOut.After(admit) {
				admit = l.lastOut
			}
			l.mu.Unlock()
		}
	}
	if err != nil {
		return err
	}
	l.fl.ack(k, admit, released)

	rel := l.path.Release(admit, len(p))
	ack := prm.Delay
	if l.ackDelay != nil {
		ack = l.ackDelay()
	}
	c := l.pool.get(len(p))
	copy(c.buf, p)
	c.release = rel
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		l.pool.put(c)
		return err
	}
	l.queue.push(c)
	l.mu.Unlock()
	l.fl.push(n, rel.Add(max(ack, 0)), l.written)
	l.written++
	select {
	case l.notify <- struct{}{}:
	default:
	}
	return nil
}

// Flush blocks until every chunk written so far has been passed on to dst,
// or ctx is done. It returns the dst write error or ErrClosed if the Line
// failed or was closed, even when nothing was pending.
func (l *Line) Flush(ctx context.Context) error {
	target := l.written
	for {
		released, err := l.state()
		if err != nil {
			return err
		}
		if released >= target {
			return nil
		}
		if err := l.waitProgress(ctx); err != nil {
			return err
		}
	}
}

// Close stops the writer goroutine and discards the chunks not yet passed
// on (Flush first to keep them). It waits for a dst.Write in progress to
// return; close dst or set its deadline first if that write may block for
// good. Close is safe to call more than once and from any goroutine. It
// returns the dst write error that stopped the Line before, if any, and
// nil otherwise.
func (l *Line) Close() error {
	l.mu.Lock()
	if l.err == nil {
		l.err = ErrClosed
	}
	l.mu.Unlock()
	l.closeOnce.Do(func() { close(l.quit) })
	<-l.done
	if err := l.failure(); err != ErrClosed {
		return err
	}
	return nil
}

func (l *Line) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Line) state() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released, l.err
}

// sleepUntil blocks until the clock reaches t, ctx is done or the Line
// stops.
func (l *Line) sleepUntil(ctx context.Context, t time.Time) error {
	d := t.Sub(l.clk.Now())
	if d <= 0 {
		return nil
	}
	l.wtimer = armTimer(l.clk, l.wtimer, d)
	select {
	case <-l.wtimer.C():
		return nil
	case <-ctx.Done():
		stopTimer(l.wtimer)
		return ctx.Err()
	case <-l.quit:
	case <-l.done:
	}
	stopTimer(l.wtimer)
	return l.failure()
}

// waitProgress blocks until the writer passes a chunk on or stops, or ctx
// is done; the caller then looks at the state again.
func (l *Line) waitProgress(ctx context.Context) error {
	select {
	case <-l.progress:
	case <-l.quit:
	case <-l.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// armTimer returns t re-armed to fire after d, or a new timer of clk if
// t is nil. t must be stopped and drained (see stopTimer) or have fired
// and been received from.
func armTimer(clk clock.Clock, t clock.Timer, d time.Duration) clock.Timer {
	if t == nil {
		return clk.NewTimer(d)
	}
	t.Reset(d)
	return t
}

// stopTimer disarms t and drains a value it may have sent, so that Reset
// can re-arm it.
func stopTimer(t clock.Timer) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
}

// run is the writer goroutine.
func (l *Line) run() {
	defer close(l.done)
	defer l.discard()
	defer l.catch()
	defer func() {
		if l.hrRelease != nil {
			l.hrRelease()
		}
	}()
	for {
		select {
		case <-l.quit:
			return
		default:
		}
		l.mu.Lock()
		var c *chunk
		alone := false
		if l.queue.len() > 0 {
			c = *l.queue.at(0)
			alone = l.queue.len() == 1
		}
		l.mu.Unlock()
		if c == nil {
			select {
			case <-l.notify:
				continue
			case <-l.quit:
				return
			}
		}
		precise := l.preciseFor(alone)
		if !l.waitUntil(c.release, precise) {
			return
		}
		if h := l.lateness(precise); h != nil {
			h.Record(l.clk.Now().Sub(c.release))
		}
		nw, err := l.dst.Write(c.buf[:c.n])
		if err == nil && nw < c.n {
			err = io.ErrShortWrite
		}
		out := l.clk.Now()
		l.mu.Lock()
		l.queue.pop()
		l.released++
		l.lastOut = out
		if err != nil && l.err == nil {
			l.err = fmt.Errorf("netem: write: %w", err)
		}
		l.mu.Unlock()
		l.pool.put(c)
		select {
		case l.progress <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// catch records a panic of the writer goroutine as the Line's failure, so
// that the flow's next Write returns it (a *panics.Error) and only its
// session ends. It must be deferred directly by run.
func (l *Line) catch() {
	v := recover()
	if v == nil {
		return
	}
	l.mu.Lock()
	if l.err == nil {
		l.err = panics.Recovered("delay line", v)
	}
	l.mu.Unlock()
}

// preciseFor reports whether the head chunk's wait ends precisely. With
// high-resolution timers every release of a fine Line does: a timerfd
// wake-up costs what an ordinary timer's does and holds no thread, and a
// response split over several chunks is only as punctual as its first
// chunk. Without them only a lone chunk does, since the finish spins or
// holds a thread.
func (l *Line) preciseFor(alone bool) bool {
	if l.coarse.Load() || l.spinMax <= 0 {
		return false
	}
	return alone || l.hrClk != nil
}

// lateness returns the histogram a release records into, nil for none.
func (l *Line) lateness(precise bool) *Lateness {
	if precise {
		return l.precise
	}
	return l.timed
}

// SetCoarse makes the Line release at timer precision (on), without the
// precise finish of a lone chunk's wait, or precisely again (off). A
// precise finish costs a wake-up of its own per chunk (and, with a clock
// that can only sleep precisely, a thread held in a kernel sleep): right
// for a request or a response, whose delay is what is measured, and waste
// for bulk flows. Safe for concurrent use; it applies from the next
// release.
func (l *Line) SetCoarse(on bool) { l.coarse.Store(on) }

// discard returns the chunks not passed on to the pool.
func (l *Line) discard() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.queue.len() > 0 {
		l.pool.put(l.queue.pop())
	}
}

// waitUntil blocks until the clock reaches deadline. If spin is set (and
// LineOptions.Spin allows it) the wait is precise: on a high-resolution
// timer when the clock has them, for the whole wait; else sleeping until
// one lead before the deadline and finishing in the kernel when the clock
// can (clock.Precise), else by yield-spinning. It returns false if the
// Line is closed meanwhile.
func (l *Line) waitUntil(deadline time.Time, spin bool) bool {
	if l.hrClk != nil && spin && l.spinMax > 0 {
		return l.waitHighRes(l.hrClk, deadline)
	}
	precise, canSleep := l.clk.(clock.Precise)
	for {
		now := l.clk.Now()
		rem := deadline.Sub(now)
		if rem <= 0 {
			return true
		}
		var lead time.Duration
		if spin && l.spinMax > 0 {
			lead = min(l.lateEst+spinMargin, l.spinMax)
			if canSleep {
				lead = l.lateEst + spinMargin
			}
		}
		if rem <= lead {
			if canSleep {
				return l.sleepPrecise(precise, deadline, now)
			}
			return l.spinUntil(deadline)
		}
		d := rem - lead
		l.rtimer = armTimer(l.clk, l.rtimer, d)
		select {
		case <-l.rtimer.C():
		case <-l.quit:
			stopTimer(l.rtimer)
			return false
		}
		l.observe(l.clk.Now().Sub(now.Add(d)))
	}
}

// sleepPrecise sleeps in the kernel until deadline, less the mean
// lateness of such sleeps, so that releases are right on average without
// spinning. Spinning would be as precise but keeps the Go scheduler from
// polling the network while it lasts, delaying every other flow of the
// process.
func (l *Line) sleepPrecise(p clock.Precise, deadline, now time.Time) bool {
	d := deadline.Sub(now) - l.kernelLate
	if d > 0 {
		p.SleepPrecise(d)
		l.noteWake(l.clk.Now().Sub(now.Add(d)))
	}
	select {
	case <-l.quit:
		return false
	default:
		return true
	}
}

// waitHighRes finishes a wait on a high-resolution timer aimed at the
// deadline less the mean lateness of its wake-ups, so that releases are
// right on average, and no thread is held: a kernel sleep would keep the
// goroutine's processor from every other goroutine until the runtime
// takes it back, which can be milliseconds. A tick that was in flight
// when the timer was re-armed only makes it look at the clock again.
func (l *Line) waitHighRes(hr clock.HighRes, deadline time.Time) bool {
	target := deadline.Add(-l.kernelLate)
	for {
		d := target.Sub(l.clk.Now())
		if d <= 0 {
			return true
		}
		if l.hr == nil {
			l.hr, l.hrRelease = hr.NewHighResTimer(d)
		} else {
			select {
			case <-l.hr.C(): // a tick left from an earlier wait
			default:
			}
			l.hr.Reset(d)
		}
		select {
		case <-l.hr.C():
		case <-l.quit:
			stopTimer(l.hr)
			return false
		}
		if late := l.clk.Now().Sub(target); late >= 0 {
			l.noteWake(late)
			return true
		}
	}
}

// noteWake folds the lateness of one precise wake-up into kernelLate, the
// running mean the next precise wait is aimed early by. A wake-up late
// because the host was busy says nothing about the timer: samples are
// clipped to [0, maxKernelLate] so that outliers do not make later
// releases early.
func (l *Line) noteWake(late time.Duration) {
	late = min(max(late, 0), maxKernelLate)
	l.kernelLate += (late - l.kernelLate) / 8
}

// observe folds one timer lateness into lateEst, a maximum that decays by
// 1/16 per observation, so one late wake-up widens the spin for a while
// and a run of punctual ones narrows it again. lateEst is capped where it
// no longer changes the lead.
func (l *Line) observe(late time.Duration) {
	l.lateEst = min(max(late, l.lateEst-l.lateEst/16, 0), max(l.spinMax, initialLate))
}

func (l *Line) spinUntil(deadline time.Time) bool {
	for l.clk.Now().Before(deadline) {
		select {
		case <-l.quit:
			return false
		default:
		}
		runtime.Gosched()
	}
	return true
}

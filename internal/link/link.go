package link

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

// Errors returned by Send.
var (
	// ErrClosed is returned by Send on a closed Flow or Link, and to a
	// Send waiting when its Flow or Link is closed.
	ErrClosed = errors.New("link: closed")
	// ErrConcurrentSend is returned by a Send on a Flow that has a Send
	// outstanding: a flow's bytes are sent in order, one chunk at a time.
	ErrConcurrentSend = errors.New("link: concurrent Send on one flow")
	// ErrInvalidClass is returned for a class outside High, Normal, Low.
	ErrInvalidClass = errors.New("invalid class")
)

// Link is a shared bottleneck with two independent directions. It is safe
// for concurrent use.
type Link struct {
	name   string
	clk    clock.Clock
	dirs   [2]*direction // indexed by Direction
	closed atomic.Bool
	yields atomic.Bool // the Low class may yield (storeYieldsLocked); stored under mu

	mu sync.Mutex
	// Guarded by mu; serializes Configure.
	cfg Config // normalized
}

// New returns a link named name with configuration cfg, reading time from
// clk. Its scheduler goroutines start when first needed; Close stops them.
func New(name string, cfg Config, clk clock.Clock) *Link {
	cfg = cfg.normalized()
	l := &Link{name: name, clk: clk, cfg: cfg}
	now := clk.Now()
	for i := range l.dirs {
		d := &direction{
			link: l,
			s:    newSched(cfg, now),
			kick: make(chan struct{}, 1),
			stop: make(chan struct{}),
			done: make(chan struct{}),
		}
		d.unlimited.Store(cfg.Capacity == 0)
		d.lowLimited.Store(cfg.lowLimited())
		l.dirs[i] = d
	}
	l.storeYieldsLocked()
	return l
}

// Name returns the link's name.
func (l *Link) Name() string { return l.name }

// Configure replaces the configuration of both directions at once. Waiting
// Sends stay waiting in order and are scheduled under the new
// configuration from now on; bytes already admitted keep their departure.
func (l *Link) Configure(cfg Config) {
	cfg = cfg.normalized()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	for _, d := range l.dirs {
		d.configure(cfg)
	}
	l.storeYieldsLocked()
}

// storeYieldsLocked sets Yields from l.cfg and the directions' held
// rates (SetLowRate). l.mu is held.
func (l *Link) storeYieldsLocked() {
	y := l.cfg.yieldRate() > 0
	for _, d := range l.dirs {
		d.mu.Lock()
		c := l.cfg
		c.autoRate = d.autoPath
		y = y || c.yieldRate() > 0
		d.mu.Unlock()
	}
	l.yields.Store(y)
}

// Yields reports whether the Low class may yield on the link (network
// control, a capacity or a rate held by SetLowRate, and LowYieldPercent
// under 100): whether Engage has an effect. One atomic load, for the data path.
func (l *Link) Yields() bool { return l.yields.Load() }

// Config returns the configuration in effect, with defaults applied.
func (l *Link) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.cfg
	c.Weights = maps.Clone(c.Weights)
	return c
}

// Flow returns a new flow in direction dir (Up or Down; it panics on
// anything else) belonging to pool.
func (l *Link) Flow(dir Direction, pool string) *Flow {
	if dir > Down {
		panic(fmt.Sprintf("link: invalid direction %d", dir))
	}
	d := l.dirs[dir]
	d.mu.Lock()
	p := d.s.pool(pool)
	d.mu.Unlock()
	return &Flow{d: d, pool: p, dir: dir}
}

// Stats returns a snapshot of the link's counters.
func (l *Link) Stats() Stats {
	st := Stats{Name: l.name}
	for i, d := range l.dirs {
		d.mu.Lock()
		st.Directions[i] = d.s.statsLocked(l.clk.Now())
		d.mu.Unlock()
	}
	return st
}

// ClassBytes returns the bytes of class c that direction dir has sent,
// all pools together: Stats' Classes[c].Bytes, without the rest of the
// snapshot. Safe for concurrent use.
func (l *Link) ClassBytes(dir Direction, c Class) int64 {
	if dir > Down || c >= NumClasses {
		return 0
	}
	d := l.dirs[dir]
	d.mu.Lock()
	defer d.mu.Unlock()
	var n int64
	for _, p := range d.s.pools {
		n += p.q[c].stats.bytes.Load()
	}
	return n
}

// Close fails the waiting Sends and later ones with ErrClosed and stops
// the scheduler goroutines. It is safe to call more than once.
func (l *Link) Close() {
	if !l.closed.CompareAndSwap(false, true) {
		return
	}
	for _, d := range l.dirs {
		d.close()
	}
}

// SetLowRate holds the Low class of direction dir to rate bytes/s on
// top of Config.LowPriorityBandwidth (the lower of the two applies),
// while NetworkControl is on: what a controller that watches the path
// around the link sets. path is the path's rate as that controller
// estimates it (bytes/s; 0 or more than rate means rate): with no
// Capacity, the Low class also yields to LowYieldPercent of the lower
// of rate and path while a statement above it runs, as it yields to a
// share of the Capacity, so that a hold probing above the path's rate
// does not widen the yield. A rate of 0 removes the hold. It applies at
// once and outlasts Configure. Safe for concurrent use.
func (l *Link) SetLowRate(dir Direction, rate, path int64) {
	if dir > Down {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dirs[dir]
	d.mu.Lock()
	d.autoLow = max(rate, 0)
	d.autoPath = d.autoLow
	if path > 0 && path < d.autoLow {
		d.autoPath = path
	}
	d.mu.Unlock()
	d.configure(l.cfg)
	l.storeYieldsLocked()
}

// Engage tells both directions that a statement of a class above Low
// began (on) or ended (off) at now: the Low class yields while any such
// statement runs and for YieldHold after the last one ended, as it does
// around the departures of Normal and High bytes (Config.LowYieldPercent).
// The statement's own bytes need not be on the link: between its round
// trips its server and client work, on processors the Low class's bytes
// would take. Every on must be followed by one off; an off without an
// on is ignored. Safe for concurrent use.
func (l *Link) Engage(now time.Time, on bool) {
	for _, d := range l.dirs {
		d.engage(now, on)
	}
}

// direction is one direction of a link: its scheduler and the goroutine
// that runs it when time must pass.
type direction struct {
	link *Link
	// Fast-path switches, stored under mu and read without it.
	unlimited  atomic.Bool   // Capacity == 0
	lowLimited atomic.Bool   // NetworkControl && LowPriorityBandwidth > 0
	kick       chan struct{} // buffer of one: run the scheduler now
	stop       chan struct{} // closed by close
	done       chan struct{} // closed when run returns

	mu sync.Mutex
	// Guarded by mu.
	s        *sched
	autoLow  int64 // SetLowRate's rate for the Low class, bytes/s; 0 none
	autoPath int64 // the base of its yield: the lower of rate and path, bytes/s
	closed   bool
	running  bool      // run has been started
	wakeAt   time.Time // when run's timer fires; zero when run is idle
}

func (d *direction) configure(cfg Config) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if d.autoLow > 0 && cfg.NetworkControl && (cfg.LowPriorityBandwidth == 0 || d.autoLow < cfg.LowPriorityBandwidth) {
		cfg.LowPriorityBandwidth = d.autoLow
	}
	cfg.autoRate = d.autoPath
	now := d.link.clk.Now()
	d.s.configure(now, cfg)
	d.unlimited.Store(cfg.Capacity == 0)
	d.lowLimited.Store(cfg.lowLimited())
	d.armLocked(d.s.dispatch(now))
}

func (d *direction) engage(now time.Time, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.s.engage(now, on) && !d.closed {
		// Low flows held by the yield wait for the bucket, not for its
		// end, while a statement runs: look again now that it may end.
		d.armLocked(d.s.dispatch(now))
	}
}

// armLocked makes sure run wakes by next (the zero time: nothing to wait
// for), starting it on first use.
func (d *direction) armLocked(next time.Time) {
	if next.IsZero() || d.closed {
		return
	}
	if !d.running {
		d.running = true
		d.wakeAt = next
		go d.run()
		return
	}
	if d.wakeAt.IsZero() || next.Before(d.wakeAt) {
		d.wakeAt = next
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// run dispatches whenever the time it asked for comes or it is kicked,
// until the direction closes. One timer, reused.
func (d *direction) run() {
	defer close(d.done)
	clk := d.link.clk
	var t clock.Timer
	release := func() {}
	defer func() { release() }()
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			break
		}
		next := d.s.dispatch(clk.Now())
		d.wakeAt = next
		d.mu.Unlock()

		var fire <-chan time.Time
		due := false
		if !next.IsZero() {
			wait := next.Sub(clk.Now())
			if t == nil {
				// Admissions wait for this timer (the occupancy bound,
				// the low class's bucket): a high-resolution one keeps a
				// late wake from leaving the link idle.
				if hr, ok := clk.(clock.HighRes); ok {
					t, release = hr.NewHighResTimer(wait)
				} else {
					t = clk.NewTimer(wait)
				}
			} else {
				t.Reset(wait)
			}
			fire = t.C()
			// The clock may have reached next between the read above and
			// the arming (a preemption, or a virtual clock moved by another
			// goroutine): the timer would then fire one wait too late, so
			// run again at once instead.
			due = !clk.Now().Before(next)
		}
		if !due {
			select {
			case <-fire:
			case <-d.kick:
			case <-d.stop:
			}
		}
		if t != nil && !t.Stop() {
			select {
			case <-t.C():
			default:
			}
		}
	}
	if t != nil {
		t.Stop()
	}
}

func (d *direction) close() {
	d.mu.Lock()
	d.closed = true
	d.s.failAll(ErrClosed)
	running := d.running
	d.mu.Unlock()
	close(d.stop)
	if running {
		<-d.done
	}
}

// Flow is one connection's bytes in one direction of a link. Its Sends
// are admitted one at a time, in order.
type Flow struct {
	d      *direction
	pool   *pool
	dir    Direction
	ready  chan struct{} // buffer of one: the waiting Send is done; made by the first Send that waits, under the direction's mu, then never changed
	busy   atomic.Bool   // a Send is outstanding
	closed atomic.Bool
	last   time.Time // departure returned by the previous Send; owned by Send

	// Guarded by the direction's mu. depart and err are also read by the
	// woken Send after it receives from ready, before anyone writes them
	// again.
	state            flowState
	sleeping         bool      // a Send waits on ready
	n                int64     // bytes of the request
	class            Class     // class of the request
	start            time.Time // when the request was made
	depart           time.Time // result: departure of the last byte
	err              error     // result: why the request failed
	arrPrev, arrNext *Flow     // sched.arrival links
	qPrev, qNext     *Flow     // poolQueue links
}

// flowState is the state of a Flow's request.
type flowState uint8

const (
	stIdle   flowState = iota // no request, or its result is ready
	stQueued                  // waiting in the scheduler
)

// wake tells a sleeping Send that its request is done. Called with the
// direction's mu held.
func (f *Flow) wake() {
	if f.sleeping {
		f.sleeping = false
		select {
		case f.ready <- struct{}{}:
		default:
		}
	}
}

// Pool returns the name of the flow's pool.
func (f *Flow) Pool() string { return f.pool.name }

// Link returns the link the flow belongs to.
func (f *Flow) Link() *Link { return f.d.link }

// Direction returns the flow's direction.
func (f *Flow) Direction() Direction { return f.dir }

// Send blocks until the link admits n bytes of the flow in class c and
// returns depart, the time the last of them leaves the emulated device
// FIFO: max(admission, previous departure) + n/Capacity, or the admission
// time when Capacity is 0. The caller writes the bytes at depart.
//
// The n bytes are admitted whole. A chunk larger than QueueSize is
// admitted when the FIFO is empty, and a Low chunk larger than
// LowPriorityQueueBytes when no Low bytes are in it; callers keep chunks
// well below both (the pumps send at most 32 KiB). n <= 0 admits nothing
// and returns at once.
//
// Departures of one flow never decrease, whatever the class of each Send:
// a flow has at most one Send outstanding (a concurrent one fails with
// ErrConcurrentSend), so its bytes are never reordered.
//
// If ctx ends while the bytes wait, Send returns ctx.Err() and the bytes
// are not admitted; ctx is not consulted when no wait is needed. On a
// closed Flow or Link, Send returns ErrClosed.
//
// With Capacity 0, and c not Low or no LowPriorityBandwidth limit, Send
// neither blocks nor locks nor allocates: it counts the bytes and returns
// now (or the flow's previous departure, if that is later).
func (f *Flow) Send(ctx context.Context, n int, c Class) (depart time.Time, err error) {
	if c >= NumClasses {
		return time.Time{}, fmt.Errorf("link: %w %d", ErrInvalidClass, c)
	}
	if !f.busy.CompareAndSwap(false, true) {
		return time.Time{}, ErrConcurrentSend
	}
	defer f.busy.Store(false)
	d := f.d
	if f.closed.Load() || d.link.closed.Load() {
		return time.Time{}, ErrClosed
	}
	if n <= 0 {
		return f.after(d.link.clk.Now()), nil
	}
	if d.unlimited.Load() && (c != Low || !d.lowLimited.Load()) {
		now := d.link.clk.Now()
		f.pool.q[c].stats.record(int64(n), 0)
		return f.after(now), nil
	}
	return f.sendSlow(ctx, int64(n), c)
}

// TrySend is Send when it need not wait: ok reports whether the n bytes
// were admitted. It admits them only where Send would neither block nor
// lock (Capacity 0, and c not Low or no LowPriorityBandwidth limit), and
// otherwise counts nothing and returns ok false, for the caller to send
// them through Send. Its errors are Send's. It never allocates.
func (f *Flow) TrySend(n int, c Class) (depart time.Time, ok bool, err error) {
	if c >= NumClasses {
		return time.Time{}, false, fmt.Errorf("link: %w %d", ErrInvalidClass, c)
	}
	if !f.busy.CompareAndSwap(false, true) {
		return time.Time{}, false, ErrConcurrentSend
	}
	defer f.busy.Store(false)
	d := f.d
	if f.closed.Load() || d.link.closed.Load() {
		return time.Time{}, false, ErrClosed
	}
	if !d.unlimited.Load() || c == Low && d.lowLimited.Load() {
		return time.Time{}, false, nil
	}
	now := d.link.clk.Now()
	if n > 0 {
		f.pool.q[c].stats.record(int64(n), 0)
	}
	return f.after(now), true, nil
}

func (f *Flow) sendSlow(ctx context.Context, n int64, c Class) (time.Time, error) {
	d := f.d
	d.mu.Lock()
	if d.closed || f.closed.Load() {
		d.mu.Unlock()
		return time.Time{}, ErrClosed
	}
	now := d.link.clk.Now()
	next := d.s.arrive(now, f, n, c)
	if f.state != stQueued {
		dep, err := f.depart, f.err
		d.mu.Unlock()
		return f.result(dep, err)
	}
	if f.ready == nil {
		f.ready = make(chan struct{}, 1) // most flows never wait
	}
	f.sleeping = true
	d.armLocked(next)
	d.mu.Unlock()

	select {
	case <-f.ready:
	case <-ctx.Done():
		d.mu.Lock()
		if f.state == stQueued {
			d.s.remove(f)
			f.sleeping = false
			// The flow may have held up others (first in line, or the
			// candidate of its class).
			d.armLocked(d.s.dispatch(d.link.clk.Now()))
			d.mu.Unlock()
			return time.Time{}, ctx.Err()
		}
		d.mu.Unlock()
		<-f.ready // done meanwhile; wake has sent
	}
	return f.result(f.depart, f.err)
}

func (f *Flow) result(dep time.Time, err error) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	return f.after(dep), nil
}

// after keeps the flow's departures non-decreasing (Capacity may have
// dropped to 0 while earlier bytes were still queued).
func (f *Flow) after(dep time.Time) time.Time {
	if dep.Before(f.last) {
		dep = f.last
	}
	f.last = dep
	return dep
}

// Close ends the flow: a waiting Send returns ErrClosed and later Sends
// fail with it. It is safe to call more than once.
func (f *Flow) Close() {
	if !f.closed.CompareAndSwap(false, true) {
		return
	}
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if f.state == stQueued {
		d.s.remove(f)
		f.err = ErrClosed
		f.wake()
		d.armLocked(d.s.dispatch(d.link.clk.Now()))
	}
}

package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
)

// rank is the queue a waiter of class c waits in: 0 is served first.
// Waiters of a higher class are admitted first, across pools; a class
// outside link's ranks as Normal.
func rank(c link.Class) int {
	switch c {
	case link.High:
		return 0
	case link.Low:
		return 2
	}
	return 1
}

// ErrQueueTimeout is the error of a wait that lasted the request's
// Timeout.
var ErrQueueTimeout = errors.New("statement queue timeout")

// ErrCancelled is the error of a wait ended by Waiter.Cancel with a nil
// error.
var ErrCancelled = errors.New("wait cancelled")

// Request asks for one slot.
type Request struct {
	// Pool is the pool whose limit applies; "" is a pool like any other.
	Pool string
	// Group is the group (a link) whose limit applies too; "" means no
	// group limit.
	Group string
	// Class orders the waiter against others; see rank.
	Class link.Class
	// Timeout bounds the wait; 0 (or less) waits until admitted, ctx is
	// done or the waiter is cancelled.
	Timeout time.Duration
	// OnWait, when set, is called once if the request has to wait, in the
	// goroutine of Acquire, with no lock held, after the timeout is armed
	// and before Acquire blocks. The
	// Waiter it gets can cancel or demote the wait from any goroutine
	// until Acquire returns. It is not called when a slot is free.
	OnWait func(*Waiter)
}

// Limits are a controller's slot limits. A pool or group that is absent,
// or has a limit below 1, is unlimited.
type Limits struct {
	Pools  map[string]int
	Groups map[string]int
}

// PoolStats are the counters of one pool.
type PoolStats struct {
	Running int // slots held
	Waiting int // waiters queued
	Limit   int // 0 when unlimited
}

// Options configure a Controller.
type Options struct {
	// Clock arms the queue timeouts; nil means clock.Real.
	Clock clock.Clock
}

// Controller admits requests under per-pool and per-group slot limits.
// It is safe for concurrent use.
type Controller struct {
	clk clock.Clock

	mu     sync.Mutex
	pools  map[string]*counter       // guarded by mu; running/waiting by pool
	groups map[string]*counter       // guarded by mu; running by group
	queues [link.NumClasses]waitList // guarded by mu; waiters by class rank
	seq    uint64                    // guarded by mu; arrival order
	limits Limits                    // guarded by mu; as last Configured
}

// counter counts a pool's or a group's slots.
type counter struct {
	name    string
	running int
	waiting int
	limit   int // < 1 unlimited
}

func (c *counter) full() bool { return c.limit >= 1 && c.running >= c.limit }

// New returns a controller without limits.
func New(o Options) *Controller {
	c := &Controller{clk: o.Clock, pools: map[string]*counter{}, groups: map[string]*counter{}}
	if c.clk == nil {
		c.clk = clock.Real{}
	}
	return c
}

// Waiter is a request that waits. Its methods are safe for concurrent
// use and may be called after the wait ended (they then do nothing).
type Waiter struct {
	c     *Controller
	req   Request
	ready chan struct{} // closed when admitted or cancelled

	// Guarded by c.mu:
	class      link.Class
	seq        uint64
	state      waitState
	err        error // why the wait ended, when cancelled
	slot       *Slot // when admitted
	prev, next *Waiter
}

type waitState uint8

const (
	queued waitState = iota
	admitted
	cancelled
)

// Cancel ends the wait with err (ErrCancelled when nil): Acquire returns
// an error wrapping err. It reports whether the waiter was still queued;
// a waiter already admitted keeps its slot.
func (w *Waiter) Cancel(err error) bool {
	if err == nil {
		err = ErrCancelled
	}
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelLocked(w, err)
}

// Demote moves a queued waiter to class Low, keeping its arrival order
// among Low waiters. It reports whether it moved.
func (w *Waiter) Demote() bool {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.state != queued || w.class == link.Low {
		return false
	}
	c.queues[rank(w.class)].remove(w)
	w.class = link.Low
	c.queues[rank(link.Low)].insert(w)
	// Demotion frees nothing, and every waiter that fits was admitted
	// already, so nobody is admitted now.
	return true
}

// Slot is an admitted request's hold on its pool's and group's slots.
type Slot struct {
	c        *Controller
	pool     *counter
	group    *counter // nil without a group
	released atomic.Bool
}

// Release frees the slot and admits the waiters that then fit. Calling
// it again does nothing. Safe for concurrent use.
func (s *Slot) Release() {
	if s == nil || !s.released.CompareAndSwap(false, true) {
		return
	}
	c := s.c
	c.mu.Lock()
	s.pool.running--
	if s.group != nil {
		s.group.running--
	}
	c.dispatchLocked()
	c.forgetLocked(s.pool)
	if s.group != nil {
		c.forgetGroupLocked(s.group)
	}
	c.mu.Unlock()
}

// TryAcquire returns a slot of req.Pool (and req.Group) if one is free
// now, without waiting; ok is false otherwise. req.Timeout and
// req.OnWait are ignored.
func (c *Controller) TryAcquire(req Request) (s *Slot, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pc := c.poolLocked(req.Pool)
	gc := c.groupLocked(req.Group)
	if !c.fitsLocked(pc, gc) {
		c.forgetLocked(pc)
		if gc != nil {
			c.forgetGroupLocked(gc)
		}
		return nil, false
	}
	return c.grantLocked(pc, gc), true
}

// Acquire returns a slot of req.Pool (and req.Group) once one is free
// and no waiter that comes first is queued. It fails when ctx is done
// (wrapping ctx's cause), when req.Timeout passes (wrapping
// ErrQueueTimeout) or when the waiter is cancelled (wrapping the error
// given to Cancel); a failed Acquire holds nothing.
func (c *Controller) Acquire(ctx context.Context, req Request) (*Slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("admission to pool %q: %w", req.Pool, context.Cause(ctx))
	}
	c.mu.Lock()
	pc := c.poolLocked(req.Pool)
	gc := c.groupLocked(req.Group)
	// No queued waiter fits (dispatch admits every one that does), so a
	// waiter this request could overtake waits for another pool or group.
	if c.fitsLocked(pc, gc) {
		s := c.grantLocked(pc, gc)
		c.mu.Unlock()
		return s, nil
	}
	c.seq++
	w := &Waiter{c: c, req: req, ready: make(chan struct{}), class: req.Class, seq: c.seq}
	pc.waiting++
	c.queues[rank(w.class)].insert(w)
	c.mu.Unlock()

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := c.clk.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C()
	}
	// OnWait runs once the timeout is armed, so a caller that learns of
	// the wait through it can advance a fake clock past the timeout.
	if req.OnWait != nil {
		req.OnWait(w)
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		c.abandon(w, context.Cause(ctx))
	case <-timeout:
		c.abandon(w, ErrQueueTimeout)
	}
	c.mu.Lock()
	s, err := w.slot, w.err
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("admission to pool %q: %w", req.Pool, err)
	}
	return s, nil
}

// abandon ends w's wait with err, or, when w was admitted meanwhile,
// gives its slot back so the failed Acquire holds nothing.
func (c *Controller) abandon(w *Waiter, err error) {
	c.mu.Lock()
	if c.cancelLocked(w, err) {
		c.mu.Unlock()
		return
	}
	s := w.slot
	if w.state == admitted {
		w.slot, w.err, w.state = nil, err, cancelled
	}
	c.mu.Unlock()
	s.Release()
}

// cancelLocked dequeues a queued w with err; false if w is not queued.
func (c *Controller) cancelLocked(w *Waiter, err error) bool {
	if w.state != queued {
		return false
	}
	c.queues[rank(w.class)].remove(w)
	pc := c.pools[w.req.Pool]
	pc.waiting--
	c.forgetLocked(pc)
	w.state, w.err = cancelled, err
	close(w.ready)
	// A waiter that leaves held no slot and blocked nobody (waiters of
	// other pools and groups are skipped, not blocked, by it): nobody is
	// admitted now.
	return true
}

func (c *Controller) fitsLocked(pc, gc *counter) bool {
	return !pc.full() && (gc == nil || !gc.full())
}

func (c *Controller) grantLocked(pc, gc *counter) *Slot {
	pc.running++
	if gc != nil {
		gc.running++
	}
	return &Slot{c: c, pool: pc, group: gc}
}

// forgetLocked drops the counter of an unlimited pool that holds and
// waits for nothing, so the map holds only the pools with a limit and
// those in use. (A limited pool keeps its counter: the common path then
// allocates only its Slot.)
func (c *Controller) forgetLocked(pc *counter) {
	if pc.running == 0 && pc.waiting == 0 && pc.limit < 1 && c.pools[pc.name] == pc {
		delete(c.pools, pc.name)
	}
}

func (c *Controller) forgetGroupLocked(gc *counter) {
	if gc.running == 0 && gc.limit < 1 && c.groups[gc.name] == gc {
		delete(c.groups, gc.name)
	}
}

// dispatchLocked admits, in class order then arrival order, every queued
// waiter whose pool and group have a free slot.
func (c *Controller) dispatchLocked() {
	for r := range c.queues {
		for w := c.queues[r].head; w != nil; {
			next := w.next
			pc, gc := c.pools[w.req.Pool], c.groupLocked(w.req.Group)
			if c.fitsLocked(pc, gc) {
				c.queues[r].remove(w)
				pc.waiting--
				w.slot = c.grantLocked(pc, gc)
				w.state = admitted
				close(w.ready)
			}
			w = next
		}
	}
}

func (c *Controller) poolLocked(name string) *counter {
	pc := c.pools[name]
	if pc == nil {
		pc = &counter{name: name, limit: c.limits.Pools[name]}
		c.pools[name] = pc
	}
	return pc
}

func (c *Controller) groupLocked(name string) *counter {
	if name == "" {
		return nil
	}
	gc := c.groups[name]
	if gc == nil {
		gc = &counter{name: name, limit: c.limits.Groups[name]}
		c.groups[name] = gc
	}
	return gc
}

// Configure replaces the limits. Raising a limit admits waiters at once;
// lowering one lets the running requests finish and admits nobody until
// the pool is below the new limit. The maps are copied.
func (c *Controller) Configure(l Limits) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limits = Limits{Pools: map[string]int{}, Groups: map[string]int{}}
	for k, v := range l.Pools {
		c.limits.Pools[k] = v
	}
	for k, v := range l.Groups {
		c.limits.Groups[k] = v
	}
	for k, pc := range c.pools {
		pc.limit = c.limits.Pools[k]
	}
	for k, gc := range c.groups {
		gc.limit = c.limits.Groups[k]
	}
	c.dispatchLocked()
	for _, pc := range c.pools {
		c.forgetLocked(pc)
	}
	for _, gc := range c.groups {
		c.forgetGroupLocked(gc)
	}
}

// Pool returns the counters of pool name.
func (c *Controller) Pool(name string) PoolStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	pc := c.pools[name]
	if pc == nil {
		return PoolStats{Limit: max(c.limits.Pools[name], 0)}
	}
	return PoolStats{Running: pc.running, Waiting: pc.waiting, Limit: max(pc.limit, 0)}
}

// Pools returns the counters of every pool that has held or waited for a
// slot, or has a limit.
func (c *Controller) Pools() map[string]PoolStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]PoolStats, len(c.pools))
	for k, pc := range c.pools {
		out[k] = PoolStats{Running: pc.running, Waiting: pc.waiting, Limit: max(pc.limit, 0)}
	}
	for k, v := range c.limits.Pools {
		if _, ok := out[k]; !ok {
			out[k] = PoolStats{Limit: max(v, 0)}
		}
	}
	return out
}

// waitList is a doubly linked list of waiters in arrival order.
type waitList struct{ head, tail *Waiter }

// insert places w by its seq (arrival order); a demoted waiter may land
// before later arrivals.
func (l *waitList) insert(w *Waiter) {
	at := l.tail
	for at != nil && at.seq > w.seq {
		at = at.prev
	}
	w.prev = at
	if at == nil {
		w.next = l.head
		l.head = w
	} else {
		w.next = at.next
		at.next = w
	}
	if w.next == nil {
		l.tail = w
	} else {
		w.next.prev = w
	}
}

func (l *waitList) remove(w *Waiter) {
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
}

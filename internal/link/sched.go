package link

import (
	"time"

	"github.com/sluicelab/sluice/internal/limit"
)

// pool is a resource pool as one direction of a link sees it.
type pool struct {
	name   string
	weight int64                 // guarded by the direction's mu; >= 1
	q      [NumClasses]poolQueue // indexed by Class
}

// poolQueue holds the flows of one pool waiting in one class, and the
// pool's deficit round robin state in that class.
type poolQueue struct {
	pool  *pool
	stats counters // atomics; read without the lock

	// Guarded by the direction's mu.
	head, tail *Flow      // waiting flows, first come first served
	waiting    int64      // bytes of the waiting flows
	deficit    int64      // bytes the pool may still send; see ring
	inTurn     bool       // at the ring's head with this turn's quantum added
	inRing     bool       // linked into its class's ring
	prev, next *poolQueue // ring links
}

func (p *poolQueue) quantum() int64 { return Quantum * p.pool.weight }

// ring is the deficit round robin of one class over its pools: a circular
// list whose head is the pool whose turn it is. A turn adds the pool's
// quantum to its deficit; the pool sends while its first waiting flow's
// bytes fit in the deficit, then the turn passes to the next pool and the
// deficit is kept for the next turn.
//
// A flow has one Send outstanding, so a pool's queue is often empty for a
// moment right after it was served. An empty pool therefore keeps its turn
// until another pool's bytes are actually admitted; only then is it taken
// out of the ring, keeping at most one quantum of deficit. Looking at the
// next candidate (peek) changes nothing; admitting it (take) does.
type ring struct {
	head    *poolQueue
	n       int // pools in the ring
	waiting int // flows waiting in the class
}

func (r *ring) add(p *poolQueue) {
	if r.head == nil {
		p.prev, p.next = p, p
		r.head = p
	} else {
		t := r.head.prev
		p.prev, p.next = t, r.head
		t.next = p
		r.head.prev = p
	}
	p.inRing = true
	r.n++
}

func (r *ring) remove(p *poolQueue) {
	if p.next == p {
		r.head = nil
	} else {
		p.prev.next, p.next.prev = p.next, p.prev
		if r.head == p {
			r.head = p.next
		}
	}
	p.prev, p.next = nil, nil
	p.inRing, p.inTurn = false, false
	p.deficit = min(p.deficit, p.quantum())
	r.n--
}

// turnDeficit is what p could send if its turn came now.
func turnDeficit(p *poolQueue) int64 {
	if p.inTurn {
		return p.deficit
	}
	return p.deficit + p.quantum()
}

// roundsNeeded is how many further turns p needs, after its first, until
// its first waiting flow fits.
func roundsNeeded(p *poolQueue) int64 {
	q := p.quantum()
	return (p.head.n - turnDeficit(p) + q - 1) / q
}

// peek returns the pool that take would serve, changing nothing. The
// ring must hold a waiting flow.
func (r *ring) peek() *poolQueue {
	p := r.head
	for range r.n {
		if p.head != nil && p.head.n <= turnDeficit(p) {
			return p
		}
		p = p.next
	}
	// Nobody can send this round: the first pool in ring order that needs
	// the fewest further rounds.
	var best *poolQueue
	var bestK int64
	p = r.head
	for range r.n {
		if p.head != nil {
			if k := roundsNeeded(p); best == nil || k < bestK {
				best, bestK = p, k
			}
		}
		p = p.next
	}
	return best
}

// take runs the round robin up to the pool whose first flow is served
// next and returns it, with that flow's bytes still in its deficit. Empty
// pools met on the way leave the ring. The ring must hold a waiting flow.
func (r *ring) take() *poolQueue {
	misses := 0
	for {
		p := r.head
		if p.head == nil {
			r.remove(p)
			continue
		}
		if !p.inTurn {
			p.deficit += p.quantum()
			p.inTurn = true
		}
		if p.head.n <= p.deficit {
			return p
		}
		p.inTurn = false
		r.head = p.next
		if misses++; misses < r.n {
			continue
		}
		// A whole round without a send (every pool is now non-empty and
		// out of turn): skip the k rounds in which nobody could send, so
		// that the next round serves someone.
		var k int64
		q := r.head
		for i := range r.n {
			if ki := roundsNeeded(q); i == 0 || ki < k {
				k = ki
			}
			q = q.next
		}
		for range r.n {
			q.deficit += k * q.quantum()
			q = q.next
		}
		misses = 0
	}
}

// sched is the scheduler of one link direction: the waiting flows, the
// class rings, the device FIFO and the Low-class leaky bucket. It is pure
// logic on times passed in; it neither blocks nor reads a clock. Not safe
// for concurrent use; the direction's mu guards it.
type sched struct {
	cfg     Config // normalized
	pools   map[string]*pool
	rings   [NumClasses]ring // indexed by Class
	arrival flowList         // every waiting flow, in arrival order
	fifo    fifo
	low     limit.LeakyBucket
	// yield meters the Low class while it yields (Config.LowYieldPercent);
	// only Low admissions made while yielding are reserved in it.
	yield limit.LeakyBucket
	// higherUntil is when the Low class stops yielding, if engaged is 0:
	// YieldHold after the departure of the last Normal or High byte
	// admitted, or after the last engaged statement ended.
	higherUntil time.Time
	// engaged counts the running statements above Low (Link.Engage).
	engaged int
	// floor is the virtual time the scheduler has reached: the FIFO is
	// pruned up to it and no admission is dated before it. It never
	// exceeds the latest now passed in.
	floor time.Time

	// onAdmit, when set, sees every admission in order. Tests use it.
	onAdmit func(f *Flow)
}

// flowList is an intrusive list of flows through Flow.arrPrev/arrNext.
type flowList struct{ head, tail *Flow }

func newSched(cfg Config, now time.Time) *sched {
	s := &sched{pools: make(map[string]*pool)}
	s.configure(now, cfg.normalized())
	return s
}

// pool returns the named pool, creating it.
func (s *sched) pool(name string) *pool {
	if p, ok := s.pools[name]; ok {
		return p
	}
	p := &pool{name: name, weight: s.cfg.weight(name)}
	for c := range p.q {
		p.q[c].pool = p
	}
	s.pools[name] = p
	return p
}

// configure applies a normalized configuration at now. Waiting flows keep
// their place; bytes already admitted keep their departure, and flows
// whose obstacle went away before now are admitted under the old
// settings first.
func (s *sched) configure(now time.Time, cfg Config) {
	s.catchUp(now)
	s.advance(now) // the new settings hold from now on
	if cfg.Capacity != s.cfg.Capacity {
		s.fifo.tailRem = 0
	}
	s.cfg = cfg
	s.low.SetRate(now, cfg.LowPriorityBandwidth)
	s.yield.SetRate(now, cfg.yieldRate())
	for name, p := range s.pools {
		p.weight = cfg.weight(name)
	}
}

// arrive makes f wait with n bytes of class c, sent at now, and runs the
// scheduler; it returns when the scheduler should run again, as dispatch.
//
// Flows whose obstacle went away before now are admitted first, as a
// punctual run would have admitted them before f existed: a late timer
// must not let a later arrival of a higher class take the place of a
// lower class's admission that was due, or the link would idle for the
// lateness. Only then does f compete, by priority, with what is left; at
// the same instant, priority decides.
func (s *sched) arrive(now time.Time, f *Flow, n int64, c Class) time.Time {
	s.catchUp(now)
	s.enqueue(now, f, n, c)
	return s.dispatch(now)
}

// catchUp admits the waiting flows whose obstacles went away before now,
// leaving those that would be admitted at now itself.
func (s *sched) catchUp(now time.Time) {
	if s.arrival.head != nil {
		s.dispatch(now.Add(-1))
	}
}

// enqueue makes f wait with n bytes of class c, sent at now.
func (s *sched) enqueue(now time.Time, f *Flow, n int64, c Class) {
	f.n, f.class, f.start, f.state, f.err = n, c, now, stQueued, nil
	f.arrPrev, f.arrNext = s.arrival.tail, nil
	if s.arrival.tail != nil {
		s.arrival.tail.arrNext = f
	} else {
		s.arrival.head = f
	}
	s.arrival.tail = f

	p := &f.pool.q[c]
	f.qPrev, f.qNext = p.tail, nil
	if p.tail != nil {
		p.tail.qNext = f
	} else {
		p.head = f
	}
	p.tail = f
	p.waiting += n
	r := &s.rings[c]
	r.waiting++
	if !p.inRing {
		r.add(p)
	}
}

// remove takes a waiting f out of every queue; it admits nothing.
func (s *sched) remove(f *Flow) {
	if f.arrPrev != nil {
		f.arrPrev.arrNext = f.arrNext
	} else {
		s.arrival.head = f.arrNext
	}
	if f.arrNext != nil {
		f.arrNext.arrPrev = f.arrPrev
	} else {
		s.arrival.tail = f.arrPrev
	}
	p := &f.pool.q[f.class]
	if f.qPrev != nil {
		f.qPrev.qNext = f.qNext
	} else {
		p.head = f.qNext
	}
	if f.qNext != nil {
		f.qNext.qPrev = f.qPrev
	} else {
		p.tail = f.qPrev
	}
	f.arrPrev, f.arrNext, f.qPrev, f.qNext = nil, nil, nil, nil
	p.waiting -= f.n
	s.rings[f.class].waiting--
	f.state = stIdle
}

// failAll removes every waiting flow and wakes it with err.
func (s *sched) failAll(err error) {
	for f := s.arrival.head; f != nil; f = s.arrival.head {
		s.remove(f)
		f.err = err
		f.wake()
	}
}

// candidate returns the flow the policy serves next and its queue.
func (s *sched) candidate() (*Flow, *poolQueue) {
	if !s.cfg.NetworkControl {
		f := s.arrival.head
		return f, &f.pool.q[f.class]
	}
	for _, c := range byPriority {
		if s.rings[c].waiting > 0 {
			p := s.rings[c].peek()
			return p.head, p
		}
	}
	return nil, nil // not reached: arrival is not empty
}

// advance moves the scheduler's virtual time to t if t is later.
func (s *sched) advance(t time.Time) {
	if t.After(s.floor) {
		s.floor = t
		s.fifo.prune(t)
	}
}

// blockedAt returns, if f's bytes cannot be admitted at t (the FIFO
// pruned to t), the earliest time the first obstacle goes away; the zero
// time if they can be admitted.
func (s *sched) blockedAt(t time.Time, f *Flow) time.Time {
	c := &s.cfg
	if c.Capacity > 0 {
		if at := s.fifo.whenFits(f.n, c.QueueSize, false); !at.IsZero() {
			return at
		}
	}
	if !c.NetworkControl || f.class != Low {
		return time.Time{}
	}
	if c.Capacity > 0 && c.LowPriorityQueueBytes >= 0 {
		if at := s.fifo.whenFits(f.n, c.LowPriorityQueueBytes, true); !at.IsZero() {
			return at
		}
	}
	if c.LowPriorityBandwidth > 0 {
		if at := s.low.Next(t, int(f.n)); at.After(t) {
			return at
		}
	}
	if s.yielding(t) {
		if at := s.yield.Next(t, int(f.n)); at.After(t) {
			if s.engaged == 0 && at.After(s.higherUntil) {
				return s.higherUntil
			}
			return at
		}
	}
	return time.Time{}
}

// engage counts a statement above Low that began (on) or ended at now
// (Link.Engage), and reports whether the scheduler should run: the last
// one ended, so the yield now has an end.
func (s *sched) engage(now time.Time, on bool) bool {
	if on {
		s.engaged++
		return false
	}
	if s.engaged == 0 {
		return false
	}
	s.engaged--
	if until := now.Add(YieldHold); until.After(s.higherUntil) {
		s.higherUntil = until
	}
	return s.engaged == 0
}

// yielding reports whether the Low class yields at t: it may, and a
// statement above Low runs, or one ended or had a byte on the link less
// than YieldHold before.
func (s *sched) yielding(t time.Time) bool {
	return s.cfg.yieldRate() > 0 && (s.engaged > 0 || t.Before(s.higherUntil))
}

// admissible returns the earliest time, not before f was sent nor before
// the scheduler's virtual time, at which f's bytes may be admitted. A
// result after now means f must wait until then.
func (s *sched) admissible(now time.Time, f *Flow) time.Time {
	t := f.start
	for {
		s.advance(t)
		t = s.floor
		at := s.blockedAt(t, f)
		switch {
		case at.IsZero():
			return t
		case at.After(now):
			return at
		}
		t = at // the obstacle went away before now: look again then
	}
}

// dispatch admits every waiting flow the policy allows up to now, in the
// policy's order, and returns when it should run again: the earliest time
// the next candidate might be admitted, or the zero time if nothing
// waits. Arrivals, cancellations and configuration changes also call for
// a run.
//
// A flow whose obstacle went away at d <= now (the run came late, as real
// timers do) is admitted at d, not at now: its departure is the one an
// exact wake-up would have given, so a late run costs the emulated link
// no capacity. Admission times never decrease.
func (s *sched) dispatch(now time.Time) time.Time {
	for s.arrival.head != nil {
		f, p := s.candidate()
		at := s.admissible(now, f)
		if at.After(now) {
			return at
		}
		if s.cfg.NetworkControl {
			p = s.rings[f.class].take()
			f = p.head
			p.deficit -= f.n
		}
		s.admit(at, f, p)
	}
	s.advance(now)
	return time.Time{}
}

// admit moves f's bytes into the device FIFO at now (the scheduler's
// virtual time) and wakes f.
func (s *sched) admit(now time.Time, f *Flow, p *poolQueue) {
	if f.class == Low && s.cfg.lowLimited() {
		s.low.Reserve(now, int(f.n))
	}
	dep := now
	if s.cfg.Capacity > 0 {
		dep = s.fifo.push(now, f.n, f.class, s.cfg.Capacity)
	}
	switch {
	case f.class != Low:
		if until := dep.Add(YieldHold); until.After(s.higherUntil) {
			s.higherUntil = until
		}
	case s.yielding(now):
		s.yield.Reserve(now, int(f.n))
	}
	s.remove(f)
	f.depart = dep
	p.stats.record(f.n, dep.Sub(f.start))
	if s.onAdmit != nil {
		s.onAdmit(f)
	}
	f.wake()
}

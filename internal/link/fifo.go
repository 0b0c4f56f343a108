package link

import (
	"time"

	"github.com/sluicelab/sluice/internal/limit"
)

// segment is one admission inside the device FIFO.
type segment struct {
	depart time.Time // when its last byte leaves
	n      int64     // bytes
	class  Class
}

// fifo is the emulated device queue of one direction: admitted bytes in
// order, draining at the capacity. A segment occupies the queue until its
// departure time; occupancy at t is the bytes of the segments departing
// after t. Not safe for concurrent use; the direction's mu guards it.
type fifo struct {
	segs  []segment // ring buffer
	head  int       // index of the oldest segment
	count int       // segments in the ring

	tail    time.Time // departure of the last byte admitted
	tailRem int64     // fraction of a ns beyond tail, in units of 1/rate ns

	total int64             // bytes in the ring
	occ   [NumClasses]int64 // bytes in the ring by class
}

// prune drops the segments that have departed at now.
func (q *fifo) prune(now time.Time) {
	for q.count > 0 {
		s := &q.segs[q.head]
		if s.depart.After(now) {
			return
		}
		q.total -= s.n
		q.occ[s.class] -= s.n
		*s = segment{}
		q.head = (q.head + 1) % len(q.segs)
		q.count--
	}
}

// occupancy returns the bytes by class departing after now, leaving the
// ring as it is.
func (q *fifo) occupancy(now time.Time) [NumClasses]int64 {
	occ := q.occ
	for i := range q.count {
		s := &q.segs[(q.head+i)%len(q.segs)]
		if s.depart.After(now) {
			break
		}
		occ[s.class] -= s.n
	}
	return occ
}

// push admits n bytes of class c at now into a queue draining at rate
// bytes/s (> 0) and returns their departure: max(now, tail) + n/rate.
func (q *fifo) push(now time.Time, n int64, c Class, rate int64) time.Time {
	start, rem := q.tail, q.tailRem
	if !start.After(now) {
		start, rem = now, 0
	}
	d, rem := limit.Drain(n, rem, rate)
	dep := start.Add(d)
	q.tail, q.tailRem = dep, rem
	if q.count == len(q.segs) {
		q.grow()
	}
	q.segs[(q.head+q.count)%len(q.segs)] = segment{depart: dep, n: n, class: c}
	q.count++
	q.total += n
	q.occ[c] += n
	return dep
}

func (q *fifo) grow() {
	segs := make([]segment, max(16, 2*len(q.segs)))
	for i := range q.count {
		segs[i] = q.segs[(q.head+i)%len(q.segs)]
	}
	q.segs, q.head = segs, 0
}

// whenFits returns the earliest departure after which n more bytes fit
// under bound: the occupancy (of class Low only, if lowOnly) plus n is at
// most bound, or the occupancy is zero. It returns the zero time if they
// fit already.
func (q *fifo) whenFits(n, bound int64, lowOnly bool) time.Time {
	occ := q.total
	if lowOnly {
		occ = q.occ[Low]
	}
	if occ == 0 || occ+n <= bound {
		return time.Time{}
	}
	for i := range q.count {
		s := &q.segs[(q.head+i)%len(q.segs)]
		if lowOnly && s.class != Low {
			continue
		}
		occ -= s.n
		if occ == 0 || occ+n <= bound {
			return s.depart
		}
	}
	return q.tail // not reached: the loop empties the queue
}

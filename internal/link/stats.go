package link

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// delayBounds are the upper bounds of the queue-delay histogram buckets.
var delayBounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	1 * time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	1 * time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// NumDelayBuckets is the number of queue-delay histogram buckets: one per
// bound from 50us to 5s, and one for longer delays.
const NumDelayBuckets = len(delayBounds) + 1

// DelayBound returns the upper bound (inclusive) of histogram bucket i:
// 50us, 100us, 250us, 500us, 1ms, 2.5ms, 5ms, 10ms, 25ms, 50ms, 100ms,
// 250ms, 500ms, 1s, 2.5s, 5s, and for the last bucket the largest
// Duration.
func DelayBound(i int) time.Duration {
	if i >= 0 && i < len(delayBounds) {
		return delayBounds[i]
	}
	return time.Duration(1<<63 - 1)
}

func bucketOf(d time.Duration) int {
	for i, b := range delayBounds {
		if d <= b {
			return i
		}
	}
	return len(delayBounds)
}

// Histogram counts queue delays in fixed buckets.
type Histogram struct {
	// Counts[i] is the number of Sends whose delay was at most
	// DelayBound(i) and above DelayBound(i-1). Not cumulative.
	Counts [NumDelayBuckets]int64
	// Sum is the total delay of the counted Sends.
	Sum time.Duration
}

// Count returns the number of Sends counted.
func (h Histogram) Count() int64 {
	var n int64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Mean returns the mean delay, 0 when nothing was counted.
func (h Histogram) Mean() time.Duration {
	if n := h.Count(); n > 0 {
		return h.Sum / time.Duration(n)
	}
	return 0
}

func (h *Histogram) add(o *Histogram) {
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.Sum += o.Sum
}

// ClassStats describes the traffic of one class (of one pool, or of all).
type ClassStats struct {
	Bytes   int64     // bytes admitted since the link was made
	Waiting int64     // bytes of the Sends waiting at the snapshot
	Delay   Histogram // queue delay: from Send to the departure of its last byte
}

func (c *ClassStats) add(o *ClassStats) {
	c.Bytes += o.Bytes
	c.Waiting += o.Waiting
	c.Delay.add(&o.Delay)
}

// PoolStats describes one pool's traffic in one direction.
type PoolStats struct {
	Pool    string
	Weight  int
	Classes [NumClasses]ClassStats // indexed by Class
}

// DirectionStats describes one direction of a link.
type DirectionStats struct {
	Classes [NumClasses]ClassStats // totals over the pools, indexed by Class
	Pools   []PoolStats            // sorted by pool name
	// Queue is the device FIFO occupancy at the snapshot by class, in
	// bytes: admitted bytes that have not departed.
	Queue [NumClasses]int64
}

// QueueBytes returns the total device FIFO occupancy.
func (d DirectionStats) QueueBytes() int64 {
	return d.Queue[High] + d.Queue[Normal] + d.Queue[Low]
}

// Stats is a snapshot of a link's counters.
type Stats struct {
	Name       string
	Directions [2]DirectionStats // indexed by Direction
}

// counters are one pool's counters in one class, updated with atomics so
// the unlimited path takes no lock.
type counters struct {
	bytes   atomic.Int64
	sum     atomic.Int64 // ns
	buckets [NumDelayBuckets]atomic.Int64
}

func (c *counters) record(n int64, delay time.Duration) {
	c.bytes.Add(n)
	if delay > 0 {
		c.sum.Add(int64(delay))
	}
	c.buckets[bucketOf(delay)].Add(1)
}

func (c *counters) load(cs *ClassStats) {
	cs.Bytes = c.bytes.Load()
	cs.Delay.Sum = time.Duration(c.sum.Load())
	for i := range c.buckets {
		cs.Delay.Counts[i] = c.buckets[i].Load()
	}
}

// statsLocked returns the snapshot of one direction at now.
func (s *sched) statsLocked(now time.Time) DirectionStats {
	ds := DirectionStats{Queue: s.fifo.occupancy(now), Pools: make([]PoolStats, 0, len(s.pools))}
	for _, p := range s.pools {
		ps := PoolStats{Pool: p.name, Weight: int(p.weight)}
		for c := range p.q {
			cs := &ps.Classes[c]
			p.q[c].stats.load(cs)
			cs.Waiting = p.q[c].waiting
			ds.Classes[c].add(cs)
		}
		ds.Pools = append(ds.Pools, ps)
	}
	slices.SortFunc(ds.Pools, func(a, b PoolStats) int { return strings.Compare(a.Pool, b.Pool) })
	return ds
}

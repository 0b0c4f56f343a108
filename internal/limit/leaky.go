package limit

import "time"

// LeakyBucket shapes a stream to a constant rate. Units enter the bucket
// in reservation order and leak out at the rate, one after another; the
// bucket is a queue, so idle time earns nothing beyond one tick.
//
// Release is quantized to ticks of the granularity g, aligned to the first
// time the bucket sees: a reservation passes at the start of the tick in
// which its first unit leaks, or at once if that tick has begun. So a
// backlogged stream is released once per tick, in batches.
//
// A reservation made when the bucket is empty (its last unit leaked
// before now) is either late or new. Late: the last unit leaked at most
// one tick before now. The stream was held back, not idle (a timer that
// fired late, a caller that wrote and read between two reservations), so
// its units leak on from where the last one ended, and the part of the
// rate it missed is made up. New: the bucket has been empty for longer.
// The units leak from the start of now's tick: the ticks before are lost,
// the current one is not.
//
// So:
//
//   - each tick releases at most rate*g units plus the overdraft of its
//     last reservation (the part that leaks in later ticks, which those
//     ticks repay), plus, for a late reservation, what the stream left
//     unused in the tick before: at most 2*rate*g and an overdraft, and
//     only right after a tick in which the stream fell behind;
//   - over any interval of length T at most rate*(T+2g) units pass, plus
//     one reservation (rate*(T+g) for a stream that is never late);
//   - a stream that keeps reserving, even up to one tick late each time,
//     gets exactly the rate in the long run, and never more.
//
// With rate 256e6 bytes/s and g = 1 ms a busy stream passes 256 kB per
// millisecond plus one chunk, and never more on average. A reservation
// larger than rate*g still passes in the tick its first unit leaks in;
// the reservations behind it wait for its whole leak time.
//
// After a pause a stream gets the current tick's allowance at once (plus
// one reservation's overdraft) and then rate*g per tick, where a
// FixedWindow gives a whole fresh window on each side of an edge.
//
// Next's answer does not depend on n: it is when the bucket releases its
// next unit. SetRate carries the units reserved but not yet leaked over:
// they leak at the new rate.
//
// The zero value is an unlimited bucket with the default granularity.
// A LeakyBucket is safe for concurrent use.
type LeakyBucket struct{ core[leak] }

// leak is the LeakyBucket policy: its granularity in ns, 0 means
// DefaultGranularity.
type leak int64

// NewLeakyBucket returns a bucket leaking rate units per second with the
// given granularity. rate <= 0 means unlimited; granularity <= 0 means
// DefaultGranularity.
func NewLeakyBucket(rate int64, granularity time.Duration) *LeakyBucket {
	return &LeakyBucket{newCore(rate, leak(granularity))}
}

// Granularity returns the tick length.
func (b *LeakyBucket) Granularity() time.Duration { return b.tick(int64(b.p), DefaultGranularity) }

func (l leak) anchor(t int64) int64 { return t }

func (l leak) planLocked(m *meter, t int64, n int, commit bool) int64 {
	g := orDefault(int64(l), DefaultGranularity)
	s, rem := m.cur, m.rem
	if s < t && t-s > g {
		// New: empty for more than a tick. Leak from the start of now's
		// tick; a late reservation leaks on from the cursor.
		s, rem = floorTo(t, g), 0
	}
	if commit {
		m.cur, m.rem = advance(s, rem, n, m.rate)
	}
	return floorTo(s, g)
}

package limit

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// Limiter meters a stream of units (bytes, in sluice) against a rate in
// units per second. Time is passed in; a Limiter never reads a clock.
//
// Reservations are granted in the order they are made: between rate
// changes, a later Reserve never passes before an earlier one. A rate of 0 means unlimited: every
// reservation passes at the time it is made and nothing is recorded.
type Limiter interface {
	// Reserve commits n units at now and returns the time at which they
	// may pass: now, or later if the limit requires. The units count
	// against the limit whether or not the caller waits. n <= 0 commits
	// nothing and returns when a reservation would pass.
	Reserve(now time.Time, n int) (at time.Time)
	// Next returns the time a Reserve of n units at now would return,
	// without committing anything.
	Next(now time.Time, n int) (at time.Time)
	// SetRate changes the rate to rate units per second from now on.
	// Units already committed keep their place: the backlog they form is
	// carried over in units, so it drains at the new rate. rate <= 0
	// means unlimited and forgets the backlog.
	SetRate(now time.Time, rate int64)
}

// meter is the state the three limiters share: a cursor on a virtual time
// line that advances by 1/rate seconds per unit. Offsets are nanoseconds
// since origin, the first time the meter saw; windows and ticks are
// aligned to origin. Durations are taken with time.Time.Sub, so monotonic
// readings are used when the times carry them.
//
// mu guards the meter and the fields of the limiter that embeds it; the
// methods whose names end in Locked expect it held.
type meter struct {
	mu      sync.Mutex
	origin  time.Time // guarded by mu; first time passed in
	started bool      // guarded by mu; origin is set
	rate    int64     // guarded by mu; units per second, 0 means unlimited
	cur     int64     // guarded by mu; ns since origin, the exact cursor is cur + rem/rate ns
	rem     int64     // guarded by mu; in [0, rate)
}

// Defaults of the limiters' time quanta.
const (
	// DefaultWindow is the window of a FixedWindow whose window is not
	// set.
	DefaultWindow = time.Second
	// DefaultGranularity is the tick of a LeakyBucket whose granularity
	// is not set.
	DefaultGranularity = time.Millisecond
)

// policy is what sets one algorithm apart: its parameters, and the
// arithmetic on the meter's cursor. Its methods run with the meter's mu
// held; its fields are guarded by it too.
type policy interface {
	// planLocked returns the offset at which n units reserved at offset t
	// pass and, if commit, moves the cursor past them. It is called only
	// while the rate is not 0.
	planLocked(m *meter, t int64, n int, commit bool) int64
	// anchor returns the offset from which a rate change at offset t
	// carries the backlog over.
	anchor(t int64) int64
}

// core is a Limiter: the meter and the policy P that plans on it. Its
// zero value is unlimited, with P's zero parameters.
type core[P policy] struct {
	meter
	p P // guarded by mu
}

// newCore returns a core at rate (<= 0: unlimited) with policy p, as
// SetRate on a zero core would leave it.
func newCore[P policy](rate int64, p P) core[P] {
	return core[P]{meter: meter{rate: max(rate, 0)}, p: p}
}

// Reserve commits n units at now and returns when they may pass.
func (c *core[P]) Reserve(now time.Time, n int) time.Time { return c.reserve(now, n, true) }

// Next returns when n units reserved at now would pass, committing
// nothing.
func (c *core[P]) Next(now time.Time, n int) time.Time { return c.reserve(now, n, false) }

func (c *core[P]) reserve(now time.Time, n int, commit bool) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rate == 0 {
		return now
	}
	t := c.offset(now)
	return c.timeAt(now, t, c.p.planLocked(&c.meter, t, n, commit))
}

// SetRate changes the rate from now on; the backlog is carried over in
// units, so it drains at the new rate. rate <= 0 means unlimited.
func (c *core[P]) SetRate(now time.Time, rate int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setRate(rate, c.p.anchor(c.offset(now)))
}

// Rate returns the rate in units per second; 0 means unlimited.
func (m *meter) Rate() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rate
}

// tick returns the meter's window or tick length under mu: d in ns, or
// def when d <= 0.
func (m *meter) tick(d int64, def time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Duration(orDefault(d, def))
}

// orDefault returns d, or def in ns when d <= 0.
func orDefault(d int64, def time.Duration) int64 {
	if d <= 0 {
		return int64(def)
	}
	return d
}

// offset returns now as nanoseconds since origin, setting origin on first
// use.
func (m *meter) offset(now time.Time) int64 {
	if !m.started {
		m.origin, m.started = now, true
		m.cur = 0
	}
	return int64(now.Sub(m.origin))
}

// timeAt converts the offset at back to a time. at == t returns now
// itself, so callers can compare the result with ==.
func (m *meter) timeAt(now time.Time, t, at int64) time.Time {
	if at <= t {
		return now
	}
	if t < 0 && at > math.MaxInt64+t {
		return now.Add(math.MaxInt64)
	}
	return now.Add(time.Duration(at - t))
}

// setRate changes the rate, carrying the backlog beyond anchor (an offset)
// over in units.
func (m *meter) setRate(rate, anchor int64) {
	if rate < 0 {
		rate = 0
	}
	if rate == m.rate {
		return
	}
	switch {
	case m.rate == 0 || rate == 0:
		m.cur, m.rem = anchor, 0 // no backlog is carried to or from unlimited
	case m.cur < anchor:
		m.rem = 0
	default:
		// backlog in units*1e9 is (cur-anchor)*old + rem; in ns at the
		// new rate it is that divided by the new rate.
		hi, lo := bits.Mul64(uint64(m.cur-anchor), uint64(m.rate))
		var c uint64
		lo, c = bits.Add64(lo, uint64(m.rem), 0)
		hi += c
		if hi >= uint64(rate) {
			m.cur, m.rem = math.MaxInt64, 0
			break
		}
		q, r := bits.Div64(hi, lo, uint64(rate))
		m.cur, m.rem = satAdd(anchor, q), int64(r)
	}
	m.rate = rate
}

// advance returns the cursor (cur, rem) moved by n units at rate. It
// saturates at math.MaxInt64 ns instead of overflowing.
func advance(cur, rem int64, n int, rate int64) (int64, int64) {
	if n <= 0 {
		return cur, rem
	}
	hi, lo := bits.Mul64(uint64(n), uint64(time.Second))
	var c uint64
	lo, c = bits.Add64(lo, uint64(rem), 0)
	hi += c
	if hi >= uint64(rate) {
		return math.MaxInt64, 0
	}
	q, r := bits.Div64(hi, lo, uint64(rate))
	return satAdd(cur, q), int64(r)
}

// Drain returns the time n units take at rate units per second (> 0),
// carrying the fraction of a nanosecond in rem (in units of 1/rate ns, in
// [0, rate)) so that many small amounts add up exactly: it returns the
// duration and the new rem. n <= 0 takes no time. It saturates at
// math.MaxInt64 ns instead of overflowing.
func Drain(n, rem, rate int64) (time.Duration, int64) {
	d, r := advance(0, rem, int(n), rate)
	return time.Duration(d), r
}

// cost returns n units at rate in whole nanoseconds, rounded down and
// saturated.
func cost(n int64, rate int64) int64 {
	if n <= 0 {
		return 0
	}
	d, _ := advance(0, 0, int(n), rate)
	return d
}

// satAdd returns a+d, saturated at math.MaxInt64.
func satAdd(a int64, d uint64) int64 {
	if d > math.MaxInt64 || a > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return a + int64(d)
}

// floorTo rounds t down to a multiple of g (g > 0), also for negative t.
func floorTo(t, g int64) int64 {
	r := t % g
	if r < 0 {
		r += g
	}
	return t - r
}

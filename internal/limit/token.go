package limit

import "time"

// TokenBucket is a token bucket: tokens accrue at the rate up to the
// burst, and n units pass when n tokens are there. It starts full.
//
// After idle time a stream may pass burst units at once, and over any
// interval of length T at most burst + rate*T units pass; a window edge
// means nothing to it. A reservation larger than the burst passes when the
// bucket is full and leaves it in debt, so the long-run rate still holds.
// With burst <= 0 the bucket holds no credit: each reservation passes when
// the one before it has been paid for, which paces the stream at the rate
// with no burst at all.
//
// SetRate keeps the tokens owed: they are refilled at the new rate.
//
// The zero value is an unlimited bucket. A TokenBucket is safe for
// concurrent use.
type TokenBucket struct {
	// The cursor is the time at which the bucket is full again:
	// tokens(t) = burst - rate*(cur - t) while t < cur.
	meter
	burst int64 // guarded by mu; units
}

// NewTokenBucket returns a full bucket of burst units refilled at rate
// units per second. rate <= 0 means unlimited.
func NewTokenBucket(rate int64, burst int) *TokenBucket {
	b := &TokenBucket{burst: int64(burst)}
	b.setRate(rate, 0)
	return b
}

// Burst returns the bucket size in units.
func (b *TokenBucket) Burst() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.burst)
}

// SetBurst changes the bucket size from now on. The tokens missing from a
// full bucket stay missing.
func (b *TokenBucket) SetBurst(burst int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.burst = int64(burst)
}

// Reserve commits n units at now and returns when they may pass.
func (b *TokenBucket) Reserve(now time.Time, n int) time.Time { return b.plan(b, now, n, true) }

// Next returns when n units reserved at now would pass, committing
// nothing.
func (b *TokenBucket) Next(now time.Time, n int) time.Time { return b.plan(b, now, n, false) }

// SetRate changes the refill rate from now on; the tokens owed keep
// owing, now refilled at the new rate. rate <= 0 means unlimited.
func (b *TokenBucket) SetRate(now time.Time, rate int64) { b.setRateAt(now, rate) }

func (b *TokenBucket) planLocked(now time.Time, n int, commit bool) time.Time {
	if b.rate == 0 {
		return now
	}
	t := b.offset(now)
	x, rem := b.cur, b.rem
	if x < t {
		x, rem = t, 0 // full
	}
	e, erem := advance(x, rem, n, b.rate)
	wait := max(cost(b.burst, b.rate), e-x)
	at := e - wait
	if commit {
		b.cur, b.rem = e, erem
	}
	return b.timeAt(now, t, at)
}

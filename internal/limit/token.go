package limit

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
type TokenBucket struct{ core[token] }

// token is the TokenBucket policy. The cursor is the time at which the
// bucket is full again: tokens(t) = burst - rate*(cur - t) while t < cur.
type token struct {
	burst int64 // units
}

// NewTokenBucket returns a full bucket of burst units refilled at rate
// units per second. rate <= 0 means unlimited.
func NewTokenBucket(rate int64, burst int) *TokenBucket {
	return &TokenBucket{newCore(rate, token{burst: int64(burst)})}
}

// Burst returns the bucket size in units.
func (b *TokenBucket) Burst() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.p.burst)
}

// SetBurst changes the bucket size from now on. The tokens missing from a
// full bucket stay missing.
func (b *TokenBucket) SetBurst(burst int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.p.burst = int64(burst)
}

func (k token) anchor(t int64) int64 { return t }

func (k token) planLocked(m *meter, t int64, n int, commit bool) int64 {
	x, rem := m.cur, m.rem
	if x < t {
		x, rem = t, 0 // full
	}
	e, erem := advance(x, rem, n, m.rate)
	wait := max(cost(k.burst, m.rate), e-x)
	if commit {
		m.cur, m.rem = e, erem
	}
	return e - wait
}

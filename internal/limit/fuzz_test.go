package limit

import (
	"testing"
	"time"
)

// FuzzLimiters feeds each limiter arbitrary reservations, rate changes and
// clock steps, and checks what holds for all of them: nothing passes
// before it is reserved, reservations pass in order, and Next predicts
// Reserve.
func FuzzLimiters(f *testing.F) {
	f.Add([]byte{1, 10, 0, 5, 2, 200, 0, 1, 0, 0, 3, 9, 1, 255, 255})
	f.Add([]byte{0, 0, 0, 0, 3, 0, 1, 7, 2, 1, 2, 3, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		limiters := []Limiter{
			NewLeakyBucket(1_000_000, ms),
			NewFixedWindow(1_000_000, 10*ms),
			NewTokenBucket(1_000_000, 5000),
			NewTokenBucket(3, 0),
		}
		for _, l := range limiters {
			now := t0
			var last time.Time
			for d := data; len(d) >= 3; d = d[3:] {
				op, a, b := d[0]%4, int(d[1]), int(d[2])
				switch op {
				case 0: // clock step
					now = now.Add(time.Duration(a)*ms + time.Duration(b)*time.Microsecond)
				case 1: // rate change; 0 is unlimited
					l.SetRate(now, int64(a)*int64(b)*1000)
					last = time.Time{}
				default: // reserve
					n := a * (b + 1) * 10
					want := l.Next(now, n)
					at := l.Reserve(now, n)
					if !at.Equal(want) {
						t.Fatalf("%T: Next said %v, Reserve %v", l, want.Sub(t0), at.Sub(t0))
					}
					if at.Before(now) || at.Before(last) {
						t.Fatalf("%T: reservation at %v passes at %v, previous at %v", l, now.Sub(t0), at.Sub(t0), last.Sub(t0))
					}
					last = at
				}
			}
		}
	})
}

package limit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var (
	_ Limiter = (*LeakyBucket)(nil)
	_ Limiter = (*FixedWindow)(nil)
	_ Limiter = (*TokenBucket)(nil)
)

var t0 = time.Unix(1_700_000_000, 0)

const ms = time.Millisecond

// step is one call: at offset at from t0, reserve n (or, with peek, only
// ask Next), or change the rate to rate when rate != 0 (-1 means 0).
type step struct {
	at   time.Duration
	n    int
	peek bool
	rate int64
	want time.Duration // offset from t0 of the returned time
}

func runSteps(t *testing.T, l Limiter, steps []step) {
	t.Helper()
	l.Reserve(t0, 0) // align windows and ticks to t0
	for i, s := range steps {
		now := t0.Add(s.at)
		if s.rate != 0 {
			r := s.rate
			if r < 0 {
				r = 0
			}
			l.SetRate(now, r)
			continue
		}
		var got time.Time
		if s.peek {
			got = l.Next(now, s.n)
		} else {
			got = l.Reserve(now, s.n)
		}
		if want := t0.Add(s.want); !got.Equal(want) {
			t.Fatalf("step %d (%+v): got %v, want %v", i, s, got.Sub(t0), s.want)
		}
	}
}

// TestSteps drives each algorithm through sequences of calls.
func TestSteps(t *testing.T) {
	s := time.Second
	tests := []struct {
		name  string
		l     Limiter // a fresh limiter per case
		steps []step
	}{
		// LeakyBucket: 1e6 units/s with 1 ms ticks: 1000 units per tick.
		{"leaky/ticks", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 600, want: 0},
			{at: 0, n: 600, want: 0},      // first unit leaks at 0.6 ms: tick 0
			{at: 0, n: 600, want: 1 * ms}, // first unit at 1.2 ms
			{at: 0, n: 600, want: 1 * ms}, // 1.8 ms
			{at: 0, n: 600, peek: true, want: 2 * ms},
			{at: 0, n: 1, peek: true, want: 2 * ms}, // does not depend on n
			{at: 0, n: 600, want: 2 * ms},           // 2.4 ms
			{at: 1500 * time.Microsecond, n: 100, want: 3 * ms},
		}},
		{"leaky/idle earns nothing", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 1000, want: 0},
			{at: 10 * ms, n: 500, want: 10 * ms},
			{at: 10200 * time.Microsecond, n: 100, want: 10200 * time.Microsecond}, // cursor 10.5 ms, same tick
			{at: 10200 * time.Microsecond, n: 500, want: 10200 * time.Microsecond}, // cursor 10.6 ms
			{at: 10200 * time.Microsecond, n: 1, want: 11 * ms},                    // cursor 11.1 ms
		}},
		{"leaky/late within a tick", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 500, want: 0}, // cursor 0.5 ms
			{at: 900 * time.Microsecond, n: 500, want: 900 * time.Microsecond}, // leaks from 0.5 ms, not 0.9: cursor 1 ms
			{at: 900 * time.Microsecond, n: 900, want: 1 * ms},                 // cursor 1.9 ms
			{at: 900 * time.Microsecond, n: 1, peek: true, want: 1 * ms},
		}},
		{"leaky/late across a tick edge", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 500, want: 0}, // cursor 0.5 ms
			// Back 0.9 ms after the last unit, in tick 1: late, so the
			// units of tick 0 it missed pass too.
			{at: 1400 * time.Microsecond, n: 500, want: 1400 * time.Microsecond}, // cursor 1 ms
			{at: 1400 * time.Microsecond, n: 600, want: 1400 * time.Microsecond}, // cursor 1.6 ms
			{at: 1400 * time.Microsecond, n: 500, want: 1400 * time.Microsecond}, // 1600 units in tick 1; cursor 2.1 ms
			{at: 1400 * time.Microsecond, n: 1, want: 2 * ms},
		}},
		{"leaky/idle for more than a tick", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 500, want: 0}, // cursor 0.5 ms
			// Back 1.1 ms after the last unit: new, leaks from the start
			// of tick 1; tick 0 is lost.
			{at: 1600 * time.Microsecond, n: 500, want: 1600 * time.Microsecond}, // cursor 1.5 ms
			{at: 1600 * time.Microsecond, n: 500, want: 1600 * time.Microsecond}, // cursor 2 ms
			{at: 1600 * time.Microsecond, n: 1, want: 2 * ms},
		}},
		{"leaky/after a pause at most one tick at once", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 1000, want: 0},
			{at: 10900 * time.Microsecond, n: 800, want: 10900 * time.Microsecond}, // leaks from 10 ms
			{at: 10900 * time.Microsecond, n: 300, want: 10900 * time.Microsecond}, // 10.8 ms: overdraft into tick 11
			{at: 10900 * time.Microsecond, n: 1, want: 11 * ms},                    // cursor 11.1 ms
			{at: 10900 * time.Microsecond, n: 1, peek: true, want: 11 * ms},
		}},
		{"leaky/oversize", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 5000, want: 0}, // leaks until 5 ms
			{at: 0, n: 1, want: 5 * ms},
			{at: 0, n: 0, peek: true, want: 5 * ms},
		}},
		{"leaky/set rate carries the backlog", NewLeakyBucket(1_000_000, ms), []step{
			{at: 0, n: 4000, want: 0}, // backlog until 4 ms
			{at: 0, n: 1, peek: true, want: 4 * ms},
			{at: 0, rate: 2_000_000},
			{at: 0, n: 1, peek: true, want: 2 * ms},
			{at: 1 * ms, rate: 1_000_000}, // 2000 units left at 1 ms
			{at: 1 * ms, n: 1, peek: true, want: 3 * ms},
			{at: 1 * ms, rate: -1}, // unlimited forgets
			{at: 1 * ms, n: 1 << 30, want: 1 * ms},
			{at: 1 * ms, rate: 1_000_000},
			{at: 1 * ms, n: 1, want: 1 * ms},
		}},
		// FixedWindow: 1000 units/s with 1 s windows: 1000 units per window.
		{"window/fill", NewFixedWindow(1000, s), []step{
			{at: 0, n: 600, want: 0},
			{at: 0, n: 400, want: 0}, // exactly full
			{at: 0, n: 1, want: s},
			{at: s / 2, n: 999, want: s}, // fits the rest of window 1
			{at: s / 2, n: 1, want: 2 * s},
		}},
		{"window/remainder lost", NewFixedWindow(1000, s), []step{
			{at: 300 * ms, n: 800, want: 300 * ms},
			{at: 300 * ms, n: 300, peek: true, want: s},
			{at: 300 * ms, n: 300, want: s},
			{at: 300 * ms, n: 700, want: s},
			{at: 300 * ms, n: 1, want: 2 * s},
		}},
		{"window/oversize takes whole windows", NewFixedWindow(1000, s), []step{
			{at: 10 * s, n: 2500, want: 10 * s},
			{at: 10 * s, n: 1, want: 12 * s}, // window 12 half used
			{at: 10 * s, n: 600, want: 13 * s},
		}},
		{"window/mid-window fresh allowance", NewFixedWindow(1000, s), []step{
			{at: 20*s + 900*ms, n: 1000, want: 20*s + 900*ms},
			{at: 21 * s, n: 1000, want: 21 * s},
		}},
		{"window/set rate", NewFixedWindow(1000, s), []step{
			{at: 0, n: 1000, want: 0},
			{at: 0, n: 1, peek: true, want: s},
			{at: 0, rate: 2000}, // 1000 counted of 2000
			{at: 0, n: 1000, want: 0},
			{at: 0, n: 1, want: s},
		}},
		// TokenBucket: 1000 units/s, burst 500.
		{"token/burst then pace", NewTokenBucket(1000, 500), []step{
			{at: 0, n: 500, want: 0},
			{at: 0, n: 100, want: 100 * ms},
			{at: 0, n: 100, want: 200 * ms},
			{at: 0, n: 100, peek: true, want: 300 * ms},
			{at: 250 * ms, n: 100, want: 300 * ms},
		}},
		{"token/refill", NewTokenBucket(1000, 500), []step{
			{at: 0, n: 500, want: 0},
			{at: 10 * s, n: 300, want: 10 * s},
			{at: 10 * s, n: 300, want: 10*s + 100*ms},
		}},
		{"token/oversize goes into debt", NewTokenBucket(1000, 500), []step{
			{at: 0, n: 2000, want: 0}, // full bucket: passes, owes 1500
			{at: 0, n: 1, want: 1501 * ms},
		}},
		{"token/set rate carries the debt", NewTokenBucket(1000, 500), []step{
			{at: 0, n: 1500, want: 0}, // 1000 in debt: full again at 1.5 s
			{at: 0, n: 500, peek: true, want: 1500 * ms},
			{at: 0, rate: 2000}, // 1500 tokens missing, at 2000/s: 0.75 s
			{at: 0, n: 500, peek: true, want: 750 * ms},
		}},
		{"token/no burst paces", NewTokenBucket(1000, 0), []step{
			{at: 0, n: 100, want: 0},
			{at: 0, n: 100, want: 100 * ms},
			{at: 0, n: 300, want: 200 * ms},
			{at: 0, n: 1, want: 500 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.l, tt.steps) })
	}
}

func TestUnlimited(t *testing.T) {
	var lb LeakyBucket
	var fw FixedWindow
	var tb TokenBucket
	tests := []struct {
		name string
		l    Limiter
	}{
		{"zero leaky", &lb},
		{"zero window", &fw},
		{"zero token", &tb},
		{"rate 0 leaky", NewLeakyBucket(0, 0)},
		{"rate 0 window", NewFixedWindow(0, 0)},
		{"rate 0 token", NewTokenBucket(0, 0)},
		{"negative", NewLeakyBucket(-5, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 100 {
				now := t0.Add(time.Duration(i) * time.Microsecond)
				if got := tt.l.Reserve(now, 1<<40); !got.Equal(now) {
					t.Fatalf("Reserve = %v, want now", got.Sub(t0))
				}
			}
		})
	}
}

// TestFixedWindowBoundaryProblem shows the documented property: a stream
// that spends one window's allowance just before the edge and the next
// one's just after it passes twice the limit within an interval far
// shorter than the window. A token bucket with the same rate and a burst
// of one window's allowance does not.
func TestFixedWindowBoundaryProblem(t *testing.T) {
	const rate, limit = 1000, 1000 // per 1 s window
	fw := NewFixedWindow(rate, time.Second)
	tb := NewTokenBucket(rate, limit)
	fw.Reserve(t0, 0) // align windows to t0
	tb.Reserve(t0, 0)

	before, after := t0.Add(999*ms), t0.Add(1000*ms)
	passed := 0
	for _, now := range []time.Time{before, after} {
		if at := fw.Reserve(now, limit); at.Equal(now) {
			passed += limit
		}
	}
	if passed != 2*limit {
		t.Fatalf("fixed window passed %d units across the edge, want %d (2x the limit)", passed, 2*limit)
	}

	if at := tb.Reserve(before, limit); !at.Equal(before) {
		t.Fatalf("token bucket delayed its first burst to %v", at.Sub(t0))
	}
	if at := tb.Reserve(after, limit); !at.Equal(before.Add(time.Second)) {
		t.Fatalf("token bucket second burst at %v, want %v", at.Sub(t0), before.Add(time.Second).Sub(t0))
	}
}

// greedy drives l with a backlogged stream of chunk-unit reservations
// from t0 for d and returns the pass times.
func greedy(l Limiter, chunk int, d time.Duration) []time.Time {
	var out []time.Time
	now := t0
	for now.Before(t0.Add(d)) {
		if at := l.Next(now, chunk); at.After(now) {
			now = at
			continue
		}
		if at := l.Reserve(now, chunk); !at.Equal(now) {
			panic(fmt.Sprintf("Next said now, Reserve said %v", at.Sub(now)))
		}
		out = append(out, now)
	}
	return out
}

// TestBounds checks each limiter's documented burst bound on a
// backlogged stream: the most units passed in any interval of length T.
func TestBounds(t *testing.T) {
	const rate, chunk = 256_000_000, 32 << 10
	const horizon = 200 * ms
	tests := []struct {
		name string
		l    Limiter
		win  time.Duration
		max  func(T time.Duration) int64 // bound on units in [a, a+T)
		min  int64                       // units passed over the horizon
	}{
		{
			name: "leaky 1ms", l: NewLeakyBucket(rate, ms), win: ms,
			max: func(T time.Duration) int64 { return rate*int64(T+ms)/int64(time.Second) + chunk },
			min: rate*int64(horizon)/int64(time.Second) - rate/1000,
		},
		{
			name: "token burst 256k", l: NewTokenBucket(rate, 256_000), win: ms,
			max: func(T time.Duration) int64 { return 256_000 + rate*int64(T)/int64(time.Second) + chunk },
			min: rate * int64(horizon) / int64(time.Second),
		},
		{
			name: "window 1ms", l: NewFixedWindow(rate, ms), win: ms,
			max: func(T time.Duration) int64 { return 2 * rate * int64(T) / int64(time.Second) },
			// 256000/32768 = 7 whole chunks per window: the remainder is lost.
			min: 7 * chunk * int64(horizon/ms),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			passed := greedy(tt.l, chunk, horizon)
			if got := int64(len(passed)) * chunk; got < tt.min {
				t.Errorf("passed %d units over %v, want at least %d", got, horizon, tt.min)
			}
			for _, T := range []time.Duration{tt.win, 10 * tt.win, 100 * tt.win} {
				var most int64
				j := 0
				for i := range passed {
					for passed[j].Add(T).Compare(passed[i]) <= 0 {
						j++
					}
					most = max(most, int64(i-j+1)*chunk)
				}
				if most > tt.max(T) {
					t.Errorf("%d units within %v, bound %d", most, T, tt.max(T))
				}
			}
		})
	}
}

// TestLeakyBucketPerTick checks the per-tick promise: each 1 ms tick
// passes at most rate/1000 units plus the overdraft of one reservation.
func TestLeakyBucketPerTick(t *testing.T) {
	const rate, chunk = 256_000_000, 32 << 10
	lb := NewLeakyBucket(rate, ms)
	lb.Reserve(t0, 0)
	perTick := map[int64]int64{}
	for _, at := range greedy(lb, chunk, 100*ms) {
		perTick[int64(at.Sub(t0)/ms)] += chunk
	}
	for tick, n := range perTick {
		if n > rate/1000+chunk {
			t.Errorf("tick %d passed %d units, bound %d", tick, n, rate/1000+chunk)
		}
	}
}

// TestLeakyBucketIdleStream checks the bounds for a stream that pauses
// and resumes at random, reservations of random size passing whenever
// the bucket lets them: per tick at most 2*rate*g plus the tick's last
// reservation (the tick's own allowance and what a late stream missed in
// the tick before), and in any interval of length T at most rate*(T+2g)
// plus one reservation.
func TestLeakyBucketIdleStream(t *testing.T) {
	const rate, g, maxN = 1_000_000, ms, 3000 // 1000 units per tick
	r := rand.New(rand.NewPCG(3, 4))
	lb := NewLeakyBucket(rate, g)
	lb.Reserve(t0, 0)
	type pass struct {
		at time.Time
		n  int64
	}
	var passed []pass
	now := t0
	for range 20000 {
		if r.IntN(3) == 0 {
			now = now.Add(time.Duration(r.Int64N(int64(3 * ms))))
		}
		n := 1 + r.IntN(maxN)
		at := lb.Reserve(now, n)
		if at.Before(now) {
			t.Fatalf("reservation passes at %v, before it was made at %v", at.Sub(t0), now.Sub(t0))
		}
		now = at
		passed = append(passed, pass{at, int64(n)})
	}
	perTick := map[int64]int64{}
	last := map[int64]int64{}
	for _, p := range passed {
		k := int64(p.at.Sub(t0) / g)
		perTick[k] += p.n
		last[k] = p.n
	}
	perG := rate * int64(g) / int64(time.Second)
	for k, n := range perTick {
		if bound := 2*perG + last[k]; n > bound {
			t.Errorf("tick %d passed %d units, bound %d", k, n, bound)
		}
	}
	for _, T := range []time.Duration{g / 2, g, 3 * g, 50 * g} {
		bound := rate*int64(T+2*g)/int64(time.Second) + maxN
		var sum int64
		j := 0
		for i := range passed {
			sum += passed[i].n
			for !passed[j].at.Add(T).After(passed[i].at) {
				sum -= passed[j].n
				j++
			}
			if sum > bound {
				t.Fatalf("%d units within %v ending at %v, bound %d", sum, T, passed[i].at.Sub(t0), bound)
			}
		}
	}
}

// TestLeakyBucketLateCaller: a caller that, like a pump woken by a real
// timer, comes back up to most of a tick after each release, and spends
// some time between two reservations, still gets the rate.
func TestLeakyBucketLateCaller(t *testing.T) {
	const chunk = 32 << 10
	tests := []struct {
		name string
		rate int64
		late time.Duration // most a wake-up is late; uniform in [0, late)
		work time.Duration // between a pass and the next reservation
	}{
		{"256MB/s, timers up to 0.9 ms late", 256_000_000, 900 * time.Microsecond, 20 * time.Microsecond},
		{"20MB/s, timers up to 0.9 ms late", 20_000_000, 900 * time.Microsecond, 100 * time.Microsecond},
		{"20MB/s, slow caller", 20_000_000, 500 * time.Microsecond, 1500 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			lb := NewLeakyBucket(tt.rate, ms)
			lb.Reserve(t0, 0)
			now := t0
			end := t0.Add(time.Second)
			var units int64
			for now.Before(end) {
				at := lb.Reserve(now, chunk)
				if at.After(now) {
					now = at.Add(time.Duration(r.Int64N(int64(tt.late))))
				}
				units += chunk
				now = now.Add(tt.work)
			}
			got := float64(units) / now.Sub(t0).Seconds()
			if got < 0.99*float64(tt.rate) || got > 1.01*float64(tt.rate)+chunk {
				t.Errorf("caller got %.0f units/s, rate %d", got, tt.rate)
			}
		})
	}
}

func TestTimesKeepMonotonicReading(t *testing.T) {
	now := time.Now() // carries a monotonic reading
	lb := NewLeakyBucket(1000, ms)
	lb.Reserve(now, 1000)
	at := lb.Reserve(now, 1)
	if got := at.Sub(now); got != time.Second {
		t.Fatalf("second reservation %v after now, want 1s", got)
	}
}

func benchLimiter(b *testing.B, l Limiter) {
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		at := l.Reserve(now, 1500)
		if at.After(now) {
			now = at
		}
	}
}

func BenchmarkReserve(b *testing.B) {
	b.Run("leaky", func(b *testing.B) { benchLimiter(b, NewLeakyBucket(256_000_000, ms)) })
	b.Run("window", func(b *testing.B) { benchLimiter(b, NewFixedWindow(256_000_000, ms)) })
	b.Run("token", func(b *testing.B) { benchLimiter(b, NewTokenBucket(256_000_000, 256_000)) })
	b.Run("unlimited", func(b *testing.B) { benchLimiter(b, NewLeakyBucket(0, 0)) })
}

func BenchmarkNext(b *testing.B) {
	b.ReportAllocs()
	lb := NewLeakyBucket(256_000_000, ms)
	now := t0
	lb.Reserve(now, 1<<20)
	for b.Loop() {
		_ = lb.Next(now, 1500)
	}
}

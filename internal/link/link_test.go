package link

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

type result struct {
	dep time.Time
	err error
}

// sendAsync starts f.Send in a goroutine and returns where its result
// arrives.
func sendAsync(ctx context.Context, f *Flow, n int, c Class) <-chan result {
	ch := make(chan result, 1)
	go func() {
		dep, err := f.Send(ctx, n, c)
		ch <- result{dep, err}
	}()
	return ch
}

// waitFor polls cond (in real time) until it holds; it only synchronizes
// with goroutines, it asserts nothing about time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, cond)
}

func waiting(l *Link, d Direction, c Class) int64 {
	st := l.Stats()
	return st.Directions[d].Classes[c].Waiting
}

func mustSend(t *testing.T, f *Flow, n int, c Class, want time.Time) {
	t.Helper()
	dep, err := f.Send(context.Background(), n, c)
	if err != nil || !dep.Equal(want) {
		t.Fatalf("Send = %v, %v; want %v", dep.Sub(t0), err, want.Sub(t0))
	}
}

func expect(t *testing.T, ch <-chan result, want time.Time, wantErr error) {
	t.Helper()
	r := <-ch
	if !errors.Is(r.err, wantErr) || (wantErr == nil && !r.dep.Equal(want)) {
		t.Fatalf("Send = %v, %v; want %v, %v", r.dep.Sub(t0), r.err, want.Sub(t0), wantErr)
	}
}

func TestUnlimitedFastPath(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("lan", Config{NetworkControl: true}, clk)
	defer l.Close()
	f := l.Flow(Up, "app")
	ctx := context.Background()
	for _, c := range []Class{High, Normal, Low} { // Low without a bandwidth limit too
		mustSend(t, f, 32*kib, c, t0)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := f.Send(ctx, 1500, Normal); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Send", allocs)
	}
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers armed", n)
	}
	d := l.dirs[Up]
	d.mu.Lock()
	running := d.running
	d.mu.Unlock()
	if running {
		t.Error("scheduler goroutine started on an unlimited link")
	}
	st := l.Stats().Directions[Up]
	if got := st.Classes[Normal].Bytes; got != 32*kib+1001*1500 {
		t.Errorf("normal bytes = %d", got)
	}
	if got := st.Classes[Normal].Delay.Counts[0]; got != 1002 {
		t.Errorf("zero-delay count = %d", got)
	}
	mustSend(t, l.Flow(Up, "batch"), 5*kib, Low, t0)
	st = l.Stats().Directions[Up]
	for _, c := range []Class{High, Normal, Low} {
		if got, want := l.ClassBytes(Up, c), st.Classes[c].Bytes; got != want {
			t.Errorf("ClassBytes(Up, %v) = %d, Stats says %d", c, got, want)
		}
	}
	if got := l.ClassBytes(Down, Low); got != 0 {
		t.Errorf("ClassBytes(Down, Low) = %d on a direction that sent nothing", got)
	}
}

func TestSendWaitsForSpace(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("wan", Config{Capacity: 1_000_000, QueueSize: 1000}, clk)
	defer l.Close()
	a, b := l.Flow(Up, "app"), l.Flow(Up, "etl")
	down := l.Flow(Down, "app")
	mustSend(t, a, 1000, Normal, t0.Add(ms))
	mustSend(t, down, 1000, Normal, t0.Add(ms)) // directions are independent

	ch := sendAsync(context.Background(), b, 1000, Low)
	clk.BlockUntil(1)
	if next, _ := clk.Next(); !next.Equal(t0.Add(ms)) {
		t.Fatalf("scheduler sleeps until %v, want 1ms", next.Sub(t0))
	}
	waitFor(t, "b waiting", func() bool { return waiting(l, Up, Low) == 1000 })
	st := l.Stats().Directions[Up]
	if st.Queue[Normal] != 1000 || st.QueueBytes() != 1000 {
		t.Errorf("queue = %v", st.Queue)
	}
	clk.Advance(ms)
	expect(t, ch, t0.Add(2*ms), nil)

	st = l.Stats().Directions[Up]
	if st.Queue[Low] != 1000 || st.Queue[Normal] != 0 {
		t.Errorf("queue at 1ms = %v", st.Queue)
	}
	if len(st.Pools) != 2 || st.Pools[0].Pool != "app" || st.Pools[1].Pool != "etl" {
		t.Fatalf("pools = %+v", st.Pools)
	}
	etl := st.Pools[1].Classes[Low]
	if etl.Bytes != 1000 || etl.Waiting != 0 || etl.Delay.Count() != 1 || etl.Delay.Sum != 2*ms {
		t.Errorf("etl low = %+v", etl)
	}
	if etl.Delay.Counts[5] != 1 || DelayBound(5) != 2500*us { // 2ms: bucket (1ms, 2.5ms]
		t.Errorf("etl delay buckets = %v", etl.Delay.Counts)
	}
	if app := st.Pools[0].Classes[Normal]; app.Delay.Counts[4] != 1 || app.Delay.Mean() != ms {
		t.Errorf("app delay = %+v", app.Delay)
	}
}

func TestSendContextCancel(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("wan", Config{Capacity: 1_000_000, QueueSize: 1000, NetworkControl: true}, clk)
	defer l.Close()
	a, b, c := l.Flow(Up, "app"), l.Flow(Up, "app"), l.Flow(Up, "app")
	mustSend(t, a, 1000, Normal, t0.Add(ms))

	ctx, cancel := context.WithCancel(context.Background())
	chB := sendAsync(ctx, b, 1000, Normal)
	waitFor(t, "b waiting", func() bool { return waiting(l, Up, Normal) == 1000 })
	cancel()
	expect(t, chB, time.Time{}, context.Canceled)
	if w := waiting(l, Up, Normal); w != 0 {
		t.Fatalf("%d bytes still waiting", w)
	}

	// b's bytes were not admitted: c gets the space at 1 ms.
	chC := sendAsync(context.Background(), c, 1000, Normal)
	waitFor(t, "c waiting", func() bool { return waiting(l, Up, Normal) == 1000 })
	clk.Advance(ms)
	expect(t, chC, t0.Add(2*ms), nil)

	// b is usable again after its cancelled Send.
	ch := sendAsync(context.Background(), b, 10, Normal)
	waitFor(t, "b waiting", func() bool { return waiting(l, Up, Normal) == 10 })
	clk.Advance(ms)
	expect(t, ch, t0.Add(2*ms+10*us), nil)
	if st := l.Stats().Directions[Up].Classes[Normal]; st.Bytes != 2010 {
		t.Errorf("bytes = %d, want 2010", st.Bytes)
	}
}

func TestConfigureWakesWaitingFlows(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("wan", Config{NetworkControl: true, LowPriorityBandwidth: 1000}, clk)
	defer l.Close()
	a, b := l.Flow(Down, "etl"), l.Flow(Down, "etl")
	mustSend(t, a, 1000, Low, t0) // the bucket leaks it until 1 s
	mustSend(t, a, 5000, Normal, t0)
	ch := sendAsync(context.Background(), b, 1000, Low)
	clk.BlockUntil(1)
	if next, _ := clk.Next(); !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("scheduler sleeps until %v, want 1s", next.Sub(t0))
	}
	clk.Advance(500 * ms)
	cfg := l.Config()
	cfg.LowPriorityBandwidth = 1_000_000
	l.Configure(cfg)
	expect(t, ch, t0.Add(500*ms), nil)
	if got := l.Config().LowPriorityBandwidth; got != 1_000_000 {
		t.Errorf("Config().LowPriorityBandwidth = %d", got)
	}

	// Switching the limit off turns Low back into the unlimited path.
	cfg.LowPriorityBandwidth = 0
	l.Configure(cfg)
	mustSend(t, b, 1<<20, Low, t0.Add(500*ms))
}

func TestCloseWakesWaitingSends(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("wan", Config{Capacity: 1_000_000, QueueSize: 1000}, clk)
	a, b, c := l.Flow(Up, "app"), l.Flow(Up, "app"), l.Flow(Down, "app")
	mustSend(t, a, 1000, Normal, t0.Add(ms))
	mustSend(t, c, 1000, Normal, t0.Add(ms))

	chB := sendAsync(context.Background(), b, 1000, Normal)
	waitFor(t, "b waiting", func() bool { return waiting(l, Up, Normal) == 1000 })
	b.Close()
	b.Close()
	expect(t, chB, time.Time{}, ErrClosed)
	if _, err := b.Send(context.Background(), 1, Normal); !errors.Is(err, ErrClosed) {
		t.Errorf("Send on closed flow: %v", err)
	}

	chA := sendAsync(context.Background(), a, 1000, Normal)
	chC := sendAsync(context.Background(), c, 1000, Normal)
	waitFor(t, "a and c waiting", func() bool { return waiting(l, Up, Normal) == 1000 && waiting(l, Down, Normal) == 1000 })
	l.Close()
	l.Close()
	expect(t, chA, time.Time{}, ErrClosed)
	expect(t, chC, time.Time{}, ErrClosed)
	if _, err := l.Flow(Up, "x").Send(context.Background(), 1, Normal); !errors.Is(err, ErrClosed) {
		t.Errorf("Send on closed link: %v", err)
	}
}

func TestConcurrentSendRejected(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("wan", Config{Capacity: 1_000_000, QueueSize: 1000}, clk)
	defer l.Close()
	a := l.Flow(Up, "app")
	mustSend(t, a, 1000, Normal, t0.Add(ms))
	ch := sendAsync(context.Background(), a, 1000, Low)
	waitFor(t, "a waiting", func() bool { return waiting(l, Up, Low) == 1000 })
	if _, err := a.Send(context.Background(), 1, High); !errors.Is(err, ErrConcurrentSend) {
		t.Fatalf("second Send: %v", err)
	}
	clk.Advance(ms)
	expect(t, ch, t0.Add(2*ms), nil)
}

func TestDeparturesNeverDecrease(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("wan", Config{Capacity: 1_000_000}, clk)
	defer l.Close()
	f := l.Flow(Up, "app")
	mustSend(t, f, 5000, Normal, t0.Add(5*ms))
	l.Configure(Config{}) // unlimited while the 5000 bytes are queued
	mustSend(t, f, 10, High, t0.Add(5*ms))
	clk.Advance(6 * ms)
	mustSend(t, f, 10, Low, t0.Add(6*ms))
}

func TestSendArguments(t *testing.T) {
	l := New("lan", Config{}, clock.NewFake(t0))
	defer l.Close()
	f := l.Flow(Down, "app")
	if _, err := f.Send(context.Background(), 1, Class(7)); !errors.Is(err, ErrInvalidClass) {
		t.Errorf("invalid class: %v", err)
	}
	mustSend(t, f, 0, Normal, t0)
	mustSend(t, f, -1, Low, t0)
	if f.Pool() != "app" || f.Direction() != Down || l.Name() != "lan" {
		t.Errorf("flow %s %v on %s", f.Pool(), f.Direction(), l.Name())
	}
	defer func() {
		if recover() == nil {
			t.Error("Flow(Direction(2)) did not panic")
		}
	}()
	l.Flow(Direction(2), "app")
}

// TestConcurrentFlows runs many flows on one link in virtual time while
// the configuration changes under them: every byte gets through, each
// flow's departures never decrease, and the counters add up.
func TestConcurrentFlows(t *testing.T) {
	// In a bubble, so the driver below waits for the flows to block
	// instead of polling them.
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(t0)
		cfgs := []Config{
			{Capacity: 50_000_000, QueueSize: 256 * kib, NetworkControl: true, LowPriorityBandwidth: 20_000_000, Weights: map[string]int{"a": 3}},
			{Capacity: 50_000_000, QueueSize: 256 * kib},
			{Capacity: 80_000_000, NetworkControl: true, LowPriorityQueueBytes: 16 * kib},
			{NetworkControl: true, LowPriorityBandwidth: 30_000_000},
		}
		l := New("wan", cfgs[0], clk)
		defer l.Close()
		const flows, chunks = 24, 60
		var wg sync.WaitGroup
		var mu sync.Mutex
		var total int64
		errs := make(chan error, flows)
		for i := range flows {
			f := l.Flow(Direction(i%2), []string{"a", "b", "c"}[i%3])
			r := rand.New(rand.NewPCG(uint64(i), 9))
			wg.Add(1)
			go func() {
				defer wg.Done()
				var last time.Time
				var sent int64
				for range chunks {
					n := 1 + r.IntN(48*kib)
					dep, err := f.Send(context.Background(), n, byPriority[r.IntN(3)])
					if err != nil {
						errs <- err
						return
					}
					if dep.Before(last) {
						errs <- fmt.Errorf("departure went back from %v to %v", last.Sub(t0), dep.Sub(t0))
						return
					}
					last = dep
					sent += int64(n)
				}
				mu.Lock()
				total += sent
				mu.Unlock()
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		steps := 0
		for {
			select {
			case <-done:
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				var counted int64
				st := l.Stats()
				for _, d := range st.Directions {
					for _, c := range d.Classes {
						counted += c.Bytes
						if c.Waiting != 0 {
							t.Errorf("%d bytes still waiting", c.Waiting)
						}
					}
				}
				if counted != total {
					t.Errorf("counted %d bytes, sent %d", counted, total)
				}
				return
			default:
			}
			if next, ok := clk.Next(); ok {
				clk.Set(next)
				if steps++; steps%50 == 0 {
					l.Configure(cfgs[(steps/50)%len(cfgs)])
				}
				continue
			}
			// No timer is armed: once every goroutine is blocked again,
			// either the flows are done or there is a timer, else nothing
			// can move.
			synctest.Wait()
			if _, ok := clk.Next(); !ok && !isClosed(done) {
				t.Fatalf("no progress: %+v", l.Stats())
			}
		}
	})
}

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestTrySend(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		class Class
		ok    bool
	}{
		{"unlimited", Config{}, Normal, true},
		{"unlimited low, no low limit", Config{NetworkControl: true}, Low, true},
		{"low under a low limit", Config{NetworkControl: true, LowPriorityBandwidth: 1_000_000}, Low, false},
		{"high under a low limit", Config{NetworkControl: true, LowPriorityBandwidth: 1_000_000}, High, true},
		{"capacity", Config{Capacity: 1_000_000, QueueSize: 1000}, Normal, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			l := New("l", tt.cfg, clk)
			defer l.Close()
			f := l.Flow(Up, "app")
			dep, ok, err := f.TrySend(1500, tt.class)
			if err != nil || ok != tt.ok {
				t.Fatalf("TrySend = %v, %v, %v; want ok %v", dep, ok, err, tt.ok)
			}
			var want int64
			if tt.ok {
				want = 1500
				if !dep.Equal(t0) {
					t.Errorf("depart %v, want now", dep.Sub(t0))
				}
			}
			if got := l.Stats().Directions[Up].Classes[tt.class].Bytes; got != want {
				t.Errorf("bytes counted = %d, want %d", got, want)
			}
			if n := clk.Pending(); n != 0 {
				t.Errorf("%d timers armed", n)
			}
		})
	}
	l := New("l", Config{}, clock.NewFake(t0))
	f := l.Flow(Up, "app")
	l.Close()
	if _, _, err := f.TrySend(1, Normal); !errors.Is(err, ErrClosed) {
		t.Errorf("TrySend on a closed link: %v", err)
	}
}

// TestYields: Engage matters (Yields) only with network control, a
// capacity or a held rate (SetLowRate), and a yield under 100 %, and
// follows Configure and SetLowRate.
func TestYields(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want bool
	}{
		{Config{Capacity: 1e8, NetworkControl: true}, true},
		{Config{Capacity: 1e8, NetworkControl: true, LowYieldPercent: NoLowYield}, false},
		{Config{Capacity: 1e8}, false},
		{Config{NetworkControl: true}, false},
	} {
		l := New("y", Config{}, clock.NewFake(t0))
		if l.Yields() {
			t.Fatal("a zero link yields")
		}
		l.Configure(tt.cfg)
		if got := l.Yields(); got != tt.want {
			t.Errorf("%+v: Yields %v, want %v", tt.cfg, got, tt.want)
		}
		if got := New("y", tt.cfg, clock.NewFake(t0)).Yields(); got != tt.want {
			t.Errorf("New(%+v): Yields %v, want %v", tt.cfg, got, tt.want)
		}
		l.Close()
	}
	for _, tt := range []struct {
		cfg  Config
		want bool
	}{
		{Config{NetworkControl: true}, true},
		{Config{NetworkControl: true, LowYieldPercent: NoLowYield}, false},
		{Config{}, false},
	} {
		l := New("y", tt.cfg, clock.NewFake(t0))
		l.SetLowRate(Down, 1e6, 0)
		if got := l.Yields(); got != tt.want {
			t.Errorf("%+v with a held rate: Yields %v, want %v", tt.cfg, got, tt.want)
		}
		l.SetLowRate(Down, 0, 0)
		if l.Yields() {
			t.Errorf("%+v: yields after the hold was lifted", tt.cfg)
		}
		l.Close()
	}
}

// TestSetLowRate: a held rate limits the Low class of its direction
// alone, the lower of it and LowPriorityBandwidth applies, it outlasts
// Configure, and 0 releases it.
func TestSetLowRate(t *testing.T) {
	clk := clock.NewFake(t0)
	l := New("wan", Config{NetworkControl: true}, clk)
	defer l.Close()
	down, up := l.Flow(Down, "etl"), l.Flow(Up, "etl")
	l.SetLowRate(Down, 1000, 0)
	mustSend(t, down, 1000, Low, t0) // the bucket leaks it until 1 s
	mustSend(t, up, 1<<20, Low, t0)  // Up is not held
	ch := sendAsync(context.Background(), down, 1000, Low)
	clk.BlockUntil(1)
	if next, _ := clk.Next(); !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("scheduler sleeps until %v, want 1s", next.Sub(t0))
	}
	// A configured limit above the held rate does not lift it.
	l.Configure(Config{NetworkControl: true, LowPriorityBandwidth: 1_000_000})
	clk.Advance(500 * ms)
	select {
	case <-ch:
		t.Fatal("the held rate was lifted by Configure")
	default:
	}
	l.SetLowRate(Down, 0, 0)
	expect(t, ch, t0.Add(500*ms), nil)
	if got := l.Config().LowPriorityBandwidth; got != 1_000_000 {
		t.Errorf("Config().LowPriorityBandwidth = %d, want the configured 1e6", got)
	}
}

// TestHeldRateYieldBase: while a statement above Low runs, the Low class
// of a held direction yields to LowYieldPercent of the lower of the held
// rate and the path's rate given with it, so a hold probing above the
// path does not widen the yield.
func TestHeldRateYieldBase(t *testing.T) {
	const rate = 1_000_000
	for _, tt := range []struct {
		name string
		path int64
		base int64 // what the yield is a share of, bytes/s
	}{
		{"no path", 0, rate},
		{"path above the rate", 2 * rate, rate},
		{"path below the rate", rate / 4, rate / 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			l := New("wan", Config{NetworkControl: true}, clk)
			defer l.Close()
			l.SetLowRate(Down, rate, tt.path)
			l.Engage(t0, true)
			f := l.Flow(Down, "etl")
			yield := tt.base * DefaultLowYieldPercent / 100
			// Send a whole second of the yield at once, then time the next
			// byte: it leaves once the meter has let the first through,
			// whatever wakes the scheduler before.
			mustSend(t, f, int(yield), Low, t0)
			ch := sendAsync(context.Background(), f, 1, Low)
			var r result
			for done := false; !done; {
				if next, ok := clk.Next(); ok {
					clk.Set(next)
				}
				select {
				case r = <-ch:
					done = true
				case <-time.After(time.Millisecond): // real time: the scheduler's turn
				}
			}
			if got, want := r.dep.Sub(t0), time.Second; r.err != nil || got < want*9/10 || got > want*11/10 {
				t.Errorf("the next Low byte left at %v (%v), want about %v (yield %d B/s)", got, r.err, want, yield)
			}
		})
	}
}

package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
)

// op is what one step does.
type op uint8

const (
	opAcquire op = iota + 1 // start Acquire(req) as id
	opRelease               // release id's slot
	opCancel                // Waiter.Cancel of id with errTest
	opDemote                // Waiter.Demote of id
	opCtx                   // cancel id's context
	opAdvance               // advance the fake clock by d
	opLimits                // Configure(limits)
)

var errTest = errors.New("cancelled by the test")

// step is one row of a step table: an action, then what must hold once
// it is done.
type step struct {
	op     op
	id     string
	req    Request
	d      time.Duration
	limits Limits
	// ret is the want of Cancel's or Demote's result.
	ret bool
	// admitted are the ids whose Acquire returns a slot in this step;
	// failed those whose Acquire fails, with the error it must wrap.
	// Every other id started and not done must still be queued.
	admitted []string
	failed   map[string]error
	// stats, when set, are the pools' counters after the step.
	stats map[string]PoolStats
}

type result struct {
	slot *Slot
	err  error
}

// harness runs Acquire calls as goroutines and knows each one's waiter.
type harness struct {
	t       *testing.T
	c       *Controller
	clk     *clock.Fake
	results map[string]chan result
	waiters map[string]*Waiter
	cancels map[string]context.CancelFunc
	slots   map[string]*Slot
	done    map[string]result // returned before the step looked
	pending map[string]bool   // started, not returned
}

// wait returns id's result or fails after a deadlock guard.
func (h *harness) wait(id string) result {
	h.t.Helper()
	if r, ok := h.done[id]; ok {
		delete(h.done, id)
		return r
	}
	select {
	case r := <-h.results[id]:
		return r
	case <-time.After(10 * time.Second):
		h.t.Fatalf("%s: Acquire did not return", id)
	}
	return result{}
}

func (h *harness) acquire(id string, req Request) {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancels[id] = cancel
	res := make(chan result, 1)
	queued := make(chan *Waiter, 1)
	h.results[id] = res
	req.OnWait = func(w *Waiter) { queued <- w }
	go func() {
		s, err := h.c.Acquire(ctx, req)
		res <- result{s, err}
	}()
	h.pending[id] = true
	select {
	case w := <-queued:
		h.waiters[id] = w
	case r := <-res:
		h.done[id] = r
	case <-time.After(10 * time.Second):
		h.t.Fatalf("%s: Acquire neither waited nor returned", id)
	}
}

func (h *harness) run(steps []step) {
	t := h.t
	for i, s := range steps {
		where := fmt.Sprintf("step %d (op %d %s)", i, s.op, s.id)
		switch s.op {
		case opAcquire:
			h.acquire(s.id, s.req)
		case opRelease:
			h.slots[s.id].Release()
		case opCancel:
			if got := h.waiter(s.id).Cancel(errTest); got != s.ret {
				t.Errorf("%s: Cancel = %v, want %v", where, got, s.ret)
			}
		case opDemote:
			if got := h.waiter(s.id).Demote(); got != s.ret {
				t.Errorf("%s: Demote = %v, want %v", where, got, s.ret)
			}
		case opCtx:
			h.cancels[s.id]()
		case opAdvance:
			h.clk.Advance(s.d)
		case opLimits:
			h.c.Configure(s.limits)
		}
		for _, id := range s.admitted {
			r := h.wait(id)
			if r.err != nil || r.slot == nil {
				t.Fatalf("%s: %s: Acquire = %v, %v; want a slot", where, id, r.slot, r.err)
			}
			h.slots[id] = r.slot
			delete(h.pending, id)
		}
		for _, id := range slices.Sorted(maps.Keys(s.failed)) {
			r := h.wait(id)
			if !errors.Is(r.err, s.failed[id]) || r.slot != nil {
				t.Fatalf("%s: %s: Acquire = %v, %v; want an error wrapping %v", where, id, r.slot, r.err, s.failed[id])
			}
			delete(h.pending, id)
		}
		for id := range h.pending {
			if r, ok := h.done[id]; ok {
				t.Fatalf("%s: %s returned (%v, %v), want it queued", where, id, r.slot, r.err)
			}
			if st := h.state(id); st != queued {
				t.Fatalf("%s: %s is in state %d, want queued", where, id, st)
			}
		}
		for pool, want := range s.stats {
			if got := h.c.Pool(pool); got != want {
				t.Errorf("%s: Pool(%q) = %+v, want %+v", where, pool, got, want)
			}
		}
	}
}

func (h *harness) waiter(id string) *Waiter {
	h.t.Helper()
	w := h.waiters[id]
	if w == nil {
		h.t.Fatalf("%s never waited", id)
	}
	return w
}

func (h *harness) state(id string) waitState {
	w := h.waiter(id)
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return w.state
}

func newHarness(t *testing.T, l Limits) *harness {
	clk := clock.NewFake(time.Unix(1e9, 0))
	c := New(Options{Clock: clk})
	c.Configure(l)
	h := &harness{
		t: t, c: c, clk: clk,
		results: map[string]chan result{}, waiters: map[string]*Waiter{},
		cancels: map[string]context.CancelFunc{}, slots: map[string]*Slot{},
		done: map[string]result{}, pending: map[string]bool{},
	}
	t.Cleanup(func() {
		for _, c := range h.cancels {
			c()
		}
		for id := range h.pending {
			if r := h.wait(id); r.slot != nil {
				r.slot.Release()
			}
		}
	})
	return h
}

func pool(name string) Request { return Request{Pool: name} }

func TestController(t *testing.T) {
	p1 := Limits{Pools: map[string]int{"p": 1}}
	tests := []struct {
		name   string
		limits Limits
		steps  []step
	}{
		{
			name: "no limit admits at once", limits: Limits{},
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p"), admitted: []string{"b"}, stats: map[string]PoolStats{"p": {Running: 2}}},
				{op: opRelease, id: "a"},
				{op: opRelease, id: "b", stats: map[string]PoolStats{"p": {}}},
			},
		},
		{
			name: "FIFO under limit 1", limits: p1,
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p")},
				{op: opAcquire, id: "c", req: pool("p")},
				{op: opAcquire, id: "d", req: pool("p"), stats: map[string]PoolStats{"p": {Running: 1, Waiting: 3, Limit: 1}}},
				{op: opRelease, id: "a", admitted: []string{"b"}},
				{op: opRelease, id: "b", admitted: []string{"c"}},
				{op: opRelease, id: "c", admitted: []string{"d"}},
				{op: opRelease, id: "d", stats: map[string]PoolStats{"p": {Limit: 1}}},
			},
		},
		{
			name: "limit N", limits: Limits{Pools: map[string]int{"p": 3}},
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p"), admitted: []string{"b"}},
				{op: opAcquire, id: "c", req: pool("p"), admitted: []string{"c"}},
				{op: opAcquire, id: "d", req: pool("p")},
				{op: opAcquire, id: "e", req: pool("p"), stats: map[string]PoolStats{"p": {Running: 3, Waiting: 2, Limit: 3}}},
				{op: opRelease, id: "b", admitted: []string{"d"}},
				{op: opRelease, id: "b", stats: map[string]PoolStats{"p": {Running: 3, Waiting: 1, Limit: 3}}}, // twice frees nothing more
				{op: opRelease, id: "a", admitted: []string{"e"}},
			},
		},
		{
			name: "a full pool does not block another", limits: Limits{Pools: map[string]int{"p": 1, "q": 1}},
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p")},
				{op: opAcquire, id: "c", req: pool("q"), admitted: []string{"c"}},
				{op: opAcquire, id: "d", req: pool("r"), admitted: []string{"d"}},
				{op: opRelease, id: "c"},
				{op: opRelease, id: "a", admitted: []string{"b"}},
			},
		},
		{
			name: "cancel of a waiter frees nothing", limits: p1,
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p")},
				{op: opAcquire, id: "c", req: pool("p")},
				{op: opCancel, id: "b", ret: true, failed: map[string]error{"b": errTest}, stats: map[string]PoolStats{"p": {Running: 1, Waiting: 1, Limit: 1}}},
				{op: opCancel, id: "b", ret: false},
				{op: opRelease, id: "a", admitted: []string{"c"}},
				{op: opCancel, id: "c", ret: false, stats: map[string]PoolStats{"p": {Running: 1, Limit: 1}}}, // admitted keeps its slot
				{op: opRelease, id: "c", stats: map[string]PoolStats{"p": {Limit: 1}}},
			},
		},
		{
			name: "context cancel", limits: p1,
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p")},
				{op: opAcquire, id: "c", req: pool("p")},
				{op: opCtx, id: "b", failed: map[string]error{"b": context.Canceled}, stats: map[string]PoolStats{"p": {Running: 1, Waiting: 1, Limit: 1}}},
				{op: opRelease, id: "a", admitted: []string{"c"}},
				{op: opCtx, id: "c", stats: map[string]PoolStats{"p": {Running: 1, Limit: 1}}}, // after admission: nothing
			},
		},
		{
			name: "queue timeout", limits: p1,
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: Request{Pool: "p", Timeout: 2 * time.Second}},
				{op: opAcquire, id: "c", req: Request{Pool: "p", Timeout: 3 * time.Second}},
				{op: opAcquire, id: "d", req: pool("p")},
				{op: opAdvance, d: time.Second},
				{op: opAdvance, d: time.Second, failed: map[string]error{"b": ErrQueueTimeout}},
				{op: opRelease, id: "a", admitted: []string{"c"}},
				{op: opAdvance, d: time.Hour, stats: map[string]PoolStats{"p": {Running: 1, Waiting: 1, Limit: 1}}}, // admitted c is not timed out
				{op: opRelease, id: "c", admitted: []string{"d"}},
			},
		},
		{
			name: "class order across pools on a group", limits: Limits{Groups: map[string]int{"l": 1}},
			steps: []step{
				{op: opAcquire, id: "a", req: Request{Pool: "p", Group: "l"}, admitted: []string{"a"}},
				{op: opAcquire, id: "low", req: Request{Pool: "q", Group: "l", Class: link.Low}},
				{op: opAcquire, id: "normal", req: Request{Pool: "r", Group: "l"}},
				{op: opAcquire, id: "high", req: Request{Pool: "q", Group: "l", Class: link.High}},
				{op: opAcquire, id: "normal2", req: Request{Pool: "p", Group: "l"}},
				{op: opAcquire, id: "other", req: Request{Pool: "q", Group: "m"}, admitted: []string{"other"}},
				{op: opRelease, id: "a", admitted: []string{"high"}},
				{op: opRelease, id: "high", admitted: []string{"normal"}},
				{op: opRelease, id: "normal", admitted: []string{"normal2"}},
				{op: opRelease, id: "normal2", admitted: []string{"low"}},
			},
		},
		{
			name: "a demoted waiter goes after normal ones", limits: p1,
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p")},
				{op: opAcquire, id: "c", req: pool("p")},
				{op: opAcquire, id: "d", req: Request{Pool: "p", Class: link.Low}},
				{op: opAcquire, id: "e", req: Request{Pool: "p", Class: link.Low}},
				{op: opDemote, id: "b", ret: true},
				{op: opDemote, id: "b", ret: false},
				{op: opRelease, id: "a", admitted: []string{"c"}},
				{op: opRelease, id: "c", admitted: []string{"b"}}, // first low by arrival
				{op: opRelease, id: "b", admitted: []string{"d"}},
				{op: opRelease, id: "d", admitted: []string{"e"}},
				{op: opDemote, id: "e", ret: false},
			},
		},
		{
			name: "reconfigure", limits: p1,
			steps: []step{
				{op: opAcquire, id: "a", req: pool("p"), admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: pool("p")},
				{op: opAcquire, id: "c", req: pool("p")},
				{op: opAcquire, id: "d", req: pool("p")},
				{op: opAcquire, id: "e", req: pool("p")},
				{op: opLimits, limits: Limits{Pools: map[string]int{"p": 3}}, admitted: []string{"b", "c"}},
				{op: opLimits, limits: p1, stats: map[string]PoolStats{"p": {Running: 3, Waiting: 2, Limit: 1}}},
				{op: opRelease, id: "a"},
				{op: opRelease, id: "b"},
				{op: opRelease, id: "c", admitted: []string{"d"}},
				{op: opLimits, limits: Limits{}, admitted: []string{"e"}, stats: map[string]PoolStats{"p": {Running: 2}}},
			},
		},
		{
			name: "pool and group limits together", limits: Limits{Pools: map[string]int{"p": 2}, Groups: map[string]int{"l": 1}},
			steps: []step{
				{op: opAcquire, id: "a", req: Request{Pool: "p", Group: "l"}, admitted: []string{"a"}},
				{op: opAcquire, id: "b", req: Request{Pool: "p", Group: "l"}},                          // group full
				{op: opAcquire, id: "c", req: Request{Pool: "p", Group: "m"}, admitted: []string{"c"}}, // other group
				{op: opRelease, id: "a", admitted: []string{"b"}},
				{op: opAcquire, id: "d", req: Request{Pool: "p", Group: "m"}}, // pool full
				{op: opRelease, id: "b", admitted: []string{"d"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newHarness(t, tt.limits).run(tt.steps)
		})
	}
}

// TestConcurrentLimit runs many goroutines through a pool of limit 3 and
// a group of limit 2, cancelling some, and checks no more than the limits
// ever hold a slot and every counter returns to zero.
func TestConcurrentLimit(t *testing.T) {
	c := New(Options{})
	c.Configure(Limits{Pools: map[string]int{"p": 3}, Groups: map[string]int{"l": 2}})
	var inPool, inGroup, maxPool, maxGroup atomic.Int32
	bump := func(n, hi *atomic.Int32) {
		v := n.Add(1)
		for {
			m := hi.Load()
			if v <= m || hi.CompareAndSwap(m, v) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				req := Request{Pool: "p", Class: link.Class(j % 3)}
				if i%2 == 0 {
					req.Group = "l"
				}
				ctx, cancel := context.WithCancel(context.Background())
				if (i+j)%7 == 0 {
					req.OnWait = func(w *Waiter) {
						if j%2 == 0 {
							w.Cancel(nil)
						} else {
							cancel()
						}
					}
				}
				s, err := c.Acquire(ctx, req)
				cancel()
				if err != nil {
					if !errors.Is(err, ErrCancelled) && !errors.Is(err, context.Canceled) {
						t.Errorf("Acquire: %v", err)
					}
					continue
				}
				bump(&inPool, &maxPool)
				if req.Group != "" {
					bump(&inGroup, &maxGroup)
					inGroup.Add(-1)
				}
				inPool.Add(-1)
				s.Release()
				s.Release()
			}
		}()
	}
	wg.Wait()
	if maxPool.Load() > 3 || maxGroup.Load() > 2 {
		t.Errorf("max holders: pool %d (limit 3), group %d (limit 2)", maxPool.Load(), maxGroup.Load())
	}
	if got := c.Pool("p"); got != (PoolStats{Limit: 3}) {
		t.Errorf("Pool(p) = %+v after everyone released", got)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.groups) != 1 || len(c.pools) != 1 {
		t.Errorf("counters left: pools %d, groups %d; want the limited one of each", len(c.pools), len(c.groups))
	}
}

func TestAcquireDoneContext(t *testing.T) {
	c := New(Options{})
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("session closed")
	cancel(cause)
	if s, err := c.Acquire(ctx, pool("p")); !errors.Is(err, cause) || s != nil {
		t.Fatalf("Acquire on a done context = %v, %v; want the cause", s, err)
	}
	if got := c.Pool("p"); got != (PoolStats{}) {
		t.Errorf("Pool(p) = %+v, want nothing held", got)
	}
}

// BenchmarkUncontended is the common limited path: a slot is free.
func BenchmarkUncontended(b *testing.B) {
	c := New(Options{})
	c.Configure(Limits{Pools: map[string]int{"p": 1 << 20}})
	ctx := context.Background()
	req := pool("p")
	b.ReportAllocs()
	for b.Loop() {
		s, err := c.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
}

// BenchmarkUncontendedParallel takes and frees slots of one pool from
// every P.
func BenchmarkUncontendedParallel(b *testing.B) { benchParallel(b, 1<<20, 1) }

// BenchmarkContended passes one slot among 8 goroutines: every Acquire
// but the first of a burst waits.
func BenchmarkContended(b *testing.B) { benchParallel(b, 1, 8) }

// benchParallel takes and frees slots of one pool of slots slots from
// parallelism goroutines per P.
func benchParallel(b *testing.B, slots, parallelism int) {
	c := New(Options{})
	c.Configure(Limits{Pools: map[string]int{"p": slots}})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, err := c.Acquire(ctx, pool("p"))
			if err != nil {
				b.Error(err)
				return
			}
			s.Release()
		}
	})
}

func TestTryAcquire(t *testing.T) {
	c := New(Options{})
	c.Configure(Limits{Pools: map[string]int{"p": 1}, Groups: map[string]int{"l": 1}})
	s, ok := c.TryAcquire(Request{Pool: "p"})
	if !ok {
		t.Fatal("TryAcquire of a free pool failed")
	}
	if _, ok := c.TryAcquire(Request{Pool: "p"}); ok {
		t.Fatal("TryAcquire of a full pool succeeded")
	}
	g, ok := c.TryAcquire(Request{Pool: "q", Group: "l"})
	if !ok {
		t.Fatal("TryAcquire of a free group failed")
	}
	if _, ok := c.TryAcquire(Request{Pool: "r", Group: "l"}); ok {
		t.Fatal("TryAcquire of a full group succeeded")
	}
	s.Release()
	g.Release()
	if got := c.Pools(); len(got) != 1 || got["p"] != (PoolStats{Limit: 1}) {
		t.Errorf("Pools after release = %v", got)
	}
}

package budget

import (
	"fmt"
	"testing"
	"time"
)

// FuzzAllocator drives the allocator with random rounds: each byte of
// ops is one round of 500 ms for instances a..d, whose bits say which
// instances report a demand, which acknowledge their latest grant, and
// whether the wants are large or small. Whatever the order, the worst
// case of the rates the instances may be applying (the independent
// model of alloc_test.go) never exceeds the budget.
func FuzzAllocator(f *testing.F) {
	f.Add(int64(30), []byte{0x11, 0x33, 0x37, 0xff, 0x0f, 0xf0, 0x01})
	f.Add(int64(1000), []byte{0xff, 0xff, 0x0f, 0x00, 0xf3})
	f.Add(int64(7), []byte{0x21, 0x43, 0x65, 0x87})
	f.Fuzz(func(t *testing.T, budget int64, ops []byte) {
		if budget <= 0 || budget > 1<<40 || len(ops) > 200 {
			return // outside the allocator's domain: nothing to check
		}
		names := []string{"a", "b", "c", "d"}
		t0 := time.Unix(1000, 0)
		a := NewAllocator(2 * time.Second)
		w := &worstCase{sent: map[string][]Grant{}, acked: map[string]uint64{}}
		for step, op := range ops {
			now := t0.Add(time.Duration(step) * 500 * time.Millisecond)
			demands := map[string]Demand{}
			for i, n := range names {
				if op&(1<<i) == 0 {
					continue
				}
				if op&(1<<(i+4)) != 0 {
					if g, ok := w.latest(n); ok {
						w.acked[n] = g.Version
					}
				}
				want := budget
				if (op>>i)&(op>>(7-i))&1 == 0 {
					want = budget / int64(2+i)
				}
				demands[n] = Demand{Want: want, Applied: w.acked[n]}
			}
			ws := a.Step(now, budget, demands)
			w.record(ws)
			if s := w.sum(now); s > budget {
				t.Fatalf("round %d at %v: instances may run at %d together, over %d (writes%s)", step, now.Sub(t0), s, budget, fmtWrites(ws))
			}
			if s := a.Exposure(now); s > budget {
				t.Fatalf("round %d: the allocator counts %d over %d", step, s, budget)
			}
			if s := a.Exposure(now); s < w.sum(now) {
				t.Fatalf("round %d: the allocator counts %d under the worst case %d", step, s, w.sum(now))
			}
		}
		_ = fmt.Sprint
	})
}

func BenchmarkAllocatorStep(b *testing.B) {
	a := NewAllocator(5 * time.Second)
	demands := map[string]Demand{}
	for i := range 32 {
		demands[fmt.Sprintf("sluice-%02d", i)] = Demand{Want: int64(i+1) * 1_000_000}
	}
	now := time.Unix(1000, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(500 * time.Millisecond)
		a.Step(now, 30_000_000, demands)
	}
}

func BenchmarkEstimatorObserve(b *testing.B) {
	var e Estimator
	now := time.Unix(1000, 0)
	var bytes int64
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(100 * time.Millisecond)
		bytes += 1_000_000
		e.Observe(now, Sample{Bytes: bytes, Waiting: 16384})
		_ = e.Want(10_000_000, 30_000_000)
	}
}

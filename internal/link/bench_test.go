package link

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

const benchChunk = 32 * kib

// BenchmarkSendUnlimited is the common path: Capacity 0, no Low limit.
// One flow per goroutine, all on one link.
func BenchmarkSendUnlimited(b *testing.B) {
	l := New("lan", Config{NetworkControl: true}, clock.Real{})
	defer l.Close()
	b.ReportAllocs()
	b.SetBytes(benchChunk)
	var i atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		f := l.Flow(Up, fmt.Sprint("pool", i.Add(1)%4))
		ctx := context.Background()
		for pb.Next() {
			if _, err := f.Send(ctx, benchChunk, Normal); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSendUncontended is one flow on a link with a capacity it never
// fills: the locked path without waiting.
func BenchmarkSendUncontended(b *testing.B) {
	l := New("wan", Config{Capacity: 1 << 50, NetworkControl: true}, clock.Real{})
	defer l.Close()
	f := l.Flow(Up, "app")
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(benchChunk)
	for b.Loop() {
		if _, err := f.Send(ctx, benchChunk, Normal); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSched100Flows is the scheduler's own cost in the contended
// case, in virtual time: 100 backlogged flows in 10 pools and three
// classes on a 1 GB/s link with network control, the occupancy bound and
// a Low limit. One op is one chunk admitted; MB/s is the bandwidth the
// scheduler could keep up with on one core.
func BenchmarkSched100Flows(b *testing.B) {
	weights := map[string]int{}
	for i := range 10 {
		weights[fmt.Sprint("pool", i)] = 1 + i%4
	}
	s := newSched(Config{Capacity: 1_000_000_000, NetworkControl: true, LowPriorityBandwidth: 256_000_000, Weights: weights}, t0)
	admitted := make([]*Flow, 0, 128)
	s.onAdmit = func(f *Flow) { admitted = append(admitted, f) }
	classes := []Class{High, Normal, Normal, Normal, Normal, Normal, Normal, Low, Low, Low}
	now := t0
	for i := range 100 {
		f := &Flow{pool: s.pool(fmt.Sprint("pool", i%10))}
		s.enqueue(now, f, benchChunk, classes[i%10])
	}
	b.ReportAllocs()
	b.SetBytes(benchChunk)
	n := 0
	for n < b.N {
		next := s.dispatch(now)
		if len(admitted) == 0 {
			now = next
			continue
		}
		for _, f := range admitted {
			s.enqueue(now, f, benchChunk, f.class)
		}
		n += len(admitted)
		admitted = admitted[:0]
	}
	b.ReportMetric(float64(now.Sub(t0))/float64(b.N), "virtual-ns/op")
}

// BenchmarkLink100Flows is the whole contended path on the real clock:
// 100 goroutines, one flow each, sending 32 KiB chunks through one
// direction of a link with network control and the default 2 MiB FIFO.
// MB/s is what went through and %capacity its share of the capacity;
// allocs/op counts every allocation on the way, the scheduler goroutine
// and its timer included. The ceiling is the timer resolution: per
// wake-up the scheduler can only admit the chunks the flows have offered.
func BenchmarkLink100Flows(b *testing.B) {
	for _, capacity := range []int64{1_250_000_000, 10_000_000_000} {
		b.Run(fmt.Sprintf("capacity=%dMB/s", capacity/1_000_000), func(b *testing.B) {
			benchLink(b, capacity)
		})
	}
}

func benchLink(b *testing.B, capacity int64) {
	l := New("wan", Config{Capacity: capacity, NetworkControl: true, Weights: map[string]int{"pool0": 3}}, clock.Real{})
	defer l.Close()
	flows := make([]*Flow, 100)
	for i := range flows {
		flows[i] = l.Flow(Up, fmt.Sprint("pool", i%4))
	}
	b.ReportAllocs()
	b.SetBytes(benchChunk)
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, f := range flows {
		c := Normal
		if i%4 == 3 {
			c = Low
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for next.Add(1) <= int64(b.N) {
				if _, err := f.Send(ctx, benchChunk, c); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchChunk)/time.Since(start).Seconds()/float64(capacity)*100, "%capacity")
}

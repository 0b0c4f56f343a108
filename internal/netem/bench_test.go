package netem

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

func BenchmarkPathRelease(b *testing.B) {
	const ms = time.Millisecond
	cases := []struct {
		name string
		p    Params
	}{
		{"delay", Params{Delay: 5 * ms}},
		{"jitter-paretonormal-corr", Params{Delay: 5 * ms, Jitter: ms, Distribution: ParetoNormal, Correlation: 0.25}},
		{"rate-loss", Params{Delay: 5 * ms, Rate: 50e6, Loss: 0.01}},
		{"gemodel", Params{Delay: 5 * ms, LossModel: LossModel{Kind: GilbertElliott, P: 0.01, R: 0.25}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p := NewPath(c.p, 1)
			arr := t0
			b.ReportAllocs()
			for b.Loop() {
				arr = arr.Add(10 * time.Microsecond)
				p.Release(arr, 16<<10)
			}
		})
	}
}

// BenchmarkLineWrite measures the cost of one Write on the real clock and
// its allocations (none in steady state).
func BenchmarkLineWrite(b *testing.B) {
	ctx := context.Background()
	clk := clock.Real{}
	for _, d := range []time.Duration{0, time.Millisecond} {
		b.Run(fmt.Sprintf("delay=%v", d), func(b *testing.B) {
			l := NewLine(clk, io.Discard, NewPath(Params{Delay: d}, 0), LineOptions{})
			defer l.Close()
			buf := make([]byte, 16<<10)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Write(ctx, buf, clk.Now()); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// stampWriter reports the real time of each write.
type stampWriter struct{ c chan time.Time }

func (w stampWriter) Write(p []byte) (int, error) {
	w.c <- clock.Real{}.Now()
	return len(p), nil
}

// BenchmarkLineLatency measures release accuracy on the real clock: one
// small chunk at a time, as a request in a request-response protocol, and
// how late it reaches dst after arrival + delay. Metrics are in µs.
func BenchmarkLineLatency(b *testing.B) {
	ctx := context.Background()
	clk := clock.Real{}
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		for _, spin := range []bool{true, false} {
			opts := LineOptions{}
			if !spin {
				opts.Spin = -1
			}
			b.Run(fmt.Sprintf("delay=%v/spin=%v", d, spin), func(b *testing.B) {
				dst := stampWriter{make(chan time.Time, 1)}
				l := NewLine(clk, dst, NewPath(Params{Delay: d}, 0), opts)
				defer l.Close()
				msg := make([]byte, 64)
				late := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					arr := clk.Now()
					if err := l.Write(ctx, msg, arr); err != nil {
						b.Fatal(err)
					}
					at := <-dst.c
					late = append(late, at.Sub(arr.Add(d)))
				}
				b.StopTimer()
				slices.Sort(late)
				var sum time.Duration
				for _, x := range late {
					sum += x
				}
				us := func(x time.Duration) float64 { return float64(x) / 1e3 }
				b.ReportMetric(us(sum/time.Duration(len(late))), "mean-late-us")
				b.ReportMetric(us(late[len(late)/2]), "p50-late-us")
				b.ReportMetric(us(late[(len(late)*99)/100]), "p99-late-us")
				b.ReportMetric(us(late[len(late)-1]), "max-late-us")
				b.ReportMetric(us(late[0]), "min-late-us")
			})
		}
	}
}

// BenchmarkLineWindow runs one bulk flow through a Line on the real clock
// with 25 ms each way and a 1 MiB window; window-ratio is the throughput
// over 1 MiB / 50 ms.
func BenchmarkLineWindow(b *testing.B) {
	const total, chunk, window = 32 << 20, 32 << 10, 1 << 20
	rtt := 50 * time.Millisecond
	elapsed := transfer(b, Params{Delay: rtt / 2, Window: window}, total, chunk)
	got := float64(total) * float64(b.N) / elapsed.Seconds()
	b.ReportMetric(got/1e6, "MB/s")
	b.ReportMetric(got/(window/rtt.Seconds()), "window-ratio")
}

// BenchmarkLineRate sends 200 MB through a Line limited to 50 MB/s on the
// real clock; rate-ratio is the elapsed time over the ideal 4 s.
func BenchmarkLineRate(b *testing.B) {
	const total, chunk, rate = 200_000_000, 32 << 10, 50_000_000
	elapsed := transfer(b, Params{Rate: rate}, total, chunk)
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/transfer")
	b.ReportMetric(elapsed.Seconds()/float64(b.N)/4.0, "rate-ratio")
}

// transfer sends total bytes in chunks of chunk bytes through a fresh Line
// with p on the real clock, b.N times, and returns the time all the
// transfers took, each until its Flush returned.
func transfer(b *testing.B, p Params, total, chunk int) time.Duration {
	ctx := context.Background()
	clk := clock.Real{}
	buf := make([]byte, chunk)
	var elapsed time.Duration
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		l := NewLine(clk, io.Discard, NewPath(p, 0), LineOptions{})
		start := clk.Now()
		for sent := 0; sent < total; sent += chunk {
			n := min(chunk, total-sent)
			if err := l.Write(ctx, buf[:n], clk.Now()); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed += clk.Now().Sub(start)
		l.Close()
	}
	return elapsed
}

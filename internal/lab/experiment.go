package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/units"
)

// randomPassword is 24 random hex digits.
func randomPassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// linkCounts are bytes that left the default link, server to client.
type linkCounts struct{ total, low int64 }

// linkBytes returns the bytes that have left the default link's device
// queue, server to client (admitted minus still queued), in all and in
// the low class.
func (r *bbRun) linkBytes() linkCounts {
	d := r.s.linkStats().Directions[link.Down]
	var in int64
	for _, c := range d.Classes {
		in += c.Bytes
	}
	return linkCounts{total: in - d.QueueBytes(), low: d.Classes[link.Low].Bytes - d.Queue[link.Low]}
}

// rate is n bytes over d in bytes/s; 0 for no time.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// headroom is how many times the calibrated single-session rate must
// exceed the link capacity. When the database, sluice and every client
// share a small machine, bulk traffic costs processor time that the
// normal query's server, proxy and client then wait for, whatever the
// link does; a link well below what the machine can move keeps the link,
// not the processor, the bottleneck being measured. On two cores, 20 MB/s
// keeps that cost within a few percent of the normal query's time where
// 100 MB/s more than doubles it.
const headroom = 10

// pickCapacity returns the largest of 100, 50, 20, 10, 5, 2 and 1 MB/s
// that is at most max and at most rate/headroom (rate in bytes/s), or
// 1 MB/s.
// linkCapacity returns planned when it is positive; otherwise it runs
// calibrate (one bulk session's stream rate, bytes/s through an
// unlimited link), says what it measured on p, and returns the capacity
// pickCapacity chooses from it, at most max, with the rate in MB/s
// (mbps is 0 when planned was used).
func linkCapacity(planned, max int64, calibrate func() (float64, error), p *printer) (capacity int64, mbps float64, err error) {
	if planned > 0 {
		return planned, 0, nil
	}
	rate, err := calibrate()
	if err != nil {
		return 0, 0, err
	}
	capacity = pickCapacity(rate, max)
	p.step("calibration: one bulk session streams %.0f MB/s through an unlimited link; link capacity %s", rate/1e6, units.FormatRate(capacity))
	return capacity, rate / 1e6, nil
}

func pickCapacity(rate float64, max int64) int64 {
	for _, c := range []int64{100e6, 50e6, 20e6, 10e6, 5e6, 2e6, 1e6} {
		if c <= max && float64(c) <= rate/headroom {
			return c
		}
	}
	return 1e6
}

// streamRate streams the bulk statement on one session to route with the
// default link's capacity removed and returns the best rate it reached
// over three 0.5 s windows after 0.5 s of warm-up, in bytes/s. It leaves
// the capacity removed.
func streamRate(ctx context.Context, s *sluice, db *database, route string, clk clock.Clock, p *printer) (float64, error) {
	p.step("calibration: streaming the bulk statement on one session through an unlimited link")
	if err := s.setCapacity(ctx, 0); err != nil {
		return 0, err
	}
	c, err := db.connect(ctx, route, "", "")
	if err != nil {
		return 0, err
	}
	defer c.close()
	bctx, cancel := context.WithCancel(ctx)
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		for {
			if err := c.bulk(bctx, &n); err != nil {
				done <- err
				return
			}
		}
	}()
	// The best of a few short windows after a warm-up: what the machine
	// can stream, not what a neighbour's burst of work left of it.
	const warm, window, windows = 500 * time.Millisecond, 500 * time.Millisecond, 3
	var rate float64
	err = clock.Sleep(ctx, clk, warm)
	for i := 0; i < windows && err == nil; i++ {
		n0, t0 := n.Load(), clk.Now()
		err = clock.Sleep(ctx, clk, window)
		if secs := clk.Now().Sub(t0).Seconds(); secs > 0 {
			rate = max(rate, float64(n.Load()-n0)/secs)
		}
	}
	cancel()
	berr := <-done
	if err != nil {
		return 0, err
	}
	if rate == 0 {
		return 0, fmt.Errorf("calibration: the bulk statement streamed nothing (%v)", berr)
	}
	return rate, nil
}

// summarize returns the median, mean, minimum and maximum of v.
func summarize(v []float64) (median, mean, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		median = s[len(s)/2]
	} else {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	return median, sum / float64(len(s)), s[0], s[len(s)-1]
}

// percentile returns the q-th quantile of v (0 < q <= 1) by nearest rank:
// the smallest value with at least q of the values at or below it; 0 for
// no values.
func percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// pings is how many round trips ping times.
const pings = 25

// medianPing returns the median time in ms of a minimal round trip on c
// (pings of them, after one untimed).
func medianPing(ctx context.Context, clk clock.Clock, c conn) (float64, error) {
	if err := c.ping(ctx); err != nil {
		return 0, err
	}
	times := make([]float64, 0, pings)
	for range pings {
		t0 := clk.Now()
		if err := c.ping(ctx); err != nil {
			return 0, err
		}
		times = append(times, durMs(clk.Now().Sub(t0)))
	}
	median, _, _, _ := summarize(times)
	return median, nil
}

// waitIdle polls idle every 20 ms of clk, for up to 10 s, until it
// reports true; the end of ctx ends the wait early. It reports nothing:
// a point that starts on a busy link is measured all the same.
func waitIdle(ctx context.Context, clk clock.Clock, idle func() bool) {
	deadline := clk.Now().Add(10 * time.Second)
	for clk.Now().Before(deadline) && !idle() {
		if clock.Sleep(ctx, clk, 20*time.Millisecond) != nil {
			return
		}
	}
}

// stopOnce returns a function that, the first time it is called, calls
// stop (which ends the background sessions), waits for wg and then calls
// drain; later calls do nothing. Not safe for concurrent use.
func stopOnce(stop func(), wg *sync.WaitGroup, drain func()) func() {
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			stop()
			wg.Wait()
			drain()
		}
	}
}

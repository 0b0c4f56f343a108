package netctl_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netctl"
	"github.com/sluicelab/sluice/internal/netlab"
	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestFindsKernelBottleneck: Low-class bulk flows through a link with
// network control and no capacity, over a real tbf queue the link is
// not told about, make the Watcher find the bottleneck, estimate its
// rate, and hold the Low class so that the kernel's queue does not stay
// full: with the queue beyond sluice (it sends, paced by the link), and
// before it (it receives, and the link paces its reads).
func TestFindsKernelBottleneck(t *testing.T) {
	testenv.SkipShort(t, "runs 4 s of traffic over a real queue per case")
	for _, tt := range []struct {
		side      netctl.Side
		instances int // watchers, each with a link of its own, the flows spread over them
	}{
		{netctl.Send, 1},
		{netctl.Receive, 1},
		{netctl.Send, 2},
	} {
		t.Run(fmt.Sprintf("%v/%d", tt.side, tt.instances), func(t *testing.T) { findsKernelBottleneck(t, tt.side, tt.instances) })
	}
}

func findsKernelBottleneck(t *testing.T, side netctl.Side, instances int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tb, err := netlab.New(ctx)
	if err != nil {
		testenv.Missing(t, "a real-network testbed: %v", err)
	}
	defer tb.Close()
	a, _ := tb.Namespace(ctx, "snd")
	b, _ := tb.Namespace(ctx, "rcv")
	l, err := tb.Connect(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	const rate = 50e6 / 8 // bytes/s
	const queue = 50 * time.Millisecond
	if err := l.A.Shape(ctx, rate, queue); err != nil {
		t.Fatal(err)
	}
	ln, err := b.Listen(ctx, "tcp", netip.AddrPortFrom(l.B.Addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	// Each instance is a link and the Watcher of its sockets, as each
	// sluice of a fleet has; nothing passes between them.
	type instance struct {
		lk *link.Link
		w  *netctl.Watcher
	}
	var ins []instance
	for range instances {
		lk := link.New("wan", link.Config{NetworkControl: true}, clock.Real{})
		defer lk.Close()
		w := netctl.NewWatcher(netctl.WatcherOptions{Logger: testenv.Logger(0)})
		go w.Run(ctx)
		ins = append(ins, instance{lk, w})
	}
	low := func() link.Class { return link.Low }
	// paced moves the flow's bytes through its instance's link's Low
	// class, as the proxy does: a write to the path, or a read from it.
	paced := func(in instance, c net.Conn, move func([]byte) (int, error)) {
		f := in.lk.Flow(link.Down, "bulk")
		defer f.Close()
		buf := make([]byte, 16<<10)
		for ctx.Err() == nil {
			if _, err := f.Send(ctx, len(buf), link.Low); err != nil {
				return
			}
			if _, err := move(buf); err != nil {
				return
			}
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn // closed at the end: a write blocked on a full window returns
	keep := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			keep(c)
			in := ins[i%len(ins)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if side == netctl.Send {
					io.Copy(io.Discard, c)
					return
				}
				detach := in.w.Attach(in.lk, link.Down, rawconn.ControllerOf(c), nil, low)
				defer detach()
				paced(in, c, c.Read)
			}()
		}
	}()
	for i := range 4 {
		c, err := a.Dial(ctx, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		keep(c)
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			if side == netctl.Receive {
				buf := make([]byte, 16<<10)
				for ctx.Err() == nil {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
				return
			}
			in := ins[i%len(ins)]
			detach := in.w.Attach(in.lk, link.Down, nil, rawconn.ControllerOf(c), low)
			defer detach()
			paced(in, c, c.Write)
		}(c)
	}
	limit := rate * queue.Seconds()
	ests := make([]netctl.LinkEstimate, len(ins))
	var backlog []int64
	var sent0 int64
	deadline := time.Now().Add(4 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		time.Sleep(100 * time.Millisecond) // a sampling period of the measurement, not a wait for a condition
		for i, in := range ins {
			for _, e := range in.w.Estimates() {
				if e.Side == side {
					ests[i] = e
				}
			}
		}
		if q, err := l.A.Qdisc(ctx); err == nil {
			backlog = append(backlog, q.Backlog)
			if n == 19 {
				sent0 = q.Bytes
			}
		}
	}
	q, err := l.A.Qdisc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	use := float64(q.Bytes-sent0) / 2 / rate // over the last 2 s, roughly
	cancel()
	ln.Close()
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	t.Logf("estimates %+v; tbf backlog over the last 2 s %v bytes (queue limit %.0f); link use %.0f %%", ests, backlog[len(backlog)-20:], limit, 100*use)
	var found int64
	for _, est := range ests {
		if est.State != netctl.Found {
			t.Fatalf("no bottleneck found: %+v", est)
		}
		found += est.Bottleneck
	}
	// Each instance sees the path deliver its own flows' bytes.
	if found < rate/2 || found > rate*1.3 {
		t.Errorf("bottleneck estimates %d B/s together, the queue's rate %d B/s", found, int64(rate))
	}
	// A hold stuck near its floor (2 % of the path) starves the class;
	// a controller still climbing back after a cut, on a slow host (the
	// race detector), uses less than the path but far more than that.
	if use < 0.25 {
		t.Errorf("the Low class used %.0f %% of the path, held far below it", 100*use)
	}
	full := 0
	for _, q := range backlog[len(backlog)-20:] {
		if float64(q) > limit/2 {
			full++
		}
	}
	if full > 5 {
		t.Errorf("the kernel's queue was over half full in %d of the last 20 samples", full)
	}
}

package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/netlab"
	"github.com/sluicelab/sluice/internal/units"
)

// Networks, as Options.Network spells them.
const (
	// NetworkEmulated runs the experiments over sluice's own emulated
	// link on loopback.
	NetworkEmulated = "emulated"
	// NetworkKernel runs them over a real network on this host (package
	// netlab): namespaces, veth pairs and tbf queues.
	NetworkKernel = "kernel"
)

// Defaults of the kernel testbed's bottleneck.
const (
	DefaultNetRate  = 200_000_000 / 8 // 200 Mbit/s, in bytes/s
	DefaultNetQueue = 100 * time.Millisecond
)

// ParseNetRate reads a bottleneck's rate as tc spells it ("200mbit",
// "1gbit", "500kbit") or as sluice does ("200Mbit", "25MB"), in
// bytes/s.
func ParseNetRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	l := strings.ToLower(t)
	for _, u := range []struct{ tc, sluice string }{{"gbit", "Gbit"}, {"mbit", "Mbit"}, {"kbit", "kbit"}} {
		if strings.HasSuffix(l, u.tc) {
			t = t[:len(t)-len(u.tc)] + u.sluice
			break
		}
	}
	r, err := units.ParseRate(t)
	if err != nil {
		return 0, err
	}
	if r <= 0 {
		return 0, fmt.Errorf("rate %q: must be positive", s)
	}
	return r, nil
}

// formatBits writes a rate in bytes/s as Mbit/s, the unit tc and the
// flag use.
func formatBits(bps int64) string { return fmtNum(float64(bps)*8/1e6) + " Mbit/s" }

// tbfNet is what the kernel experiments' networks share: a testbed on
// this host whose bottleneck is one tbf queue, of rate and depth queue,
// on the egress of shaped.
type tbfNet struct {
	tb     *netlab.Testbed
	shaped netlab.End
	rate   int64 // bytes/s
	queue  time.Duration
}

// build makes the testbed, has join add the namespaces and links and
// return the end to shape, and shapes it; on error it removes the
// testbed.
func (n *tbfNet) build(ctx context.Context, join func(*netlab.Testbed) (netlab.End, error)) (err error) {
	if n.tb, err = netlab.New(ctx); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			n.tb.Close()
		}
	}()
	if n.shaped, err = join(n.tb); err != nil {
		return err
	}
	return n.shaped.Shape(ctx, n.rate, n.queue)
}

// qdisc returns the counters of the tbf queue.
func (n *tbfNet) qdisc(ctx context.Context) (netlab.QdiscStats, error) { return n.shaped.Qdisc(ctx) }

// close removes the namespaces, the links and the queue.
func (n *tbfNet) close() error { return n.tb.Close() }

// remove closes n and says on p how that went; for a deferred call.
func (n *tbfNet) remove(p *printer) {
	if err := n.close(); err != nil {
		p.step("could not remove the network: %v", err)
	} else {
		p.step("network removed")
	}
}

// measure measures a point's job reps times (measureReps, with before
// ahead of each) and fills in row's times, the tbf queue's bytes, drops
// and use over that time, and BulkMBps from background, the bytes the
// background jobs have received so far.
func (n *tbfNet) measure(ctx context.Context, e *env, row *KernelRow, reps int, before func() error, background func() int64, job func() (time.Duration, error)) error {
	q0, err := n.qdisc(ctx)
	if err != nil {
		return err
	}
	b0, m0 := background(), e.clk.Now()
	times, err := measureReps(ctx, e.p, fmt.Sprintf("%s, N=%d", row.Setting, row.N), reps, before, nil, job)
	if err != nil {
		return err
	}
	secs := e.clk.Now().Sub(m0).Seconds()
	q1, err := n.qdisc(ctx)
	if err != nil {
		return err
	}
	row.QdiscBytes, row.QdiscDrops = q1.Bytes-q0.Bytes, q1.Drops-q0.Drops
	if secs > 0 {
		row.BulkMBps = float64(background()-b0) / 1e6 / secs
		row.LinkUse = float64(row.QdiscBytes) / secs / float64(n.rate)
	}
	row.PointTimes, row.SamplesMs = pointTimes(times), times
	return nil
}

// flowNet is the flow-control experiment's network on this host: a
// client namespace and sluice's, joined by a veth pair whose egress
// from sluice toward the clients goes through the tbf queue. sluice
// itself runs in this process: its route listens inside sluice's
// namespace, and it reaches the database from this process's
// namespace.
type flowNet struct {
	tbfNet
	cli, prx *netlab.Namespace
	link     *netlab.Link
}

// newFlowNet builds the network; on error it removes what it made.
func newFlowNet(ctx context.Context, rate int64, queue time.Duration) (*flowNet, error) {
	n := &flowNet{tbfNet: tbfNet{rate: rate, queue: queue}}
	err := n.build(ctx, func(tb *netlab.Testbed) (_ netlab.End, err error) {
		if n.cli, err = tb.Namespace(ctx, "cli"); err != nil {
			return netlab.End{}, err
		}
		if n.prx, err = tb.Namespace(ctx, "sluice"); err != nil {
			return netlab.End{}, err
		}
		if n.link, err = tb.Connect(ctx, n.prx, n.cli); err != nil {
			return netlab.End{}, err
		}
		return n.link.A, nil
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// describe says what the network is, for progress lines and the report.
func (n *flowNet) describe() string {
	return fmt.Sprintf("namespaces %s (clients, %v) and %s (sluice's route, %v) joined by a veth pair; "+
		"egress toward the clients through tbf at %s with a %v queue",
		n.cli.Name, n.link.B.Addr, n.prx.Name, n.link.A.Addr, formatBits(n.rate), n.queue)
}

// dial opens a client's connection from the client namespace.
func (n *flowNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.cli.Dial(ctx, network, addr)
}

// listen opens a listener on a free port of sluice's end of the link.
func (n *flowNet) listen(ctx context.Context) (net.Listener, error) {
	return n.prx.Listen(ctx, "tcp", netip.AddrPortFrom(n.link.A.Addr, 0).String())
}

// controllerEstimate reads the network view's row of the default link,
// server to client, on the side sluice sends it (the path from sluice
// to the client); nil when the controller has none.
func controllerEstimate(s *sluice) *ControllerEstimate {
	t, ok := s.st.Manager().Views().ViewTables([]string{"network"})["network"]
	if !ok {
		return nil
	}
	col := map[string]int{}
	for i, c := range t.Columns {
		col[c] = i
	}
	side, sided := col["side"]
	for _, row := range t.Rows {
		if len(row) != len(t.Columns) || row[col["link"]] != "default" || row[col["direction"]] != "down" || sided && row[side] != "send" {
			continue
		}
		e := &ControllerEstimate{State: row[col["state"]]}
		e.BottleneckBytes, _ = strconv.ParseInt(row[col["bottleneck_bytes_per_second"]], 10, 64)
		e.QueueDelayMs, _ = strconv.ParseFloat(row[col["queue_delay_ms"]], 64)
		e.LowRateBytes, _ = strconv.ParseInt(row[col["low_rate_bytes_per_second"]], 10, 64)
		return e
	}
	return nil
}

// controllerText describes the network controller's estimate at the
// point for a progress line: "" where the controller has no part (off,
// or a capacity), and says so when it had no estimate with control on
// and nothing configured.
func (r *KernelRow) controllerText() string {
	e := r.Controller
	if e == nil {
		if r.Setting == SettingOn && r.N > 0 {
			return "; controller: no estimate (it watched no socket of the link)"
		}
		return ""
	}
	s := fmt.Sprintf("; controller: %s", e.State)
	if e.BottleneckBytes > 0 {
		s += fmt.Sprintf(", path %s, queue %.2f ms", formatBits(e.BottleneckBytes), e.QueueDelayMs)
	}
	if e.LowRateBytes > 0 {
		s += ", low class held to " + formatBits(e.LowRateBytes)
	}
	return s
}

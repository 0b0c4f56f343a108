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

// flowNet is the flow-control experiment's network on this host: a
// client namespace and sluice's, joined by a veth pair whose egress
// from sluice toward the clients goes through a tbf queue of the given
// rate and depth. sluice itself runs in this process: its route
// listens inside sluice's namespace, and it reaches the database from
// this process's namespace.
type flowNet struct {
	tb       *netlab.Testbed
	cli, prx *netlab.Namespace
	link     *netlab.Link
	rate     int64 // bytes/s
	queue    time.Duration
}

// newFlowNet builds the network; on error it removes what it made.
func newFlowNet(ctx context.Context, rate int64, queue time.Duration) (_ *flowNet, err error) {
	tb, err := netlab.New(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tb.Close()
		}
	}()
	n := &flowNet{tb: tb, rate: rate, queue: queue}
	if n.cli, err = tb.Namespace(ctx, "cli"); err != nil {
		return nil, err
	}
	if n.prx, err = tb.Namespace(ctx, "sluice"); err != nil {
		return nil, err
	}
	if n.link, err = tb.Connect(ctx, n.prx, n.cli); err != nil {
		return nil, err
	}
	if err = n.link.A.Shape(ctx, rate, queue); err != nil {
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

// qdisc returns the counters of the tbf queue toward the clients.
func (n *flowNet) qdisc(ctx context.Context) (netlab.QdiscStats, error) { return n.link.A.Qdisc(ctx) }

// close removes the namespaces, the link and the queue.
func (n *flowNet) close() error { return n.tb.Close() }

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

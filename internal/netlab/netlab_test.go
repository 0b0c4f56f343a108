package netlab

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

func newTestbed(t *testing.T) *Testbed {
	t.Helper()
	ctx := context.Background()
	tb, err := New(ctx)
	if err != nil {
		testenv.Missing(t, "a real-network testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tb
}

// namespace makes the namespace name in tb; a failure fails t.
func namespace(t *testing.T, tb *Testbed, name string) *Namespace {
	t.Helper()
	ns, err := tb.Namespace(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// connect links a and b in tb; a failure fails t.
func connect(t *testing.T, tb *Testbed, a, b *Namespace) *Link {
	t.Helper()
	l, err := tb.Connect(context.Background(), a, b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// transfer sends n bytes from a to a listener in b at addr and returns
// once b has read them all.
func transfer(t *testing.T, a, b *Namespace, addr netip.Addr, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := b.Listen(ctx, "tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		m, _ := io.Copy(io.Discard, c)
		got <- m
	}()
	c, err := a.Dial(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(c, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if m := <-got; m != n {
		t.Fatalf("b read %d bytes of %d", m, n)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestLinkShapedQueue: bytes sent across a shaped link pass its tbf
// queue, the link's addresses are in the benchmarking range, and Close
// removes the namespaces (twice is harmless).
func TestLinkShapedQueue(t *testing.T) {
	ctx := context.Background()
	tb := newTestbed(t)
	a, b := namespace(t, tb, "a"), namespace(t, tb, "b")
	l := connect(t, tb, a, b)
	for _, e := range []End{l.A, l.B} {
		if !Range.Contains(e.Addr) || !l.Subnet.Contains(e.Addr) {
			t.Errorf("%s has %v, outside %v or %v", e.Dev, e.Addr, Range, l.Subnet)
		}
	}
	if err := l.A.Shape(ctx, 50e6/8, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	const n = 4 << 20
	transfer(t, a, b, l.B.Addr, n)
	q, err := l.A.Qdisc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.Kind != "tbf" || q.Bytes < n {
		t.Errorf("a's egress qdisc %+v: want tbf having sent at least %d bytes", q, n)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), tb.tag+"-") {
		t.Errorf("namespaces left after Close:\n%s", out)
	}
	if _, err := tb.Namespace(ctx, "c"); err == nil {
		t.Error("Namespace after Close succeeded")
	}
}

// TestRouter: two nodes reach each other through a router namespace,
// whose port toward b carries the shaped queue (the incast shape of the
// cluster experiments).
func TestRouter(t *testing.T) {
	ctx := context.Background()
	tb := newTestbed(t)
	a, b := namespace(t, tb, "a"), namespace(t, tb, "b")
	r, err := tb.Router(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	ar, rb := connect(t, tb, a, r), connect(t, tb, r, b)
	if err := a.Route(ctx, rb.Subnet, ar.B.Addr); err != nil {
		t.Fatal(err)
	}
	if err := b.Route(ctx, ar.Subnet, rb.A.Addr); err != nil {
		t.Fatal(err)
	}
	if err := rb.A.Shape(ctx, 100e6/8, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	transfer(t, a, b, rb.B.Addr, 1<<20)
	if q, err := rb.A.Qdisc(ctx); err != nil || q.Bytes < 1<<20 {
		t.Errorf("router port toward b: %+v, %v", q, err)
	}
}

// TestAttach: Attach makes a namespace whose link to its peer has end A
// in the new namespace and end B in the peer, and bytes cross it.
func TestAttach(t *testing.T) {
	tb := newTestbed(t)
	a := namespace(t, tb, "a")
	b, l, err := tb.Attach(context.Background(), "b", a)
	if err != nil {
		t.Fatal(err)
	}
	if l.A.NS != b || l.B.NS != a {
		t.Errorf("link ends in %s and %s, want %s and %s", l.A.NS.Name, l.B.NS.Name, b.Name, a.Name)
	}
	transfer(t, b, a, l.B.Addr, 1<<20)
}

// TestSweep: New removes the namespaces a dead process's testbed left.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	newTestbed(t) // root and iproute2, or the test ends here
	// pid 4194304 is above the kernel's maximum: no process has it.
	stale := "slb4194304-x"
	if err := exec.Command("ip", "netns", "add", stale).Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stale).Run() })
	if _, err := New(ctx); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), stale) {
		t.Errorf("New left %s:\n%s", stale, out)
	}
}

// TestDoKeepsOtherSockets: a socket made after Do is in this process's
// namespace, whatever thread runs it.
func TestDoKeepsOtherSockets(t *testing.T) {
	tb := newTestbed(t)
	a := namespace(t, tb, "a")
	for range 20 {
		if err := a.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", ln.Addr().String()) // in a, this loopback has no listener
		if err != nil {
			t.Fatalf("dial in the host's namespace after Do: %v", err)
		}
		c.Close()
		ln.Close()
	}
}

// TestStart: a process Start starts runs in the namespace, under the
// credentials its command carries.
func TestStart(t *testing.T) {
	tb := newTestbed(t)
	ns := namespace(t, tb, "proc")
	host, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(host), ":") < 2 {
		testenv.Missing(t, "an interface besides loopback in this process's own namespace: nothing tells the two apart")
		return
	}
	cmd := exec.Command("cat", "/proc/self/net/dev")
	var out strings.Builder
	cmd.Stdout = &out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// A new namespace has its loopback only.
	if strings.Count(out.String(), ":") != 1 || !strings.Contains(out.String(), "lo:") {
		t.Errorf("the process saw these devices, want lo only:\n%s", out.String())
	}
}

package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm"
)

// delayPolicy binds every session to the same emulation both ways.
type delayPolicy struct{ p netem.Params }

func (d delayPolicy) Bind(route, user string) wlm.Binding { return wlm.Binding{Up: d.p, Down: d.p} }
func (delayPolicy) Version() uint64                       { return 1 }

// echoRoute serves a tcp route named echo, under policy and with frontend
// (nil for none), to an echo server, and returns the server and a client
// connected through it. Both are closed when the test ends.
func echoRoute(t *testing.T, policy Policy, frontend Frontend) (*Server, net.Conn) {
	t.Helper()
	up := testenv.ServeOnce(t, func(c net.Conn) { io.Copy(c, c) })
	srv := New(Options{Logger: testLogger(t), Registry: session.NewRegistry(session.Options{}), Policy: policy})
	t.Cleanup(func() { srv.Close() })
	addr, err := srv.AddRoute(Route{Name: "echo", Listen: "127.0.0.1:0", Upstream: up, Protocol: "tcp",
		DialTimeout: 2 * time.Second, Frontend: frontend})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// TestReleaseLateness checks that every request and response that waits
// in a delay line is recorded once, per route and direction, as a precise
// release.
func TestReleaseLateness(t *testing.T) {
	srv, c := echoRoute(t, delayPolicy{netem.Params{Delay: 2 * time.Millisecond}}, nil)
	const exchanges = 5
	buf := make([]byte, 4)
	for range exchanges {
		c.SetDeadline(clock.SocketDeadline(10 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo %q, %v", buf, err)
		}
	}
	got := map[[3]string]uint64{}
	srv.ReleaseLateness(func(route, dir, wait string, h netem.LatenessSnapshot) {
		got[[3]string{route, dir, wait}] = h.Count
	})
	want := map[[3]string]uint64{
		{"echo", "up", "precise"}: exchanges, {"echo", "down", "precise"}: exchanges,
		{"echo", "up", "timer"}: 0, {"echo", "down", "timer"}: 0,
	}
	if len(got) != len(want) {
		t.Fatalf("histograms %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%v: %d releases recorded, want %d", k, got[k], n)
		}
	}
}

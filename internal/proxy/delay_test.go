package proxy

// This file tests the pumps' delay lines: when a chunk counts as arrived,
// and how late each release is recorded.

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wlm"
)

func TestArrival(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name                  string
		depart, now, received time.Time
		want                  time.Time
	}{
		{"received before the read", ms(10), ms(10), ms(9), ms(9)},
		{"received at the read", ms(10), ms(10), ms(10), ms(10)},
		{"link held the chunk back", ms(15), ms(10), ms(9), ms(15)},
		{"stamp after depart (clock stepped back)", ms(10), ms(10), ms(11), ms(10)},
		{"stamp at the age bound", ms(1000), ms(1000), ms(0), ms(0)},
		{"stamp past the age bound", ms(1001), ms(1001), ms(0), ms(1001)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := arrival(tt.depart, tt.now, tt.received); !got.Equal(tt.want) {
				t.Fatalf("arrival = %v, want %v", got.Sub(t0), tt.want.Sub(t0))
			}
		})
	}
}

// upDelayPolicy delays the client's bytes only.
type upDelayPolicy struct{ p netem.Params }

func (d upDelayPolicy) Bind(route, user string) wlm.Binding { return wlm.Binding{Up: d.p} }
func (upDelayPolicy) Version() uint64                       { return 1 }

// slowObserver holds every chunk for d before the pump goes on with it:
// a pump that gets to its bytes late. The sleep is the behaviour under
// test: the lateness is real time spent by the pump's own goroutine.
type slowObserver struct{ d time.Duration }

func (o slowObserver) Observe([]byte) error { time.Sleep(o.d); return nil }

// openRaw registers the session and dials the upstream, as a frontend
// that speaks no protocol does, and returns the connection of the two
// sockets, without observers.
func openRaw(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	s := register()
	up, err := dial(ctx)
	if err != nil {
		return wire.Conn{}, err
	}
	return wire.Conn{Session: s, Client: client, Upstream: up}, nil
}

// slowFrontend opens raw sessions whose client bytes pass a slowObserver.
type slowFrontend struct{ d time.Duration }

func (f slowFrontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	c, err := openRaw(ctx, client, register, dial)
	if err != nil {
		return c, err
	}
	c.Up = slowObserver(f)
	return c, nil
}

// TestDelayCountsFromReceipt: a delayed flow's bytes are released one
// delay after they reached the host, not one delay after the pump got to
// them. The pump here is 300 ms late with each chunk and the delay is
// 300 ms; the echo must come back after about 300 ms, not 600. The two
// outcomes are 300 ms apart, so a round trip slowed by a loaded host (up
// to 150 ms) is still judged right.
func TestDelayCountsFromReceipt(t *testing.T) {
	const late, delay = 300 * time.Millisecond, 300 * time.Millisecond
	_, c := echoRoute(t, upDelayPolicy{netem.Params{Delay: delay}}, slowFrontend{late})
	// The first chunk starts the flow's delay line, which turns the
	// timestamps on for the reads after it.
	for i := range 4 {
		start := time.Now()
		ping(t, c)
		rtt := time.Since(start)
		if rtt < delay {
			t.Fatalf("exchange %d: round trip %v, shorter than the delay %v", i, rtt, delay)
		}
		if i > 0 && rtt >= delay+late/2 {
			t.Fatalf("exchange %d: round trip %v; the delay counted from the pump's read (%v), not from receipt", i, rtt, delay+late)
		}
	}
}

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
	srv := newTestServer(t, Options{Policy: policy})
	addr := addTestRoute(t, srv, Route{Name: "echo", Upstream: up, DialTimeout: 2 * time.Second, Frontend: frontend})
	return srv, testenv.Dial(t, addr)
}

// ping writes "ping" on c, a connection to an echo server, and reads the
// echo back, within 10 s.
func ping(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(clock.SocketDeadline(10 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q, %v", buf, err)
	}
}

// TestReleaseLateness checks that every request and response that waits
// in a delay line is recorded once, per route and direction, as a precise
// release.
func TestReleaseLateness(t *testing.T) {
	srv, c := echoRoute(t, delayPolicy{netem.Params{Delay: 2 * time.Millisecond}}, nil)
	const exchanges = 5
	for range exchanges {
		ping(t, c)
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

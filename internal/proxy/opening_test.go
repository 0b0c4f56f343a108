package proxy

// This file tests the delay of the opening exchange (delayedConn) on a
// fake clock: no wall-clock time decides an outcome.

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
)

// greetFrontend writes a greeting to the client before it dials, as a
// MySQL server speaks first, and reports how that write ended on wrote.
type greetFrontend struct{ wrote chan error }

const greeting = "hello"

func (f greetFrontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	s := register()
	if _, err := client.Write([]byte(greeting)); err != nil {
		f.wrote <- err
		return wire.Conn{}, err
	}
	f.wrote <- nil
	up, err := dial(ctx)
	if err != nil {
		return wire.Conn{}, err
	}
	return wire.Conn{Session: s, Client: client, Upstream: up}, nil
}

// greetProxy serves a route through greetFrontend to an echo upstream on
// a fake clock, with delay each way, and returns the server, the clock,
// the front end and a client connected through the route.
func greetProxy(t *testing.T, delay time.Duration) (*Server, *clock.Fake, greetFrontend, net.Conn) {
	t.Helper()
	fake := clock.NewFake(time.Unix(0, 0))
	srv := newTestServer(t, Options{Clock: fake, Policy: delayPolicy{netem.Params{Delay: delay}}})
	fr := greetFrontend{wrote: make(chan error, 1)}
	c := testenv.Dial(t, addTestRoute(t, srv, Route{Name: "greet", Upstream: echoUpstream(t), Frontend: fr}))
	return srv, fake, fr, c
}

// TestOpeningWriteWaitsOutDelay: the opening's first write to the client
// waits on the server's clock until one delay after it was made, and
// reaches the client once that time has come.
func TestOpeningWriteWaitsOutDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	_, fake, fr, c := greetProxy(t, delay)
	start := fake.Now()
	fake.BlockUntil(1)
	if next, ok := fake.Next(); !ok || !next.Equal(start.Add(delay)) {
		t.Fatalf("the greeting waits until %v (%v), want %v", next.Sub(start), ok, delay)
	}
	select {
	case err := <-fr.wrote:
		t.Fatalf("the greeting was written (%v) before its delay passed", err)
	default:
	}
	fake.Advance(delay)
	if err := <-fr.wrote; err != nil {
		t.Fatalf("writing the greeting: %v", err)
	}
	expect(t, c, greeting)
}

// TestAbortEndsOpeningDelay: Close ends a session whose opening waits out
// a long emulated delay at once, rather than after the delay (here an
// hour of a clock that never moves): the wait returns the opening
// context's error and the client reads the end of the stream, no
// greeting.
func TestAbortEndsOpeningDelay(t *testing.T) {
	srv, fake, fr, c := greetProxy(t, time.Hour)
	fake.BlockUntil(1)
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-timeout.C:
		fake.Advance(time.Hour) // lets Close return, for the cleanup
		t.Fatal("Close still waits for the opening's emulated delay")
	}
	if err := <-fr.wrote; !errors.Is(err, context.Canceled) {
		t.Errorf("the greeting's write ended with %v, want %v", err, context.Canceled)
	}
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Errorf("client read %q, %v; want the end of the stream and nothing", b, err)
	}
}

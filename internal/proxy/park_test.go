package proxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// echoUpstream serves on loopback, echoing each connection's bytes and
// half-closing it after the client's end of stream.
func echoUpstream(t testing.TB) string {
	return testenv.Serve(t, func(c net.Conn) {
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	})
}

// parkedProxy starts a server whose sweeper runs on a fake clock, with a
// tcp route to an echo upstream. It runs no event loop: its sessions stay
// on their pumps, which park.
func parkedProxy(t testing.TB) (*Server, *clock.Fake, string) {
	t.Helper()
	fake := clock.NewFake(time.Unix(0, 0))
	up := echoUpstream(t)
	srv := newTestServer(t, Options{Loops: -1})
	srv.parking.clk = fake
	return srv, fake, addTestRoute(t, srv, Route{Name: "park", Upstream: up})
}

// sweepUntilParked advances the sweeper's clock until want pumps are
// parked.
func sweepUntilParked(t *testing.T, srv *Server, fake *clock.Fake, want int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "idle pumps to park", func() bool {
		fake.Advance(sweepPeriod)
		return srv.parking.parked() == want
	})
}

// TestParkResume parks every pump of idle sessions, then wakes them with
// traffic, many times over, and checks that every byte comes back in
// order, that half-close still travels both ways, and that the sessions
// stay in the registry while parked.
func TestParkResume(t *testing.T) {
	const sessions, rounds = 8, 20
	srv, fake, addr := parkedProxy(t)
	conns := make([]net.Conn, sessions)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range rounds {
		sweepUntilParked(t, srv, fake, 2*sessions)
		if n := len(srv.Registry().Sessions()); n != sessions {
			t.Fatalf("round %d: %d sessions in the registry while parked, want %d", round, n, sessions)
		}
		for i, c := range conns {
			msg := make([]byte, 1+rng.IntN(100_000))
			for j := range msg {
				msg[j] = byte(rng.Uint32())
			}
			errc := make(chan error, 1)
			go func() { _, err := c.Write(msg); errc <- err }()
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("round %d session %d: %v", round, i, err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("round %d session %d: echo differs from the %d bytes sent", round, i, len(msg))
			}
		}
	}
	if got := srv.parking.parks.Load(); got < 2*sessions*rounds {
		t.Fatalf("%d parks, want at least %d", got, 2*sessions*rounds)
	}
	// Half-close while parked: the client's FIN reaches the upstream,
	// which closes its side, and the client reads the end of stream.
	sweepUntilParked(t, srv, fake, 2*sessions)
	for i, c := range conns {
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("session %d: read %d bytes, %v after half-close, want EOF", i, n, err)
		}
	}
	waitNoSessions(t, srv)
	if n := srv.parking.parked(); n != 0 {
		t.Fatalf("%d sockets still parked after every session ended", n)
	}
}

// openedSession connects to addr and makes one round trip, so the
// session is open through the route; the test's end closes it.
func openedSession(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestParkedSessionsClose closes a server whose sessions are all parked:
// Close must end every one of them (no goroutine waits on their sockets).
func TestParkedSessionsClose(t *testing.T) {
	const sessions = 16
	srv, fake, addr := parkedProxy(t)
	for range sessions {
		openedSession(t, addr)
	}
	sweepUntilParked(t, srv, fake, 2*sessions)
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the parked sessions")
	}
	if n := len(srv.Registry().Sessions()); n != 0 {
		t.Fatalf("%d sessions left after Close", n)
	}
}

// TestTerminateParked ends a session whose pumps are both parked, as the
// admin console's pg_terminate_backend does: the pumps must be taken out
// of the epoll set and the session must end at once.
func TestTerminateParked(t *testing.T) {
	srv, fake, addr := parkedProxy(t)
	c := openedSession(t, addr)
	sweepUntilParked(t, srv, fake, 2)
	sessions := srv.Registry().Sessions()
	if len(sessions) != 1 || !sessions[0].Terminate() {
		t.Fatalf("sessions %v: could not terminate", sessions)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("client read %d bytes, %v after terminate; want the connection closed", n, err)
	}
	testenv.Eventually(t, 10*time.Second, "the session to end", func() bool {
		return len(srv.Registry().Sessions()) == 0 && srv.parking.parked() == 0
	})
}

// TestParkUnderTraffic streams pseudo-random bytes through sessions with
// random pauses while the sweeper runs constantly, so that pumps park and
// resume in the middle of the streams, and checks the echoes byte for
// byte.
func TestParkUnderTraffic(t *testing.T) {
	const sessions = 6
	total := 4 << 20
	if testing.Short() {
		total = 512 << 10
	}
	srv, fake, addr := parkedProxy(t)
	stop := make(chan struct{})
	var sweeping sync.WaitGroup
	sweeping.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			fake.Advance(sweepPeriod)
			time.Sleep(200 * time.Microsecond) // pacing the fake clock, not waiting for a condition
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(s), 7))
			sent := make([]byte, total)
			for i := range sent {
				sent[i] = byte(rng.Uint32())
			}
			go func() {
				for off := 0; off < total; {
					n := min(1+rng.IntN(64<<10), total-off)
					if _, err := c.Write(sent[off : off+n]); err != nil {
						return
					}
					off += n
					if rng.IntN(4) == 0 {
						time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // a pause in the stream, for the sweeper
					}
				}
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, sent) {
				errs <- errors.New("echo differs from what was sent")
			}
		})
	}
	wg.Wait()
	close(stop)
	sweeping.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d parks", srv.parking.parks.Load())
	if srv.parking.parks.Load() == 0 {
		t.Error("no pump parked under traffic")
	}
	waitNoSessions(t, srv)
}

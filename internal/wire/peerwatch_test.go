package wire

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// left runs peerLeft on c's socket.
func left(t *testing.T, c net.Conn, farewell func([]byte) bool) bool {
	t.Helper()
	rc, _ := rawSocket(c)
	var buf [farewellPeek]byte
	var gone bool
	if err := rc.Control(func(fd uintptr) { gone = peerLeft(fd, buf[:], farewell) }); err != nil {
		t.Fatal(err)
	}
	return gone
}

// hungUp reports whether c's peer has ended its stream (POLLRDHUP) or
// reset it.
func hungUp(t *testing.T, c net.Conn) bool {
	t.Helper()
	rc, _ := rawSocket(c)
	var re int16
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		unix.Poll(fds, 0)
		re = fds[0].Revents
	})
	return re&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}

func isTerminate(b []byte) bool { return string(b) == "X\x00\x00\x00\x04" }

// TestPeerLeft: a client that is there, with or without more requests,
// or that half-closed after more requests, has not left; one that closed
// with nothing unsent, or with only its goodbye, or reset, has. Nothing
// is consumed.
func TestPeerLeft(t *testing.T) {
	fin := func(c net.Conn) { c.Close() }
	rst := func(c net.Conn) {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	for _, tc := range []struct {
		name  string
		send  string
		close func(net.Conn)
		gone  bool
	}{
		{"there", "", nil, false},
		{"more requests", "Q\x00\x00\x00\x0dSELECT 1\x00", nil, false},
		{"half-closed after more requests", "Q\x00\x00\x00\x0dSELECT 1\x00", func(c net.Conn) { c.(*net.TCPConn).CloseWrite() }, false},
		{"closed", "", fin, true},
		{"closed after its goodbye", "X\x00\x00\x00\x04", fin, true},
		{"reset", "", rst, true},
		{"reset after more requests", "Q\x00\x00\x00\x0dSELECT 1\x00", rst, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, sluice := testenv.TCPPair(t)
			if tc.send != "" {
				if _, err := client.Write([]byte(tc.send)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.close != nil {
				tc.close(client)
				testenv.Eventually(t, 5*time.Second, "the close reaching sluice's socket", func() bool { return hungUp(t, sluice) })
			} else if tc.send != "" {
				testenv.Eventually(t, 5*time.Second, "the bytes reaching sluice's socket", func() bool {
					n, _ := peekFD(fdOf(t, sluice), make([]byte, 1))
					return n > 0
				})
			}
			if got := left(t, sluice, isTerminate); got != tc.gone {
				t.Fatalf("left = %v, want %v", got, tc.gone)
			}
			if tc.send != "" && tc.name != "reset after more requests" {
				// Still there to read: nothing was consumed.
				b := make([]byte, len(tc.send))
				sluice.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := sluice.Read(b); err != nil || string(b) != tc.send {
					t.Fatalf("read %q, %v after the check, want %q", b, err, tc.send)
				}
			}
		})
	}
}

func fdOf(t *testing.T, c net.Conn) uintptr {
	t.Helper()
	rc, _ := rawSocket(c)
	var fd uintptr
	rc.Control(func(f uintptr) { fd = f })
	return fd
}

// TestGateWaitEndsWhenClientLeaves: a statement waiting for admission
// ends with ErrClientGone as soon as its client resets or closes, with
// no slot taken; the gate's watch then leaves the socket to the pump.
func TestGateWaitEndsWhenClientLeaves(t *testing.T) {
	reg := session.NewRegistry(session.Options{})
	for _, how := range []string{"FIN", "RST"} {
		t.Run(how, func(t *testing.T) {
			client, sluice := testenv.TCPPair(t)
			a := &holdingAdmitter{held: make(chan struct{}), release: make(chan struct{})}
			g := NewGate(a)
			g.SetPeer(sluice)
			sess := reg.Open(session.Info{Route: "r", Protocol: "postgres"}, time.Now())
			defer sess.Close(time.Now())
			st := sess.Begin("SELECT 1", time.Now())
			done := make(chan error, 1)
			go func() { done <- g.Wait(context.Background(), st) }()
			<-a.held
			if how == "RST" {
				client.(*net.TCPConn).SetLinger(0)
			}
			client.Close()
			if err := <-done; !errors.Is(err, ErrClientGone) {
				t.Fatalf("Wait: %v, want ErrClientGone", err)
			}
			if g.Held() {
				t.Fatal("a slot held after the client left")
			}
			// The pump reads the socket as before: end of stream or reset.
			sluice.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := sluice.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.EAGAIN) {
				t.Fatalf("read after the watch: %v", err)
			}
		})
	}
}

// TestGateIdleInTransaction: the gate records on the session when it
// sits idle inside a transaction and when its next request begins; once
// the session is ended for sitting idle (TerminateIdle), every request
// that begins is held and its Wait fails, so nothing reaches the server.
func TestGateIdleInTransaction(t *testing.T) {
	reg := session.NewRegistry(session.Options{})
	clk := clock.NewFake(time.Unix(1000, 0))
	sess := reg.Open(session.Info{Route: "r", Protocol: "mysql"}, clk.Now())
	defer sess.Close(clk.Now())
	var reason []session.EndReason
	sess.SetHooks(nil, func(r session.EndReason) { reason = append(reason, r) })
	g := NewGate(&holdingAdmitter{})
	g.Track(sess, clk)
	st := sess.Begin("BEGIN", clk.Now())
	if !g.Start(true, false) {
		t.Fatal("the first request need not wait")
	}
	if err := g.Wait(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	g.Answered(true)
	since := sess.Slot().IdleSince
	if !since.Equal(clk.Now()) {
		t.Fatalf("IdleSince %v after a transaction's answer, want %v", since, clk.Now())
	}
	if g.Start(true, false) {
		t.Fatal("a request inside the transaction must not wait")
	}
	if !sess.Slot().IdleSince.IsZero() {
		t.Fatal("still idle once a request began")
	}
	clk.Advance(time.Second)
	g.Answered(true)
	clk.Advance(time.Minute)
	if sess.TerminateIdle(since) {
		t.Fatal("ended for an idle time that is over")
	}
	if !sess.TerminateIdle(sess.Slot().IdleSince) || len(reason) != 1 || reason[0] != session.EndIdleInTransaction {
		t.Fatalf("TerminateIdle: reasons %v", reason)
	}
	// A request begun as the session ends, in a transaction, is held (both
	// of MySQL's Start calls for one command say so) and fails its wait.
	if !g.Start(false, true) || !g.Start(true, false) {
		t.Fatal("a request after the end was not held")
	}
	if err := g.Wait(context.Background(), sess.Begin("UPDATE t SET v = 1", clk.Now())); !errors.Is(err, ErrGateClosed) {
		t.Fatalf("Wait after the end: %v, want ErrGateClosed", err)
	}
}

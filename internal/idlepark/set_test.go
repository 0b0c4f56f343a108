package idlepark

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

// pair returns the two ends of a loopback TCP connection and the
// syscall.RawConn of the first.
func pair(t *testing.T) (net.Conn, net.Conn, syscall.RawConn) {
	t.Helper()
	c, s := testenv.TCPPair(t)
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return c, s, rc
}

func TestParkResumesOnInput(t *testing.T) {
	set := New(nil)
	_, peer, rc := pair(t)
	resumed := make(chan struct{})
	if _, err := set.Park(rc, func() { close(resumed) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-resumed:
		t.Fatal("resumed with nothing to read")
	case <-time.After(50 * time.Millisecond): // a negative check: nothing may happen
	}
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	<-resumed
	if n := set.Parked(); n != 0 {
		t.Fatalf("%d parked after resume, want 0", n)
	}
}

func TestParkReadyAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready func(peer net.Conn)
	}{
		{"input", func(peer net.Conn) { peer.Write([]byte("x")) }},
		{"half-close", func(peer net.Conn) { peer.(*net.TCPConn).CloseWrite() }},
		{"close", func(peer net.Conn) { peer.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := New(nil)
			_, peer, rc := pair(t)
			tc.ready(peer)
			// Wait for the peer's bytes or FIN to arrive.
			testenv.Eventually(t, 5*time.Second, "the peer's data to arrive", func() bool {
				var n int
				rc.Control(func(fd uintptr) {
					buf := make([]byte, 1)
					n, _, _ = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				})
				return n >= 0
			})
			resumed := make(chan struct{})
			if _, err := set.Park(rc, func() { close(resumed) }); err != nil {
				t.Fatal(err)
			}
			<-resumed
		})
	}
}

func TestUnpark(t *testing.T) {
	set := New(nil)
	c, peer, rc := pair(t)
	tk, err := set.Park(rc, func() { t.Error("resumed after Unpark") })
	if err != nil {
		t.Fatal(err)
	}
	if !set.Unpark(tk) {
		t.Fatal("Unpark of a parked socket reported false")
	}
	if set.Unpark(tk) {
		t.Fatal("second Unpark reported true")
	}
	c.Close()
	peer.Write([]byte("x"))
	testenv.Eventually(t, 5*time.Second, "the waiter to end", func() bool {
		set.mu.Lock()
		defer set.mu.Unlock()
		return set.epfd < 0
	})
}

func TestParkClosedSocket(t *testing.T) {
	set := New(nil)
	c, _, rc := pair(t)
	c.Close()
	if _, err := set.Park(rc, func() {}); err == nil {
		t.Fatal("Park of a closed socket succeeded")
	}
	if n := set.Parked(); n != 0 {
		t.Fatalf("%d parked, want 0", n)
	}
}

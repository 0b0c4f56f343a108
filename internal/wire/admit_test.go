package wire

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestPeerGone: a peer that is there, or gone with a byte still unread,
// is not reported gone; once its end of stream is all that is left, it
// is. A check allocates nothing.
func TestPeerGone(t *testing.T) {
	client, sluice := testenv.TCPPair(t)
	gone := PeerGone(sluice)
	if gone() {
		t.Fatal("gone while the peer is there")
	}
	if n := testing.AllocsPerRun(100, func() { gone() }); n != 0 {
		t.Errorf("a check made %.0f allocations", n)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	waitFIN(t, sluice) // the byte is ahead of it
	// The unread byte still comes first: a peek sees it, not the end.
	if gone() {
		t.Fatal("gone with a byte unread")
	}
	var b [1]byte
	if _, err := sluice.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "gone after the peer's end of stream", gone)
}

// waitFIN waits until c's socket has received its peer's end of stream
// (poll reports POLLRDHUP); it reads nothing.
func waitFIN(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the peer's FIN", func() bool {
		var rdhup bool
		rc.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			n, _ := unix.Poll(p, 0)
			rdhup = n == 1 && p[0].Revents&unix.POLLRDHUP != 0
		})
		return rdhup
	})
}

// holdingAdmitter holds each statement until release is closed; with
// release nil it admits at once.
type holdingAdmitter struct {
	release chan struct{}
	held    chan struct{} // closed once a statement is held
}

func (a *holdingAdmitter) Admit(ctx context.Context, st *session.Statement) (func(), error) {
	if a.release == nil {
		return func() {}, nil
	}
	st.Hold(time.Now(), nopWait{})
	close(a.held)
	select {
	case <-a.release:
		st.Admit(time.Now())
		return func() {}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type nopWait struct{}

func (nopWait) Cancel(error) bool { return false }
func (nopWait) Demote() bool      { return false }

// TestGateClientGone: a client that leaves while its statement waits
// gets ErrClientGone once the slot comes; one admitted at once is
// admitted even if it has left, as it would be without a gate.
func TestGateClientGone(t *testing.T) {
	reg := session.NewRegistry(session.Options{})
	for _, tc := range []struct {
		name string
		wait bool
		want error
	}{
		{"waited", true, ErrClientGone},
		{"admitted at once", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, sluice := testenv.TCPPair(t)
			a := &holdingAdmitter{held: make(chan struct{})}
			if tc.wait {
				a.release = make(chan struct{})
			}
			g := NewGate(a)
			g.SetPeer(sluice)
			sess := reg.Open(session.Info{Route: "r", Protocol: "postgres"}, time.Now())
			defer sess.Close(time.Now())
			st := sess.Begin("SELECT 1", time.Now())
			client.Close()
			waitFIN(t, sluice)
			done := make(chan error, 1)
			go func() { done <- g.Wait(context.Background(), st) }()
			if tc.wait {
				<-a.held
				close(a.release)
			}
			if err := <-done; !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Wait: %v, want %v", err, tc.want)
			}
		})
	}
}

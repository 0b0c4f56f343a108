package wire

import (
	"context"
	"errors"
	"testing"
	"time"

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
	time.Sleep(20 * time.Millisecond) // the byte and the FIN reach sluice's socket
	// The unread byte still comes first: a peek sees it, not the end.
	if gone() {
		t.Fatal("gone with a byte unread")
	}
	var b [1]byte
	if _, err := sluice.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !gone() {
		time.Sleep(time.Millisecond)
	}
	if !gone() {
		t.Fatal("not gone after the peer's end of stream")
	}
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
			time.Sleep(10 * time.Millisecond) // the FIN reaches sluice's socket
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

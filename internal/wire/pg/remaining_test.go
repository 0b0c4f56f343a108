package pg

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
)

// TestServerRemaining: fed a stream cut at every offset, the server
// observer's Remaining walks the down pump from each cut to the end of
// the message in flight: the bytes it names, observed, always land on a
// header's or a message's end, and 0 only at a message boundary.
func TestServerRemaining(t *testing.T) {
	var stream []byte
	stream, _ = (&pgproto3.CopyOutResponse{OverallFormat: 0}).Encode(stream)
	ends := map[int]bool{0: true, len(stream): true}
	for _, row := range []string{"a", "a longer row of copy data", ""} {
		stream, _ = (&pgproto3.CopyData{Data: []byte(row)}).Encode(stream)
		ends[len(stream)] = true
	}
	for cut := range len(stream) + 1 {
		reg := session.NewRegistry(session.Options{})
		sess := reg.Open(session.Info{}, remT0)
		_, s := New(Options{Clock: clock.NewFake(remT0)}).observers(sess, func([]byte) {})
		if err := s.Observe(stream[:cut]); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		at := cut
		for {
			n, ok := s.Remaining()
			if !ok {
				t.Fatalf("cut %d, at %d: no boundary in a well-formed stream", cut, at)
			}
			if n == 0 {
				if !ends[at] {
					t.Fatalf("cut %d: Remaining says boundary at %d, inside a message", cut, at)
				}
				break
			}
			if at+n > len(stream) {
				t.Fatalf("cut %d, at %d: Remaining %d runs past the stream's %d bytes", cut, at, n, len(stream))
			}
			if err := s.Observe(stream[at : at+n]); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			at += n
		}
		if want := nextEnd(ends, cut); at != want {
			t.Errorf("cut %d: finished at %d, want the message's end at %d", cut, at, want)
		}
	}
	reg := session.NewRegistry(session.Options{})
	_, s := New(Options{Clock: clock.NewFake(remT0)}).observers(reg.Open(session.Info{}, remT0), func([]byte) {})
	s.Observe([]byte{'d', 0, 0, 0, 1}) // a length below 4: malformed
	if _, ok := s.Remaining(); ok {
		t.Error("Remaining after a malformed header reports a boundary to wait for")
	}
}

// remT0 is the tests' fixed time.
var remT0 = time.Unix(1000, 0)

// nextEnd returns the first message end at or after at.
func nextEnd(ends map[int]bool, at int) int {
	for !ends[at] {
		at++
	}
	return at
}

package pg

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
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
		at := wiretest.WalkRemaining(t, s, stream, cut, ends)
		if want := wiretest.NextEnd(ends, cut); at != want {
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

package wiretest

import (
	"testing"

	"github.com/sluicelab/sluice/internal/wire"
)

// RemainingObserver is a server observer that can say how far the
// message in flight runs.
type RemainingObserver interface {
	wire.Observer
	wire.Remainder
}

// WalkRemaining observes stream[:cut] with o, then walks on as the down
// pump does, Remaining bytes at a time, until Remaining says o is at a
// boundary, and returns the offset in stream reached. It fails t when o
// fails, when Remaining finds no boundary or runs past the stream, and
// when the boundary is not one of ends (the offsets where messages end).
func WalkRemaining(t testing.TB, o RemainingObserver, stream []byte, cut int, ends map[int]bool) int {
	t.Helper()
	if err := o.Observe(stream[:cut]); err != nil {
		t.Fatalf("cut %d: %v", cut, err)
	}
	at := cut
	for {
		n, ok := o.Remaining()
		if !ok {
			t.Fatalf("cut %d, at %d: no boundary in a well-formed stream", cut, at)
		}
		if n == 0 {
			if !ends[at] {
				t.Fatalf("cut %d: Remaining says boundary at %d, inside a message", cut, at)
			}
			return at
		}
		if at+n > len(stream) {
			t.Fatalf("cut %d, at %d: Remaining %d runs past the stream's %d bytes", cut, at, n, len(stream))
		}
		if err := o.Observe(stream[at : at+n]); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		at += n
	}
}

// NextEnd returns the first offset at or after at that ends holds.
func NextEnd(ends map[int]bool, at int) int {
	for !ends[at] {
		at++
	}
	return at
}

package wiretest

import (
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/session"
)

// EndedAt fails t unless the statement reg saw end last began at start
// and ended at end: what a protocol's observers stamped, replayed
// (wire.Replayer) or not. name prefixes the failure.
func EndedAt(t testing.TB, reg *session.Registry, name string, start, end time.Time) {
	t.Helper()
	recent := reg.Recent()
	if len(recent) == 0 {
		t.Fatalf("%s: no statement ended", name)
	}
	snap := recent[len(recent)-1].Snapshot()
	if !snap.Started.Equal(start) || !snap.Ended.Equal(end) {
		t.Errorf("%s: statement %v to %v, want %v to %v", name, snap.Started, snap.Ended, start, end)
	}
}

package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// TestReplayAt: chunks shown after they passed, through the admission
// rewriter and the down observer, stamp the command's statement with the
// times given; once reset, the clock's time again.
func TestReplayAt(t *testing.T) {
	reg, _, u, d := harnessObservers(testCaps, 0, false)
	rig := newAdmitRigOn(t, nil, 0, u, d)
	sent, answered := t0.Add(-time.Minute), t0.Add(-time.Minute+5*time.Millisecond)
	for _, c := range []struct {
		name               string
		sent, answered     time.Time // zero: not replayed
		wantStart, wantEnd time.Time
	}{
		{"replayed", sent, answered, sent, answered},
		{"read now", time.Time{}, time.Time{}, t0, t0},
	} {
		rig.up.ReplayAt(c.sent)
		if _, err := rig.up.Rewrite(context.Background(), pk(0, []byte{comQuery}, []byte("select 1"))); err != nil {
			t.Fatal(err)
		}
		rig.up.ReplayAt(time.Time{})
		d.ReplayAt(c.answered)
		if err := d.Observe(ok(autocommit)); err != nil {
			t.Fatal(err)
		}
		d.ReplayAt(time.Time{})
		wiretest.EndedAt(t, reg, c.name, c.wantStart, c.wantEnd)
	}
}

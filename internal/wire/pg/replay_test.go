package pg

import (
	"context"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// TestReplayAt: chunks shown after they passed, through the admission
// rewriter and the server observer, stamp the statement with the times
// given; once reset, the clock's time again.
func TestReplayAt(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	reg := session.NewRegistry(session.Options{})
	sess := reg.Open(session.Info{Route: "test", Protocol: "postgres"}, clk.Now())
	up, down := gated(sess, clk, &wiretest.Admitter{})
	if err := down.Observe(startupDown); err != nil {
		t.Fatal(err)
	}
	sent, answered := time.Unix(900, 0), time.Unix(900, 5e6)
	for _, c := range []struct {
		name               string
		sent, answered     time.Time // zero: not replayed
		wantStart, wantEnd time.Time
	}{
		{"replayed", sent, answered, sent, answered},
		{"read now", time.Time{}, time.Time{}, clk.Now(), clk.Now()},
	} {
		up.ReplayAt(c.sent)
		if _, err := up.Rewrite(context.Background(), q("select 1")); err != nil {
			t.Fatal(err)
		}
		up.ReplayAt(time.Time{})
		down.ReplayAt(c.answered)
		if err := down.Observe(answer('I')); err != nil {
			t.Fatal(err)
		}
		down.ReplayAt(time.Time{})
		wiretest.EndedAt(t, reg, c.name, c.wantStart, c.wantEnd)
	}
}

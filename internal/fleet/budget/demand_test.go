package budget

import (
	"testing"
	"time"
)

func TestEstimator(t *testing.T) {
	const budget = 30_000_000
	t0 := time.Unix(1000, 0)
	var e Estimator
	for i, st := range []struct {
		at       time.Duration // since t0
		bytes    int64
		waiting  int64
		applied  int64
		used     int64
		backlog  bool
		wantRate int64
	}{
		{at: 0, bytes: 0, used: 0, wantRate: 0},
		{at: 100 * time.Millisecond, bytes: 100_000, used: 1_000_000, wantRate: 1_250_000},
		{at: 200 * time.Millisecond, bytes: 200_000, applied: 10_000_000, used: 1_000_000, wantRate: 1_250_000},
		// a Send waits: backlogged, asks for the whole budget
		{at: 300 * time.Millisecond, bytes: 300_000, waiting: 16384, applied: 10_000_000, used: 1_000_000, backlog: true, wantRate: budget},
		// the waiting reading is in the window for a second
		{at: 1200 * time.Millisecond, bytes: 1_200_000, applied: 10_000_000, used: 1_000_000, backlog: true, wantRate: budget},
		{at: 1400 * time.Millisecond, bytes: 1_400_000, applied: 10_000_000, used: 1_000_000, wantRate: 1_250_000},
		// running at the applied rate without a waiting reading: held back
		// (the base is the reading at 300ms: 2.1 MB over 1.2 s)
		{at: 1500 * time.Millisecond, bytes: 2_400_000, applied: 1_900_000, used: 1_750_000, backlog: true, wantRate: budget},
		// idle: no byte over the last second
		{at: 2500 * time.Millisecond, bytes: 2_400_000, applied: 2_000_000, used: 0, wantRate: 0},
		{at: 3500 * time.Millisecond, bytes: 2_400_000, applied: 2_000_000, used: 0, wantRate: 0},
		// the link was made again: counters restart
		{at: 3600 * time.Millisecond, bytes: 10, used: 0, wantRate: 0},
		// capped at the budget
		{at: 3700 * time.Millisecond, bytes: 10 + 4_000_000, used: 40_000_000, wantRate: budget},
	} {
		e.Observe(t0.Add(st.at), Sample{Bytes: st.bytes, Waiting: st.waiting})
		if got := e.Used(); got != st.used {
			t.Errorf("step %d (%v): used %d, want %d", i, st.at, got, st.used)
		}
		if got := e.Backlogged(st.applied); got != st.backlog {
			t.Errorf("step %d (%v): backlogged %v, want %v", i, st.at, got, st.backlog)
		}
		if got := e.Want(st.applied, budget); got != st.wantRate {
			t.Errorf("step %d (%v): want %d, want %d", i, st.at, got, st.wantRate)
		}
	}
}

package wlm

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
)

// fakeCanceler counts cancel requests and ends the statement as the
// database would.
type fakeCanceler struct {
	mu    sync.Mutex
	calls int
	st    *session.Statement
	now   func() time.Time
	err   error
}

func (c *fakeCanceler) Cancel(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return c.err
	}
	c.st.End(c.now(), session.Cancelled, -1, "57014")
	return nil
}

func (c *fakeCanceler) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// newEvalManager returns a manager on a fake clock at t0, over a
// registry of its own, after running ddl.
func newEvalManager(t *testing.T, ddl string) (*clock.Fake, *session.Registry, *Manager) {
	t.Helper()
	clk := clock.NewFake(t0)
	reg := session.NewRegistry(session.Options{})
	m := newTestManager(t, ManagerOptions{Clock: clk, Registry: reg})
	mustExec(t, m, ddl)
	return clk, reg, m
}

// openAs opens a session on route at opened, logged in as user.
func openAs(reg *session.Registry, route, user string, opened time.Time) *session.Session {
	s := reg.Open(session.Info{Route: route}, opened)
	s.SetIdentity(user, "", "")
	return s
}

// phase is a stretch of a traffic profile: rate MB/s until the given
// second after the statement started.
type phase struct {
	until float64
	mbps  float64
}

// bytesAt integrates a profile: the statement's bytes s seconds after it
// started.
func bytesAt(profile []phase, s float64) int64 {
	var total, from float64
	for _, p := range profile {
		end := math.Min(p.until, s)
		if end > from {
			total += (end - from) * p.mbps * 1e6
		}
		from = p.until
		if from >= s {
			break
		}
	}
	return int64(total)
}

// poolWithRule is the DDL of exception rule r WITH the options with and of
// resource pool p that uses it.
func poolWithRule(with string) string {
	return "CREATE EXCEPT RULE r WITH (" + with + "); CREATE RESOURCE POOL p WITH (except_rule=r)"
}

func TestEvaluatorRules(t *testing.T) {
	const start = 300 * time.Millisecond // the statement starts between ticks
	tests := []struct {
		name     string
		ddl      string
		profile  []phase
		canceler bool
		wantAt   float64 // seconds after t0 of the firing; -1 for none
		wantRule string
		action   Action
	}{
		{
			name:    "reference rule fires when elapsedtime is reached",
			ddl:     "CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty'); CREATE RESOURCE POOL p WITH (except_rule='bandwidth_rule1')",
			profile: []phase{{1e9, 150}},
			wantAt:  60.3, wantRule: "bandwidth_rule1", action: Penalty,
		},
		{
			name:    "AND: bandwidth below the threshold",
			ddl:     poolWithRule("bandwidth=128, elapsedtime=60, action=penalty"),
			profile: []phase{{1e9, 100}},
			wantAt:  -1,
		},
		{
			name:    "AND: fast early, slow once elapsedtime is reached",
			ddl:     poolWithRule("bandwidth=128, elapsedtime=60, action=penalty"),
			profile: []phase{{30, 500}, {1e9, 0}},
			wantAt:  -1,
		},
		{
			name:    "bandwidth rises later: caught at a check period",
			ddl:     poolWithRule("bandwidth=128, elapsedtime=60, action=penalty"),
			profile: []phase{{70, 100}, {1e9, 200}},
			wantAt:  75.3, wantRule: "r", action: Penalty,
		},
		{
			name:    "OR across rules: the second rule fires",
			ddl:     "CREATE EXCEPT RULE r1 WITH (bandwidth=500, elapsedtime=10); CREATE EXCEPT RULE r2 WITH (elapsedtime=20, action=penalty); CREATE RESOURCE POOL p WITH (except_rule='r1,r2')",
			profile: []phase{{1e9, 50}},
			wantAt:  20.3, wantRule: "r2", action: Penalty,
		},
		{
			name:    "-1 bandwidth is unlimited: elapsed time alone",
			ddl:     poolWithRule("bandwidth=-1, elapsedtime=10, action=penalty"),
			profile: []phase{{1e9, 0}},
			wantAt:  10.3, wantRule: "r", action: Penalty,
		},
		{
			name:    "-1 elapsedtime: first check one period after the start",
			ddl:     poolWithRule("bandwidth=100, elapsedtime=-1, action=penalty"),
			profile: []phase{{1e9, 150}},
			wantAt:  5.3, wantRule: "r", action: Penalty,
		},
		{
			name:    "the 5 s window forgets an early burst",
			ddl:     poolWithRule("bandwidth=100, elapsedtime=10, action=penalty"),
			profile: []phase{{1, 2000}, {1e9, 0}},
			wantAt:  -1,
		},
		{
			name:    "check period follows except_check_period",
			ddl:     "SET except_check_period = 2; " + poolWithRule("bandwidth=100, elapsedtime=10, action=penalty"),
			profile: []phase{{13, 50}, {1e9, 300}},
			wantAt:  14.3, wantRule: "r", action: Penalty,
		},
		{
			// elapsedtime=0 is due at once (0.3 s), when a bandwidth
			// cannot be measured yet, so the rule fires one period later.
			name:    "no bandwidth before 1 s: the next check is a period later",
			ddl:     poolWithRule("bandwidth=0, elapsedtime=0, action=penalty"),
			profile: []phase{{1e9, 10}},
			wantAt:  5.3, wantRule: "r", action: Penalty,
		},
		{
			name:     "abort cancels through the session's canceler",
			ddl:      "CREATE EXCEPT RULE slow WITH (elapsedtime=5); CREATE RESOURCE POOL p WITH (except_rule=slow)",
			profile:  []phase{{1e9, 1}},
			canceler: true,
			wantAt:   5.3, wantRule: "slow", action: Abort,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk, reg, m := newEvalManager(t, tt.ddl+"; CREATE USER u RESOURCE POOL p")
			if err := m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true}); err != nil {
				t.Fatal(err)
			}
			s := reg.Open(session.Info{Route: "pg", Protocol: "postgres"}, t0)
			s.SetIdentity("u", "db", "app")
			// Evaluations happen on whole seconds; the statement begins
			// 0.3 s after one.
			ctx := context.Background()
			m.Rules().Evaluate(ctx, t0)
			st := s.Begin("COPY big FROM STDIN", t0.Add(start))
			canc := &fakeCanceler{st: st, now: clk.Now}
			if tt.canceler {
				s.SetCanceler(canc)
			}
			now := t0
			firedAt := -1.0
			for now.Before(t0.Add(130 * time.Second)) {
				// The evaluator's next wake-up, as Run computes it.
				next := now.Add(SampleInterval)
				if due := m.Rules().Evaluate(ctx, now); !due.IsZero() && due.Before(next) {
					next = due
				}
				if firedAt < 0 && (st.Snapshot().Penalized || st.CancelRequested()) {
					firedAt = now.Sub(t0).Seconds()
				}
				clk.Set(next)
				now = next
				if st.Outcome() == session.Running {
					want := bytesAt(tt.profile, now.Sub(st.Started).Seconds())
					st.AddUp(int(want - st.Bytes()))
				}
			}
			if math.Abs(firedAt-tt.wantAt) > 1e-9 {
				t.Fatalf("fired at %v s, want %v s (except_info %q)", firedAt, tt.wantAt, st.Snapshot().Except)
			}
			stats := m.Rules().Stats()
			if tt.wantAt < 0 {
				if len(stats.Firings) != 0 || len(st.Snapshot().Except) != 0 {
					t.Errorf("unexpected firings %v, except_info %q", stats.Firings, st.Snapshot().Except)
				}
				return
			}
			if n := stats.Firings[FiringKey{tt.wantRule, tt.action}]; n != 1 || len(stats.Firings) != 1 {
				t.Errorf("firings = %v, want one of %s/%s", stats.Firings, tt.wantRule, tt.action)
			}
			snap := st.Snapshot()
			if len(snap.Except) != 1 || !strings.HasPrefix(snap.Except[0], "except rule "+tt.wantRule+" ("+string(tt.action)+"): ") {
				t.Errorf("except_info = %q", snap.Except)
			}
			switch tt.action {
			case Penalty:
				if !s.Penalized() || snap.Outcome != session.Running {
					t.Errorf("penalty: session penalised %v, outcome %v", s.Penalized(), snap.Outcome)
				}
			case Abort:
				if canc.count() != 1 || snap.Outcome != session.Cancelled || !st.CancelRequested() || snap.Penalized {
					t.Errorf("abort: %d cancels, outcome %v, penalised %v", canc.count(), snap.Outcome, snap.Penalized)
				}
			}
			if s.Pool() != "p" {
				t.Errorf("session pool %q, want p", s.Pool())
			}
		})
	}
}

func TestEvaluatorCancelFailure(t *testing.T) {
	clk, reg, m := newEvalManager(t, "CREATE EXCEPT RULE slow WITH (elapsedtime=1); CREATE RESOURCE POOL p WITH (except_rule=slow); CREATE USER u RESOURCE POOL p")
	ctx := context.Background()

	// No canceler installed.
	st := openAs(reg, "tcp", "u", t0).Begin("SELECT pg_sleep(10)", t0)
	m.Rules().Evaluate(ctx, t0.Add(time.Second))
	snap := st.Snapshot()
	if got := m.Rules().Stats(); got.CancelFailures != 1 || got.Firings[FiringKey{"slow", Abort}] != 1 {
		t.Errorf("stats %+v", got)
	}
	if len(snap.Except) != 2 || !strings.Contains(snap.Except[1], "cancel failed") || snap.Outcome != session.Running {
		t.Errorf("except_info %q, outcome %v", snap.Except, snap.Outcome)
	}
	// A rule fires once per statement.
	m.Rules().Evaluate(ctx, t0.Add(10*time.Second))
	if got := m.Rules().Stats(); got.Firings[FiringKey{"slow", Abort}] != 1 {
		t.Errorf("rule fired again: %+v", got)
	}

	// A canceler that fails.
	s2 := openAs(reg, "pg", "u", t0)
	st2 := s2.Begin("SELECT 1", t0.Add(10*time.Second))
	s2.SetCanceler(&fakeCanceler{st: st2, now: clk.Now, err: errors.New("connection refused")})
	m.Rules().Evaluate(ctx, t0.Add(11*time.Second))
	if got := m.Rules().Stats(); got.CancelFailures != 2 {
		t.Errorf("stats %+v", got)
	}
}

func TestEvaluatorPenaltyThenAbort(t *testing.T) {
	clk, reg, m := newEvalManager(t, `CREATE EXCEPT RULE slow WITH (elapsedtime=2, action=penalty);
CREATE EXCEPT RULE slower WITH (elapsedtime=4);
CREATE EXCEPT RULE both WITH (elapsedtime=4, action=penalty);
CREATE RESOURCE POOL p WITH (except_rule='slow,slower,both'); CREATE USER u RESOURCE POOL p`)
	ctx := context.Background()
	s := openAs(reg, "pg", "u", t0)
	st := s.Begin("SELECT pg_sleep(10)", t0)
	canc := &fakeCanceler{st: st, now: clk.Now}
	s.SetCanceler(canc)
	m.Rules().Evaluate(ctx, t0.Add(2*time.Second))
	if !st.Snapshot().Penalized || !s.Penalized() {
		t.Fatal("not penalised at 2 s")
	}
	// At 4 s the abort rule and a second penalty rule are due: the abort
	// wins and the penalty is not applied.
	m.Rules().Evaluate(ctx, t0.Add(4*time.Second))
	snap := st.Snapshot()
	if canc.count() != 1 || snap.Outcome != session.Cancelled {
		t.Errorf("cancels %d, outcome %v", canc.count(), snap.Outcome)
	}
	if len(snap.Except) != 2 || !strings.Contains(snap.Except[1], "slower") {
		t.Errorf("except_info %q", snap.Except)
	}
	if s.Penalized() {
		t.Error("session still penalised after its statement ended")
	}
	want := map[FiringKey]uint64{{"slow", Penalty}: 1, {"slower", Abort}: 1}
	got := m.Rules().Stats().Firings
	if len(got) != len(want) || got[FiringKey{"slow", Penalty}] != 1 || got[FiringKey{"slower", Abort}] != 1 {
		t.Errorf("firings %v, want %v", got, want)
	}
}

func TestBandwidth(t *testing.T) {
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	samples := []sample{{sec(1), 10e6}, {sec(2), 20e6}, {sec(3), 30e6}, {sec(8), 30e6}}
	tests := []struct {
		now   float64
		bytes int64
		want  float64 // MB/s
		ok    bool
	}{
		{0.5, 5e6, 0, false},
		{2, 20e6, 10, true},  // younger than the window: since the start
		{5, 30e6, 6, true},   // exactly the window
		{7.5, 30e6, 1, true}, // window from 2.5 s: interpolated 25e6; the 8 s sample is ignored
		{9, 40e6, 2, true},   // window from 4 s: 30e6
	}
	for _, tt := range tests {
		got, ok := bandwidth(t0, samples, sec(tt.now), tt.bytes)
		if ok != tt.ok || math.Abs(got/1e6-tt.want) > 1e-9 {
			t.Errorf("bandwidth at %v s = %v MB/s %v, want %v %v", tt.now, got/1e6, ok, tt.want, tt.ok)
		}
	}
	var tr tracked
	for i := 0; i <= 20; i++ {
		tr.add(sec(float64(i)), int64(i))
	}
	if n := len(tr.samples); n != 6 || !tr.samples[0].t.Equal(sec(15)) {
		t.Errorf("kept %d samples from %v", n, tr.samples[0].t.Sub(t0))
	}
}

func TestRunVirtualTime(t *testing.T) {
	clk, reg, m := newEvalManager(t, "CREATE EXCEPT RULE r WITH (elapsedtime=2.5, action=penalty); CREATE RESOURCE POOL p WITH (except_rule=r); CREATE USER u RESOURCE POOL p")
	st := openAs(reg, "pg", "u", t0).Begin("SELECT 1", t0)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Rules().Run(ctx) }()
	var fired time.Time
	for i := 0; i < 10 && fired.IsZero(); i++ {
		clk.BlockUntil(1) // Run is asleep
		if st.Snapshot().Penalized {
			fired = clk.Now()
			break
		}
		next, _ := clk.Next()
		clk.Set(next)
	}
	if fired.IsZero() {
		clk.BlockUntil(1)
		if st.Snapshot().Penalized {
			fired = clk.Now()
		}
	}
	if want := t0.Add(2500 * time.Millisecond); !fired.Equal(want) {
		t.Errorf("penalised at %v, want %v", fired.Sub(t0), want.Sub(t0))
	}
	if err := m.Rules().Run(ctx); err == nil {
		t.Error("a second Run started")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v", err)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	clk := clock.NewFake(t0)
	reg := session.NewRegistry(session.Options{})
	m, err := NewManager(ManagerOptions{Clock: clk, Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Service().Exec(context.Background(), reference); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		openAs(reg, "pg", "user1", t0).Begin("SELECT 1", t0)
	}
	ctx := context.Background()
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		m.Rules().Evaluate(ctx, now)
	}
}

// blockingCanceler answers no cancel request: it waits until the
// request's context ends.
type blockingCanceler struct{}

func (blockingCanceler) Cancel(ctx context.Context) error {
	<-ctx.Done()
	return context.Cause(ctx)
}

// TestEvaluateCancelsConcurrently: the aborts of one pass are cancelled
// concurrently, so a pass with n cancel requests that all time out
// takes one CancelTimeout, not n of them.
func TestEvaluateCancelsConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := session.NewRegistry(session.Options{})
		// The real clock: inside the bubble it is synctest's virtual time.
		m := newTestManager(t, ManagerOptions{Registry: reg, Clock: clock.Real{}})
		mustExec(t, m, "CREATE EXCEPT RULE r WITH (elapsedtime=1); CREATE RESOURCE POOL p WITH (except_rule=r); CREATE USER u RESOURCE POOL p")
		start := time.Now()
		const n = 10
		var sts []*session.Statement
		for range n {
			s := openAs(reg, "pg", "u", start)
			s.SetCanceler(blockingCanceler{})
			sts = append(sts, s.Begin("SELECT pg_sleep(60)", start))
		}
		m.Rules().Evaluate(context.Background(), start.Add(2*time.Second))
		if took := time.Since(start); took != CancelTimeout {
			t.Errorf("a pass with %d cancels that time out took %v, want %v", n, took, CancelTimeout)
		}
		if got := m.Rules().Stats().CancelFailures; got != n {
			t.Errorf("cancel failures %d, want %d", got, n)
		}
		for _, st := range sts {
			if ex := st.Snapshot().Except; len(ex) != 2 || !strings.Contains(ex[1], errCancelTimeout.Error()) {
				t.Errorf("statement %d: except_info %q", st.ID, ex)
			}
		}
	})
}

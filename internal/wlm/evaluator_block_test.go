package wlm

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// stepEvaluator runs the evaluator from now to until as Run would (a pass
// every SampleInterval, or earlier when a rule is due), and leaves the
// clock at until.
func stepEvaluator(e *admitEnv, until time.Time) {
	ctx := context.Background()
	for now := e.clk.Now(); !now.After(until); now = e.clk.Now() {
		next := now.Add(SampleInterval)
		if due := e.m.Rules().Evaluate(ctx, now); !due.IsZero() && due.Before(next) {
			next = due
		}
		synctest.Wait()
		if next.After(until) {
			e.clk.Set(until)
			synctest.Wait()
			return
		}
		e.clk.Set(next)
	}
}

func TestEvaluatorBlockTime(t *testing.T) {
	tests := []struct {
		name string
		rule string
		// abortAt is when the held statement's wait is aborted (seconds
		// after it was held), 0 for never.
		abortAt float64
		// penalised reports whether the held statement ends up low class.
		penalised bool
	}{
		{name: "abort", rule: "blocktime=3, action=abort", abortAt: 3},
		{name: "abort with a unit", rule: "blocktime='2500ms'", abortAt: 2.5},
		{name: "penalty", rule: "blocktime=2, action=penalty", penalised: true},
		{name: "not reached", rule: "blocktime=60, action=abort"},
		{name: "elapsedtime does not apply to a held statement", rule: "elapsedtime=1, action=abort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAdmitEnv(t, "CREATE EXCEPT RULE r WITH ("+tt.rule+"); CREATE RESOURCE POOL p WITH (except_rule=r, active_statements=1); CREATE USER u RESOURCE POOL 'p'")
				if err := e.m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true}); err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				first := e.done(e.admit(ctx, e.begin("u")))
				held := e.begin("u")
				canc := &fakeCanceler{st: held, now: e.clk.Now}
				held.Session.SetCanceler(canc)
				heldAt := e.clk.Now()
				ch := e.admit(ctx, held)
				// A normal statement held 1.5 s later: a penalised one
				// goes after it. No rule reaches it by 3.4 s.
				stepEvaluator(e, heldAt.Add(1500*time.Millisecond))
				later := e.begin("u")
				chLater := e.admit(ctx, later)
				stepEvaluator(e, heldAt.Add(3400*time.Millisecond))
				if tt.abortAt > 0 {
					a := e.done(ch)
					ae := admitErr(t, a, `exception rule "r"`, nil)
					if ae.Rule != "r" {
						t.Errorf("AdmitError.Rule = %q, want r", ae.Rule)
					}
					if got := held.BlockTime(e.clk.Now()); got != time.Duration(tt.abortAt*float64(time.Second)) {
						t.Errorf("aborted after %v held, want %vs", got, tt.abortAt)
					}
					if canc.count() != 0 {
						t.Errorf("%d cancel requests for a held statement", canc.count())
					}
					if s := e.m.Rules().Stats(); s.Firings[FiringKey{"r", Abort}] != 1 {
						t.Errorf("firings %v", s.Firings)
					}
					if ex := held.Snapshot().Except; len(ex) != 1 || !strings.Contains(ex[0], "blocktime") {
						t.Errorf("except_info %q", ex)
					}
					first.release()
					e.done(chLater).release()
					return
				}
				e.waits(ch, held)
				if held.Penalized() != tt.penalised {
					t.Errorf("penalised = %v, want %v", held.Penalized(), tt.penalised)
				}
				first.release()
				if tt.penalised {
					e.waits(ch, held)
					e.done(chLater).release()
					e.done(ch).release()
				} else {
					e.waits(chLater, later)
					e.done(ch).release()
					e.done(chLater).release()
				}
				// (The elapsedtime rule fires on the running statement;
				// only the held one's record matters here.)
				if ex := held.Snapshot().Except; tt.penalised != (len(ex) == 1) || len(ex) > 1 {
					t.Errorf("held statement's except_info %q", ex)
				}
			})
		})
	}
}

// TestEvaluatorElapsedFromAdmission: elapsedtime counts from admission,
// and a blocktime rule leaves a running statement alone.
func TestEvaluatorElapsedFromAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAdmitEnv(t, `CREATE EXCEPT RULE slow WITH (elapsedtime=5, action=penalty); CREATE EXCEPT RULE queued WITH (blocktime=1, action=abort);
CREATE RESOURCE POOL p WITH (except_rule='slow,queued', active_statements=1); CREATE USER u RESOURCE POOL 'p'`)
		ctx := context.Background()
		first := e.done(e.admit(ctx, e.begin("u")))
		// Not held: the blocktime rule never applies to it.
		stepEvaluator(e, t0.Add(4*time.Second))
		if st := e.reg.Active()[0]; st.Penalized() || len(st.Snapshot().Except) != 0 {
			t.Fatalf("a running statement got %q", st.Snapshot().Except)
		}
		stepEvaluator(e, t0.Add(5*time.Second))
		if st := e.reg.Active()[0]; !st.Penalized() {
			t.Fatalf("elapsedtime did not fire at 5 s: %q", st.Snapshot().Except)
		}
		first.release()
		mustExec(t, e.m, "ALTER RESOURCE POOL p WITH (except_rule='slow')")

		// Held 3 s, then admitted: the penalty comes 5 s after admission.
		blocker := e.done(e.admit(ctx, e.begin("u")))
		heldAt := e.clk.Now()
		st := e.begin("u")
		ch := e.admit(ctx, st)
		stepEvaluator(e, heldAt.Add(3*time.Second))
		blocker.release()
		a := e.done(ch)
		stepEvaluator(e, heldAt.Add(7900*time.Millisecond))
		if st.Penalized() {
			t.Fatalf("penalised %v after admission, want 5 s", e.clk.Now().Sub(heldAt.Add(3*time.Second)))
		}
		stepEvaluator(e, heldAt.Add(8*time.Second))
		if !st.Penalized() {
			t.Fatalf("not penalised 5 s after admission: %q", st.Snapshot().Except)
		}
		a.release()
	})
}

// TestEvaluatorBlockAbortRace: a wait that ended before the abort acts
// (the statement was admitted) is noted, not cancelled.
func TestEvaluatorBlockAbortRace(t *testing.T) {
	r := session.NewRegistry(session.Options{})
	st := r.Open(session.Info{Route: "pg"}, t0).Begin("select 1", t0)
	ev := newEvaluator(nil, slog.New(slog.DiscardHandler), r, nil)
	if outcome, cancel := ev.act(firing{st: st, rule: "r", action: Abort, held: true, block: time.Second, info: "x"}); cancel || outcome != OutcomeAdmitted {
		t.Errorf("a held firing: outcome %q, cancel %v; want %q, no cancel request", outcome, cancel, OutcomeAdmitted)
	}
	if ex := st.Snapshot().Except; len(ex) != 2 || !strings.Contains(ex[1], "admitted before") {
		t.Errorf("except_info %q", ex)
	}
	var ae *AdmitError
	if err := error(blockAbort("r", 1500*time.Millisecond)); !errors.As(err, &ae) || ae.Code != sqlstate.QueryCanceled || !strings.Contains(ae.Message, `"r"`) || !strings.Contains(ae.Message, "1.5s") {
		t.Errorf("blockAbort = %v", err)
	}
}

// TestEvaluatorSkipsFailedWait: a statement whose wait failed (it will
// never run) is not checked against the running statements' rules.
func TestEvaluatorSkipsFailedWait(t *testing.T) {
	clk, reg, m := newEvalManager(t, "CREATE EXCEPT RULE slow WITH (elapsedtime=1, action=abort); CREATE RESOURCE POOL p WITH (except_rule=slow); CREATE USER u RESOURCE POOL 'p'")
	if err := m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true}); err != nil {
		t.Fatal(err)
	}
	s := openAs(reg, "pg", "u", t0)
	st := s.Begin("select 1", t0)
	canc := &fakeCanceler{st: st, now: clk.Now}
	s.SetCanceler(canc)
	st.Hold(t0, nopWait{})
	st.LeaveWait(t0.Add(time.Second))
	for range 10 {
		clk.Advance(time.Second)
		m.Rules().Evaluate(context.Background(), clk.Now())
	}
	if canc.count() != 0 || len(st.Snapshot().Except) != 0 {
		t.Errorf("a statement that never ran: %d cancels, except_info %q", canc.count(), st.Snapshot().Except)
	}
}

// nopWait is a wait that has already ended.
type nopWait struct{}

func (nopWait) Cancel(error) bool { return false }
func (nopWait) Demote() bool      { return false }

package wlm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/session"
)

// TestEvaluatorEndsIdleInTransaction, in virtual time: a session idle in
// a transaction holding a slot of a pool with idle_in_transaction=30s is
// ended once, with EndIdleInTransaction, at 30 s and not before (the
// pass says when it is due); the end is audited and counted. A session
// whose client began a request in time, or that holds no slot, is not
// ended.
func TestEvaluatorEndsIdleInTransaction(t *testing.T) {
	clk, reg, m := newEvalManager(t, "CREATE RESOURCE POOL p WITH (active_statements=1, idle_in_transaction=30)")
	ended := map[uint64]session.EndReason{}
	open := func(slot bool) *session.Session {
		s := openAs(reg, "pg", "u", t0)
		s.SetHooks(nil, func(r session.EndReason) { ended[s.ID] = r })
		if slot {
			s.TakeSlot("p", t0)
		}
		s.SetIdleInTransaction(t0)
		return s
	}
	idle, busy, noSlot := open(true), open(true), open(false)

	clk.Advance(10 * time.Second)
	if due := m.c.eval.evaluate(context.Background(), clk.Now()); !due.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("next due %v, want %v", due, t0.Add(30*time.Second))
	}
	if len(ended) != 0 {
		t.Fatalf("ended before the bound: %v", ended)
	}
	if !busy.LeaveIdle() {
		t.Fatal("LeaveIdle false before any end")
	}
	clk.Advance(20 * time.Second)
	m.c.eval.evaluate(context.Background(), clk.Now())
	if len(ended) != 1 || ended[idle.ID] != session.EndIdleInTransaction {
		t.Fatalf("ended %v, want session %d only, for idle in transaction", ended, idle.ID)
	}
	if idle.LeaveIdle() {
		t.Error("LeaveIdle true for a session ended for idling: its request would go upstream")
	}
	_ = noSlot
	m.c.eval.evaluate(context.Background(), clk.Now().Add(time.Second))
	if len(ended) != 1 {
		t.Fatalf("ended again: %v", ended)
	}
	if n := m.Rules().Stats().IdleInTransactionEnded["p"]; n != 1 {
		t.Errorf("IdleInTransactionEnded = %d, want 1", n)
	}
	var found bool
	for _, e := range m.Service().Audit() {
		if e.Surface == SurfaceWLM && strings.HasPrefix(e.Statement, "TERMINATE SESSION ") && strings.Contains(e.Statement, "idle in transaction for 30s") {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit entry: %v", m.Service().Audit())
	}
	// A stale idle time claims nothing.
	if busy.TerminateIdle(t0) {
		t.Error("TerminateIdle ended a session no longer idle since t0")
	}
}

package wlm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicelab/sluice/internal/admission"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// admitted is the outcome of one Manager.Admit run in a goroutine.
type admitted struct {
	release func()
	err     error
}

// admitEnv is a manager on a fake clock with helpers to start statements
// and run Admit, inside a synctest bubble: synctest.Wait returns once
// every Admit blocked or returned.
type admitEnv struct {
	t   *testing.T
	clk *clock.Fake
	reg *session.Registry
	m   *Manager
}

func newAdmitEnv(t *testing.T, ddl string) *admitEnv {
	clk, reg, m := newEvalManager(t, ddl)
	return &admitEnv{t: t, clk: clk, reg: reg, m: m}
}

// inAdmitBubble runs f in a synctest bubble on an admitEnv of a manager
// that ran ddl, with a background context.
func inAdmitBubble(t *testing.T, ddl string, f func(ctx context.Context, t *testing.T, e *admitEnv)) {
	synctest.Test(t, func(t *testing.T) {
		f(context.Background(), t, newAdmitEnv(t, ddl))
	})
}

// begin opens a session of user and begins a statement in it.
func (e *admitEnv) begin(user string) *session.Statement {
	s := openAs(e.reg, "pg", user, e.clk.Now())
	return s.Begin("select "+user, e.clk.Now())
}

// admit runs Admit(ctx, st) in a goroutine; its outcome is on the
// returned channel.
func (e *admitEnv) admit(ctx context.Context, st *session.Statement) <-chan admitted {
	ch := make(chan admitted, 1)
	go func() {
		r, err := e.m.Admission().Admit(ctx, st)
		ch <- admitted{r, err}
	}()
	synctest.Wait()
	return ch
}

// done returns the outcome on ch, failing if Admit still waits.
func (e *admitEnv) done(ch <-chan admitted) admitted {
	e.t.Helper()
	synctest.Wait()
	select {
	case a := <-ch:
		return a
	default:
		e.t.Fatal("Admit still waits")
	}
	return admitted{}
}

// onePool is the DDL of pool p with one slot, the pool of user u.
const onePool = "CREATE RESOURCE POOL p WITH (active_statements=1); CREATE USER u RESOURCE POOL 'p'"

// take begins a statement of user and returns its admission, failing
// unless Admit returns at once.
func (e *admitEnv) take(ctx context.Context, user string) admitted {
	e.t.Helper()
	return e.done(e.admit(ctx, e.begin(user)))
}

// hold begins a statement of user and runs Admit, failing unless the
// statement is held; its outcome comes on the returned channel.
func (e *admitEnv) hold(ctx context.Context, user string) (*session.Statement, <-chan admitted) {
	e.t.Helper()
	st := e.begin(user)
	ch := e.admit(ctx, st)
	e.waits(ch, st)
	return st, ch
}

// waits fails unless Admit on ch still waits.
func (e *admitEnv) waits(ch <-chan admitted, st *session.Statement) {
	e.t.Helper()
	synctest.Wait()
	select {
	case a := <-ch:
		e.t.Fatalf("Admit returned (%v), want it waiting", a.err)
	default:
	}
	if !st.Waiting() {
		e.t.Fatal("statement not waiting while Admit waits")
	}
}

// admitErr checks a failed admission: an *AdmitError with 57014, the
// message and a cause wrapping cause.
func admitErr(t *testing.T, a admitted, msg string, cause error) *AdmitError {
	t.Helper()
	var ae *AdmitError
	if !errors.As(a.err, &ae) || ae.Code != sqlstate.QueryCanceled || !strings.Contains(ae.Message, msg) || (cause != nil && !errors.Is(a.err, cause)) || a.release != nil {
		t.Fatalf("Admit = %v; want 57014 %q wrapping %v", a.err, msg, cause)
	}
	return ae
}

func (e *admitEnv) stats(pool string, running, waiting int) {
	e.t.Helper()
	if got := e.m.Admission().AdmissionStats()[pool]; got.Running != running || got.Waiting != waiting {
		e.t.Errorf("pool %s: %+v, want running %d waiting %d", pool, got, running, waiting)
	}
}

func TestAdmitNoLimit(t *testing.T) {
	e := newAdmitEnv(t, "CREATE RESOURCE POOL p; CREATE USER u RESOURCE POOL 'p'")
	for _, user := range []string{"u", "nobody"} {
		st := e.begin(user)
		release, err := e.m.Admission().Admit(context.Background(), st)
		if err != nil || release == nil {
			t.Fatalf("%s: Admit = %v", user, err)
		}
		release()
		release()
		if held, _ := st.HeldAt(); !held.IsZero() || st.ExecStarted() != st.Started {
			t.Errorf("%s: a statement of an unlimited pool was held", user)
		}
	}
	if got := e.m.Admission().AdmissionStats(); len(got) != 0 {
		t.Errorf("AdmissionStats = %v, want none", got)
	}
}

func TestAdmitHoldRelease(t *testing.T) {
	inAdmitBubble(t, onePool, func(ctx context.Context, t *testing.T, e *admitEnv) {
		st1 := e.begin("u")
		a1 := e.done(e.admit(ctx, st1))
		if a1.err != nil {
			t.Fatal(a1.err)
		}
		if held, _ := st1.HeldAt(); !held.IsZero() {
			t.Error("a statement admitted at once was held")
		}
		st2, ch2 := e.hold(ctx, "u")
		e.stats("p", 1, 1)
		e.clk.Advance(2 * time.Second)
		if got := st2.BlockTime(e.clk.Now()); got != 2*time.Second {
			t.Errorf("block time while held = %v, want 2s", got)
		}
		if snap := st2.Snapshot(); !snap.Waiting || snap.BlockTime(e.clk.Now()) != 2*time.Second {
			t.Errorf("snapshot while held: waiting %v, block %v", snap.Waiting, snap.BlockTime(e.clk.Now()))
		}
		a1.release()
		a2 := e.done(ch2)
		if a2.err != nil {
			t.Fatal(a2.err)
		}
		a1.release() // twice: frees nothing more
		e.stats("p", 1, 0)
		e.clk.Advance(time.Second)
		if st2.Waiting() || st2.BlockTime(e.clk.Now()) != 2*time.Second || !st2.ExecStarted().Equal(t0.Add(2*time.Second)) {
			t.Errorf("after admission: waiting %v, block %v, exec started %v", st2.Waiting(), st2.BlockTime(e.clk.Now()), st2.ExecStarted())
		}
		h := e.m.Admission().BlockTimes()["p"]
		if h.Count != 1 || h.Sum != 2 {
			t.Errorf("block-time histogram of p = %+v, want one 2 s observation", h)
		}
		a2.release()
		e.stats("p", 0, 0)
	})
}

func TestAdmitFailures(t *testing.T) {
	inAdmitBubble(t, onePool, func(ctx context.Context, t *testing.T, e *admitEnv) {
		a1 := e.take(ctx, "u")

		// A cancel request for a held statement ends its wait; the
		// server is not asked.
		st := e.begin("u")
		canc := &fakeCanceler{st: st, now: e.clk.Now}
		st.Session.SetCanceler(canc)
		ch := e.admit(ctx, st)
		e.waits(ch, st)
		if err := e.reg.Cancel(ctx, st); err != nil {
			t.Fatal(err)
		}
		admitErr(t, e.done(ch), MsgUserCancel, session.ErrCancelRequested)
		if st.Waiting() {
			t.Error("a cancelled statement still waits")
		}
		if canc.count() != 0 {
			t.Errorf("%d cancel requests sent for a held statement", canc.count())
		}

		// The pool's queue_timeout.
		mustExec(t, e.m, "ALTER RESOURCE POOL p WITH (queue_timeout=5)")
		st = e.begin("u")
		ch = e.admit(ctx, st)
		e.clk.Advance(4999 * time.Millisecond)
		e.waits(ch, st)
		e.clk.Advance(time.Millisecond)
		admitErr(t, e.done(ch), MsgQueueTimeout, admission.ErrQueueTimeout)
		if st.Waiting() || st.BlockTime(e.clk.Now()) != 0 && st.Outcome() != session.Running {
			t.Errorf("after the timeout: waiting %v", st.Waiting())
		}

		// The caller's context.
		cctx, cancel := context.WithCancel(ctx)
		_, ch = e.hold(cctx, "u")
		cancel()
		admitErr(t, e.done(ch), MsgSessionEnded, context.Canceled)

		// The session closing.
		st, ch = e.hold(ctx, "u")
		st.Session.Close(e.clk.Now())
		admitErr(t, e.done(ch), MsgSessionEnded, session.ErrEndedWhileWaiting)

		// None of them holds a slot.
		e.stats("p", 1, 0)
		a1.release()
		e.stats("p", 0, 0)
	})
}

func TestAdmitReconfigure(t *testing.T) {
	inAdmitBubble(t, onePool, func(ctx context.Context, t *testing.T, e *admitEnv) {
		first := e.take(ctx, "u")
		var sts []*session.Statement
		var chs []<-chan admitted
		for range 4 {
			st := e.begin("u")
			sts = append(sts, st)
			chs = append(chs, e.admit(ctx, st))
		}
		e.stats("p", 1, 4)
		// Raising the limit admits waiters at once, in arrival order.
		mustExec(t, e.m, "ALTER RESOURCE POOL p WITH (active_statements=3)")
		a0, a1 := e.done(chs[0]), e.done(chs[1])
		e.waits(chs[2], sts[2])
		e.waits(chs[3], sts[3])
		// Lowering it lets the running ones finish.
		mustExec(t, e.m, "ALTER RESOURCE POOL p WITH (active_statements=1)")
		e.stats("p", 3, 2)
		first.release()
		a0.release()
		e.waits(chs[2], sts[2])
		a1.release()
		a2 := e.done(chs[2])
		e.waits(chs[3], sts[3])
		// Unlimited admits everyone.
		mustExec(t, e.m, "ALTER RESOURCE POOL p WITH (active_statements=-1)")
		a3 := e.done(chs[3])
		a2.release()
		a3.release()
		if err := chs[0]; err == nil {
			t.Fatal("unreachable")
		}
	})
}

func TestAdmitClassOrder(t *testing.T) {
	// Pools on one link of max_active_statements 1: the high pool's
	// waiter goes first, then normal ones by arrival, then the
	// penalised one and the low pool's.
	inAdmitBubble(t, `ALTER LINK default WITH (max_active_statements=1);
CREATE RESOURCE POOL hi WITH (network_priority=high); CREATE RESOURCE POOL lo WITH (network_priority=low); CREATE RESOURCE POOL mid;
CREATE USER h RESOURCE POOL 'hi'; CREATE USER l RESOURCE POOL 'lo'; CREATE USER n RESOURCE POOL 'mid'`, func(ctx context.Context, t *testing.T, e *admitEnv) {
		run := e.done(e.admit(ctx, e.begin("n")))
		order := []string{"l", "pen", "n", "h", "none"}
		chs := map[string]<-chan admitted{}
		sts := map[string]*session.Statement{}
		for _, who := range order {
			user := who
			if who == "pen" {
				user = "n"
			}
			st := e.begin(user)
			if who == "pen" {
				st.Penalize("test")
			}
			sts[who] = st
			chs[who] = e.admit(ctx, st)
		}
		for _, want := range []string{"h", "n", "none", "l", "pen"} {
			run.release()
			for _, who := range order {
				if who == want {
					run = e.done(chs[who])
					if run.err != nil {
						t.Fatalf("%s: %v", who, run.err)
					}
					delete(chs, who)
				} else if chs[who] != nil {
					e.waits(chs[who], sts[who])
				}
			}
		}
		run.release()
	})
}

func TestAdmitNoLimitAllocs(t *testing.T) {
	e := newAdmitEnv(t, "CREATE RESOURCE POOL p; CREATE USER u RESOURCE POOL 'p'")
	st := e.begin("u")
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() {
		r, _ := e.m.Admission().Admit(ctx, st)
		r()
	})
	if n != 0 {
		t.Errorf("Admit of an unlimited pool allocates %v times", n)
	}
}

func BenchmarkAdmit(b *testing.B) {
	for _, tt := range []struct{ name, ddl string }{
		{"unlimited", "CREATE RESOURCE POOL p; CREATE USER u RESOURCE POOL 'p'"},
		{"free_slot", "CREATE RESOURCE POOL p WITH (active_statements=1000); CREATE USER u RESOURCE POOL 'p'"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			reg := session.NewRegistry(session.Options{})
			m, err := NewManager(ManagerOptions{Registry: reg, Clock: clock.NewFake(t0)})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if _, err := m.Service().Exec(context.Background(), tt.ddl); err != nil {
				b.Fatal(err)
			}
			st := openAs(reg, "pg", "u", t0).Begin("select 1", t0)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				r, err := m.Admission().Admit(ctx, st)
				if err != nil {
					b.Fatal(err)
				}
				r()
			}
		})
	}
}

package wlm

// This file holds admission: Admission.Admit, which holds a statement
// until its pool (and link) has a free slot, and the errors it fails
// with.

import (
	"context"
	"errors"
	"time"

	"github.com/sluicelab/sluice/internal/admission"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// Messages of failed admissions, as the client reads them.
const (
	MsgUserCancel   = "canceling statement due to user request"
	MsgQueueTimeout = "canceling statement due to statement queue timeout"
	MsgSessionEnded = "canceling statement: the session ended while it waited for admission"
)

// AdmitError is why Admission.Admit did not admit a statement. The wire
// answers the client with Code and Message; the held statement never
// reached the server.
type AdmitError struct {
	Code    string // SQLSTATE; always sqlstate.QueryCanceled
	Message string // the client's error message
	// Rule is the exception rule whose blocktime abort ended the wait, ""
	// for other causes.
	Rule string
	// Err is the cause: session.ErrCancelRequested,
	// admission.ErrQueueTimeout, a context's cause, ...
	Err error
}

// Error returns "57014: message".
func (e *AdmitError) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the cause.
func (e *AdmitError) Unwrap() error { return e.Err }

// SQLState returns Code.
func (e *AdmitError) SQLState() string { return e.Code }

// blockAbort is the cause the evaluator cancels a wait with when an
// abort rule's blocktime is passed.
func blockAbort(rule string, held time.Duration) *AdmitError {
	return &AdmitError{
		Code:    sqlstate.QueryCanceled,
		Message: "canceling statement due to exception rule \"" + rule + "\": blocked for " + held.Round(time.Millisecond).String() + " waiting for admission",
		Rule:    rule,
	}
}

// admitError maps the error of admission.Controller.Acquire to an
// *AdmitError.
func admitError(err error) *AdmitError {
	var ae *AdmitError
	switch {
	case errors.As(err, &ae):
		return &AdmitError{Code: ae.Code, Message: ae.Message, Rule: ae.Rule, Err: err}
	case errors.Is(err, admission.ErrQueueTimeout):
		return &AdmitError{Code: sqlstate.QueryCanceled, Message: MsgQueueTimeout, Err: err}
	case errors.Is(err, session.ErrCancelRequested):
		return &AdmitError{Code: sqlstate.QueryCanceled, Message: MsgUserCancel, Err: err}
	}
	return &AdmitError{Code: sqlstate.QueryCanceled, Message: MsgSessionEnded, Err: err}
}

// noRelease is the release of a statement admitted without a slot.
func noRelease() {}

// Admit admits st to execution under its pool's active_statements and
// its link's max_active_statements. When neither is set it returns at
// once, with a release that does nothing and without touching st (the
// common path: no lock, no allocation). Otherwise it takes a slot,
// holding st (session.Statement.Hold) while it waits, and marks st
// admitted; release frees the slot and is safe to call twice. The wait
// ends with an *AdmitError (SQLSTATE 57014) when ctx is done, when the
// pool's queue_timeout passes, when st is cancelled (Registry.Cancel, a
// blocktime abort rule) or when st ends. Manager.mu is never held while
// waiting: the pool and its limits are read from the current catalog,
// one atomic load.
//
// The pool is the one the session binds to now (its user's binding or
// its route's default pool), the class the pool's network_priority, or
// low when the statement or its session is penalised; a penalised
// waiter is admitted after the normal and high ones.
func (m *Admission) Admit(ctx context.Context, st *session.Statement) (release func(), err error) {
	req, limited := m.request(st)
	if !limited {
		return noRelease, nil
	}
	pool := req.Pool
	if slot, ok := m.adm.TryAcquire(req); ok {
		return m.held(st.Session, pool, slot), nil
	}
	req.OnWait = func(w *admission.Waiter) {
		st.Hold(m.clk.Now(), w)
		if st.Outcome() != session.Running {
			w.Cancel(session.ErrEndedWhileWaiting)
		}
	}
	slot, err := m.adm.Acquire(ctx, req)
	if err != nil {
		st.LeaveWait(m.clk.Now())
		m.observeBlock(pool, st)
		return nil, admitError(err)
	}
	st.Admit(m.clk.Now())
	m.observeBlock(pool, st)
	return m.held(st.Session, pool, slot), nil
}

// held records on sess that it holds slot of pool (session.Slot, which
// the views show and the idle_in_transaction check reads), and returns
// the release that gives it back and clears the record.
func (m *core) held(sess *session.Session, pool string, slot *admission.Slot) (release func()) {
	token := sess.TakeSlot(pool, m.clk.Now())
	return func() {
		sess.DropSlot(token)
		slot.Release()
	}
}

// Limits implements wire.Limiter: whether a statement of sess would
// take a slot under its pool's active_statements or its link's
// max_active_statements now.
func (m *Admission) Limits(sess *session.Session) bool {
	_, _, limited := m.limits(sess)
	return limited
}

// request is the admission request of st, and whether its pool or link
// limits it at all.
func (m *core) request(st *session.Statement) (admission.Request, bool) {
	sess := st.Session
	p, ln, limited := m.limits(sess)
	if !limited {
		return admission.Request{}, false
	}
	req := admission.Request{Pool: p.name, Group: ln, Class: admissionClass(p.def, sess.Penalized() || st.Penalized())}
	if p.def != nil {
		req.Timeout = p.def.QueueTimeout
	}
	return req, true
}

// boundPool is a session's pool by name, with its definition (nil when
// the catalog has none of that name).
type boundPool struct {
	name string
	def  *Pool
}

// limits returns the pool sess binds to now, the link group that limits
// it ("" when none does) and whether either limits its statements.
func (m *core) limits(sess *session.Session) (boundPool, string, bool) {
	cur := m.state.Load()
	r, ok := cur.routes[sess.Info.Route]
	pool := cur.poolOf(r, sess.User())
	ln := sess.Info.Link
	if ok || ln == "" {
		ln = r.linkName()
	}
	p := cur.cat.Pools[pool]
	limited := p != nil && p.ActiveStatements > 0
	if d := cur.cat.Links[ln]; d != nil && d.MaxActiveStatements > 0 {
		limited = true
	} else {
		ln = ""
	}
	return boundPool{name: pool, def: p}, ln, limited
}

// TryAdmit implements wire.TryAdmitter: it admits st as Admit does when
// that needs no wait (the pool and link have no limit, or a slot is free)
// and otherwise takes nothing.
func (m *Admission) TryAdmit(st *session.Statement) (release func(), ok bool) {
	req, limited := m.request(st)
	if !limited {
		return noRelease, true
	}
	if slot, ok := m.adm.TryAcquire(req); ok {
		return m.held(st.Session, req.Pool, slot), true
	}
	return nil, false
}

// admissionClass is the admission class of a statement of pool p: Low
// once penalised, else the pool's network priority (Normal without a
// pool).
func admissionClass(p *Pool, penalized bool) link.Class {
	switch {
	case penalized:
		return link.Low
	case p == nil:
		return link.Normal
	}
	return p.Priority
}

// admissionLimits are the controller's limits for catalog c.
func admissionLimits(c *Catalog) admission.Limits {
	l := admission.Limits{Pools: map[string]int{}, Groups: map[string]int{}}
	for name, p := range c.Pools {
		if p.ActiveStatements > 0 {
			l.Pools[name] = p.ActiveStatements
		}
	}
	for name, d := range c.Links {
		if d.MaxActiveStatements > 0 {
			l.Groups[name] = d.MaxActiveStatements
		}
	}
	return l
}

// AdmissionStats returns the running and waiting statements of every
// pool that has a limit or holds slots.
func (m *Admission) AdmissionStats() map[string]admission.PoolStats { return m.adm.Pools() }

// admissionCounts returns the running and waiting statements by pool
// for the views.
func (m *core) admissionCounts() map[string]views.Admission {
	st := m.adm.Pools()
	out := make(map[string]views.Admission, len(st))
	for k, v := range st {
		out[k] = views.Admission{Running: v.Running, Waiting: v.Waiting}
	}
	return out
}

// observeBlock records the block time of a statement that was held
// (nothing for one admitted at once).
func (m *core) observeBlock(pool string, st *session.Statement) {
	snap := st.Snapshot()
	if snap.Held.IsZero() {
		return
	}
	m.blocks.observe(pool, snap.BlockTime(m.clk.Now()))
}

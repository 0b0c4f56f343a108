package wlm

// This file acts on sessions from the admin console: cancel a session's
// running statement, end a session. Both are in the audit trail, with the
// Actor ctx carries, as "CANCEL STATEMENT id" and "TERMINATE SESSION id".

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// CancelSession asks the database to cancel the running statement of
// session id (the newest, if it runs several) through the path an abort
// rule takes: the session's canceler (a PostgreSQL cancel request, a
// MySQL KILL QUERY with the route's kill credentials), bounded by
// CancelTimeout. It reports false, with no error, when there is no such
// session or it runs no statement; an error when the cancel request
// failed or the route cannot cancel.
func (m *Runtime) CancelSession(ctx context.Context, id uint64) (done bool, err error) {
	defer func() { m.recordSessionCommand(ctx, "CANCEL STATEMENT", id, done, err) }()
	s := m.reg.Session(id)
	if s == nil {
		return false, nil
	}
	act := s.Active()
	if len(act) == 0 {
		return false, nil
	}
	st := act[len(act)-1]
	cctx, stop := clock.WithTimeout(ctx, m.clk, CancelTimeout, errCancelTimeout)
	defer stop()
	if err := m.reg.Cancel(cctx, st); err != nil {
		if errors.Is(err, session.ErrNotRunning) {
			return false, nil
		}
		return false, fmt.Errorf("cancel session %d: %w", id, err)
	}
	st.NoteException("cancelled from the admin console")
	m.log.Info("statement cancelled from the admin console", "session", id, "statement", st.ID)
	return true, nil
}

// TerminateSession ends session id as an administrator's command: the
// client reads its protocol's message for it (PostgreSQL FATAL 57P01,
// MySQL ERR 1927) and both connections close. A statement still running
// is then cancelled on the server, as CancelSession does, so the server
// does not work on for a client that is gone (PostgreSQL notices a
// closed client only when it next writes to it). It reports false when
// there is no such open session or its route cannot end it.
func (m *Runtime) TerminateSession(ctx context.Context, id uint64) (done bool) {
	defer func() { m.recordSessionCommand(ctx, "TERMINATE SESSION", id, done, nil) }()
	s := m.reg.Session(id)
	if s == nil {
		return false
	}
	running := len(s.Active()) > 0
	c := s.Canceler()
	if !s.Terminate() {
		return false
	}
	m.log.Info("session terminated from the admin console", "session", id)
	if running && c != nil {
		cctx, stop := clock.WithTimeout(ctx, m.clk, CancelTimeout, errCancelTimeout)
		defer stop()
		if err := c.Cancel(cctx); err != nil {
			m.log.Warn("could not cancel the statement of a terminated session", "session", id, "err", err)
		}
	}
	return true
}

// errNothingToDo is the audit trail's outcome of a session command that
// found no session, or no statement, to act on: 42704, the code the
// console's CANCEL STATEMENT and TERMINATE SESSION answer with then.
var errNothingToDo = &ddl.Error{Code: sqlstate.UndefinedObject, Message: "no such session, or nothing to act on"}

// recordSessionCommand puts a session command in the audit trail: ok when
// done, else err, or errNothingToDo.
func (m *core) recordSessionCommand(ctx context.Context, command string, id uint64, done bool, err error) {
	if !done && err == nil {
		err = errNothingToDo
	}
	m.record(ctx, fmt.Sprintf("%s %d", command, id), err)
}

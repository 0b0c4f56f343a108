package session

// This file holds the Statement: one command of a session from Begin to
// End, its bytes, its outcome and what was done to it.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/enum"
)

// Outcome is how a statement ended.
type Outcome uint8

// Outcomes. Running is the zero value.
const (
	Running Outcome = iota
	OK
	Failed
	Cancelled
)

var outcomeNames = []string{Running: "running", OK: "ok", Failed: "error", Cancelled: "cancelled"}

// String returns "running", "ok", "error" or "cancelled", or "outcome(N)"
// for an invalid outcome.
func (o Outcome) String() string { return enum.Name(outcomeNames, int(o), "outcome") }

// server's final answer.
type Statement struct {
	ID      uint64
	Session *Session
	SQL     string // as Begin got it, with its password literals hidden
	Started time.Time

	bytesUp         atomic.Int64
	bytesDown       atomic.Int64
	cancelRequested atomic.Bool

	mu        sync.Mutex
	ended     time.Time // guarded by mu
	outcome   Outcome   // guarded by mu
	rows      int64     // guarded by mu; -1 when not reported
	code      string    // guarded by mu; SQLSTATE or server error code
	penalized bool      // guarded by mu
	except    []string  // guarded by mu; rule firings
}

// AddUp counts n client bytes for the statement.
func (st *Statement) AddUp(n int) { st.bytesUp.Add(int64(n)) }

// AddDown counts n server bytes for the statement.
func (st *Statement) AddDown(n int) { st.bytesDown.Add(int64(n)) }

// BytesUp returns the client bytes counted so far.
func (st *Statement) BytesUp() int64 { return st.bytesUp.Load() }

// BytesDown returns the server bytes counted so far.
func (st *Statement) BytesDown() int64 { return st.bytesDown.Load() }

// Bytes returns the bytes counted both ways.
func (st *Statement) Bytes() int64 { return st.bytesUp.Load() + st.bytesDown.Load() }

// CancelRequested reports whether Registry.Cancel was called for st.
func (st *Statement) CancelRequested() bool { return st.cancelRequested.Load() }

// End records the outcome. rows is -1 when the server did not report a
// count; code is the SQLSTATE (or MySQL error number) of a failure. Only
// the first End counts.
func (st *Statement) End(now time.Time, o Outcome, rows int64, code string) {
	st.mu.Lock()
	if st.outcome != Running {
		st.mu.Unlock()
		return
	}
	if o == Running {
		o = OK
	}
	st.ended, st.outcome, st.rows, st.code = now, o, rows, code
	pen := st.penalized
	st.mu.Unlock()
	s := st.Session
	if pen {
		s.penalized.Add(-1)
	}
	s.mu.Lock()
	for i, x := range s.active {
		if x == st {
			// Remove in place: the slice's array is reused by the next
			// Begin, so a session allocates nothing per statement for it.
			n := copy(s.active[i:], s.active[i+1:])
			s.active[i+n] = nil
			s.active = s.active[:i+n]
			break
		}
	}
	s.mu.Unlock()
	s.reg.ended(st)
}

// Outcome returns Running until the statement has ended.
func (st *Statement) Outcome() Outcome {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.outcome
}

// Penalize moves the statement's traffic to the low class until it ends
// and records why. It reports whether this call penalised it (false if it
// already was, or has ended).
func (st *Statement) Penalize(reason string) bool {
	st.mu.Lock()
	if st.penalized || st.outcome != Running {
		st.mu.Unlock()
		return false
	}
	st.penalized = true
	st.except = append(st.except, reason)
	st.mu.Unlock()
	st.Session.penalized.Add(1)
	st.Session.reg.emit(Event{Kind: StatementPenalized, Session: st.Session, Statement: st})
	return true
}

// NoteException appends a rule firing to the statement's except_info.
func (st *Statement) NoteException(info string) {
	st.mu.Lock()
	st.except = append(st.except, info)
	st.mu.Unlock()
}

// Snapshot is a consistent copy of a statement's state for display.
type Snapshot struct {
	ID        uint64
	SessionID uint64
	User      string
	Pool      string
	Route     string
	SQL       string
	Started   time.Time
	Ended     time.Time // zero while running
	Outcome   Outcome
	Rows      int64 // -1 when not reported
	Code      string
	BytesUp   int64
	BytesDown int64
	Penalized bool
	Except    []string
}

// Snapshot copies the statement's state.
func (st *Statement) Snapshot() Snapshot {
	s := st.Session
	st.mu.Lock()
	snap := Snapshot{
		ID: st.ID, SessionID: s.ID, SQL: st.SQL, Started: st.Started,
		Ended: st.ended, Outcome: st.outcome, Rows: st.rows, Code: st.code,
		Penalized: st.penalized, Except: append([]string(nil), st.except...),
		BytesUp: st.bytesUp.Load(), BytesDown: st.bytesDown.Load(),
	}
	st.mu.Unlock()
	snap.User, snap.Pool, snap.Route = s.User(), s.Pool(), s.Info.Route
	return snap
}

package session

// This file holds the Statement: one command of a session from Begin to
// End, its bytes, its outcome and what was done to it.

import (
	"cmp"
	"errors"
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
	// Parent is the coordinator statement a shard statement works for
	// (Session.Link), nil for any other. Set by Begin; immutable.
	Parent *Statement

	bytesUp         atomic.Int64
	bytesDown       atomic.Int64
	cancelRequested atomic.Bool
	node            *node // nil, or the root's counter of its route; immutable

	mu        sync.Mutex
	ended     time.Time // guarded by mu
	outcome   Outcome   // guarded by mu
	rows      int64     // guarded by mu; -1 when not reported
	code      string    // guarded by mu; SQLSTATE or server error code
	penalized bool      // guarded by mu
	except    []string  // guarded by mu; rule firings
	held      time.Time // guarded by mu; when Hold ran, zero if never held
	admitted  time.Time // guarded by mu; when Admit ran after Hold
	left      time.Time // guarded by mu; when LeaveWait ran after Hold
	wait      Wait      // guarded by mu; non-nil while waiting
	nodes     []*node   // guarded by mu; a root's shard routes, in order of their first statement
}

// node counts the bytes a distributed statement's shard statements of
// one route moved; the counters are atomics, route is immutable.
type node struct {
	route      string
	statements atomic.Int64
	up, down   atomic.Int64
}

// NodeBytes is what a distributed statement's shard statements moved
// on one route (a node of the distributed query).
type NodeBytes struct {
	Route      string
	Statements int64 // shard statements begun on the route
	BytesUp    int64 // to the shard
	BytesDown  int64 // from the shard
}

// root returns the top of st's Parent chain (st itself for a statement
// without a parent): the distributed statement whose totals its bytes
// count in.
func (st *Statement) root() *Statement {
	for st.Parent != nil {
		st = st.Parent
	}
	return st
}

// nodeOf returns the root statement st's counter of route, made on first
// use, and counts one more shard statement in it.
func (st *Statement) nodeOf(route string) *node {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, n := range st.nodes {
		if n.route == route {
			n.statements.Add(1)
			return n
		}
	}
	n := &node{route: route}
	n.statements.Add(1)
	st.nodes = append(st.nodes, n)
	return n
}

// Wait is how a held statement's wait for admission is ended or changed
// from outside (admission.Waiter implements it). Its methods must be
// safe for concurrent use and must not block.
type Wait interface {
	// Cancel ends the wait with err; false when it had ended already.
	Cancel(err error) bool
	// Demote makes the waiter wait as low class.
	Demote() bool
}

// ErrCancelRequested is the cause a held statement's wait ends with when
// Registry.Cancel cancels it (a client's cancel request, the console's
// CANCEL).
var ErrCancelRequested = errors.New("canceling statement due to user request")

// ErrEndedWhileWaiting is the cause a held statement's wait ends with
// when the statement ends first (its session closed).
var ErrEndedWhileWaiting = errors.New("statement ended while waiting for admission")

// Hold marks the statement as waiting for admission from now: its
// request bytes are held by the proxy until Admit. w ends or demotes the
// wait (CancelWait, Penalize). A statement that has ended, or was held
// already, is not held again.
func (st *Statement) Hold(now time.Time, w Wait) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.outcome != Running || !st.held.IsZero() {
		return
	}
	st.held, st.wait = now, w
}

// Admit marks a held statement as admitted at now: its block time stops
// and its elapsed time starts. It does nothing to a statement that is
// not waiting.
func (st *Statement) Admit(now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wait == nil {
		return
	}
	st.admitted, st.wait = now, nil
}

// LeaveWait records that a held statement's wait failed at now
// (cancelled, timed out): its block time stops there, and it never
// runs. It does nothing to a statement never held, admitted or ended.
func (st *Statement) LeaveWait(now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.held.IsZero() || !st.admitted.IsZero() || !st.left.IsZero() || !st.ended.IsZero() {
		return
	}
	st.left, st.wait = now, nil
}

// Waiting reports whether the statement is held, waiting for admission.
func (st *Statement) Waiting() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.wait != nil
}

// HeldAt returns when the statement was held (zero if never) and
// whether it is waiting still.
func (st *Statement) HeldAt() (held time.Time, waiting bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.held, st.wait != nil
}

// BlockTime returns how long the statement was (or, at now, has been)
// held waiting for admission; 0 if it never was.
func (st *Statement) BlockTime(now time.Time) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	return blockTime(st.held, cmp.Or(st.admitted, st.left), st.ended, st.wait != nil, now)
}

// blockTime is the time held: from held to unheld (admitted, or the
// wait left), to the end of a statement that ended while held, or to now
// while held.
func blockTime(held, unheld, ended time.Time, waiting bool, now time.Time) time.Duration {
	switch {
	case held.IsZero():
		return 0
	case waiting:
		return max(now.Sub(held), 0)
	case !unheld.IsZero():
		return unheld.Sub(held)
	case !ended.IsZero():
		return max(ended.Sub(held), 0)
	}
	return 0
}

// ExecStarted returns when the statement began to execute: when it was
// admitted if it was held, else when it began; the zero time while it
// waits, and for a statement that ended while held (it never ran). Elapsed time counts from it (as in GaussDB, where elapsed time
// is execution time and block time the time queued).
func (st *Statement) ExecStarted() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	return execStarted(st.Started, st.held, st.admitted, st.wait != nil)
}

func execStarted(started, held, admitted time.Time, waiting bool) time.Time {
	switch {
	case held.IsZero():
		return started
	case waiting:
		return time.Time{}
	}
	return admitted // zero for one that ended while held
}

// neverRan reports whether the statement was held and left its wait
// without admission.
func (st *Statement) neverRan() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.held.IsZero() && st.wait == nil && st.admitted.IsZero()
}

// CancelWait ends a held statement's wait with err (the caller of the
// wait gets an error wrapping it). It reports whether the statement was
// waiting and is now cancelled; false when it was never held, was
// admitted or has ended.
func (st *Statement) CancelWait(err error) bool {
	st.mu.Lock()
	w := st.wait
	st.mu.Unlock()
	if w == nil {
		return false
	}
	if !w.Cancel(err) {
		return false
	}
	st.mu.Lock()
	if st.wait == w {
		st.wait = nil
	}
	st.mu.Unlock()
	return true
}

// AddUp counts n client bytes for the statement (and, for a shard
// statement, for its root's node).
func (st *Statement) AddUp(n int) {
	st.bytesUp.Add(int64(n))
	if st.node != nil {
		st.node.up.Add(int64(n))
	}
}

// AddDown counts n server bytes for the statement (and, for a shard
// statement, for its root's node).
func (st *Statement) AddDown(n int) {
	st.bytesDown.Add(int64(n))
	if st.node != nil {
		st.node.down.Add(int64(n))
	}
}

// BytesUp returns the client bytes counted so far.
func (st *Statement) BytesUp() int64 { return st.bytesUp.Load() }

// BytesDown returns the server bytes counted so far.
func (st *Statement) BytesDown() int64 { return st.bytesDown.Load() }

// Bytes returns the bytes counted both ways.
func (st *Statement) Bytes() int64 { return st.bytesUp.Load() + st.bytesDown.Load() }

// Nodes returns what the statement's shard statements moved, per route,
// in order of each route's first shard statement; none for a statement
// that is not the root of a distributed statement.
func (st *Statement) Nodes() []NodeBytes {
	st.mu.Lock()
	defer st.mu.Unlock()
	return nodeBytes(st.nodes)
}

func nodeBytes(nodes []*node) []NodeBytes {
	if len(nodes) == 0 {
		return nil
	}
	out := make([]NodeBytes, len(nodes))
	for i, n := range nodes {
		out[i] = NodeBytes{Route: n.route, Statements: n.statements.Load(), BytesUp: n.up.Load(), BytesDown: n.down.Load()}
	}
	return out
}

// TotalBytes returns the statement's distributed bytes, both ways: its
// own and every shard statement's under it (every level of its Parent
// chain below it). For a statement that is not a distributed root it is
// Bytes.
func (st *Statement) TotalBytes() int64 {
	total := st.Bytes()
	st.mu.Lock()
	for _, n := range st.nodes {
		total += n.up.Load() + n.down.Load()
	}
	st.mu.Unlock()
	return total
}

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
	w := st.wait
	st.wait = nil
	st.mu.Unlock()
	if w != nil {
		// A statement that ends while held (its session closed) leaves
		// the queue at once.
		w.Cancel(ErrEndedWhileWaiting)
	}
	s := st.Session
	if pen {
		s.penalized.Add(-1)
	}
	s.mu.Lock()
	if w == nil {
		s.lastRan = st
	}
	for i, x := range s.active {
		if x == st {
			// Remove in place: the slice's array is reused by the next
			// Begin, so a session allocates nothing per statement for it.
			n := copy(s.active[i:], s.active[i+1:])
			s.active[i+n] = nil
			s.active = s.active[:i+n]
			s.running.Store(int32(len(s.active)))
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
// and records why; a held statement waits for admission as low class
// too. It reports whether this call penalised it (false if it already
// was, or has ended).
func (st *Statement) Penalize(reason string) bool {
	st.mu.Lock()
	if st.penalized || st.outcome != Running {
		st.mu.Unlock()
		return false
	}
	st.penalized = true
	st.except = append(st.except, reason)
	w := st.wait
	st.mu.Unlock()
	if w != nil {
		w.Demote()
	}
	st.Session.penalized.Add(1)
	st.Session.reg.emit(Event{Kind: StatementPenalized, Session: st.Session, Statement: st})
	return true
}

// Penalized reports whether the statement was penalised.
func (st *Statement) Penalized() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.penalized
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
	Waiting   bool      // held, waiting for admission
	Held      time.Time // when it was held; zero if never
	Admitted  time.Time // when it was admitted after being held; zero otherwise
	Left      time.Time // when its wait failed (LeaveWait); zero otherwise
	ParentID  uint64    // the Parent's ID; 0 for none
	// Nodes are the shard statements' bytes per route (Statement.Nodes);
	// TotalUp and TotalDown are BytesUp and BytesDown plus theirs.
	Nodes              []NodeBytes
	TotalUp, TotalDown int64
}

// BlockTime is Statement.BlockTime as of the snapshot, at now.
func (s Snapshot) BlockTime(now time.Time) time.Duration {
	return blockTime(s.Held, cmp.Or(s.Admitted, s.Left), s.Ended, s.Waiting, now)
}

// ExecStarted is Statement.ExecStarted as of the snapshot.
func (s Snapshot) ExecStarted() time.Time {
	return execStarted(s.Started, s.Held, s.Admitted, s.Waiting)
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
		Waiting: st.wait != nil, Held: st.held, Admitted: st.admitted, Left: st.left,
		Nodes: nodeBytes(st.nodes),
	}
	st.mu.Unlock()
	if st.Parent != nil {
		snap.ParentID = st.Parent.ID
	}
	snap.TotalUp, snap.TotalDown = snap.BytesUp, snap.BytesDown
	for _, n := range snap.Nodes {
		snap.TotalUp += n.BytesUp
		snap.TotalDown += n.BytesDown
	}
	snap.User, snap.Pool, snap.Route = s.User(), s.Pool(), s.Info.Route
	return snap
}

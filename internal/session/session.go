package session

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/redact"
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

func (o Outcome) String() string {
	switch o {
	case Running:
		return "running"
	case OK:
		return "ok"
	case Failed:
		return "error"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Canceler cancels the statement a session is running, through the
// database protocol (PostgreSQL CancelRequest, MySQL KILL QUERY).
type Canceler interface {
	Cancel(ctx context.Context) error
}

// EventKind says what happened.
type EventKind uint8

// Event kinds.
const (
	SessionOpened EventKind = iota + 1
	SessionClosed
	StatementStarted
	StatementEnded
	StatementPenalized
)

// Event is delivered to watchers. Statement is nil for session events.
type Event struct {
	Kind      EventKind
	Session   *Session
	Statement *Statement
}

// Watcher receives registry events. Observe runs synchronously in the
// goroutine that caused the event and must not block.
type Watcher interface {
	Observe(Event)
}

// WatcherFunc adapts a function to Watcher.
type WatcherFunc func(Event)

// Observe calls f(e).
func (f WatcherFunc) Observe(e Event) { f(e) }

// Options configure a Registry.
type Options struct {
	// KeepStatements is how many ended statements are kept for display.
	// 0 means 1000.
	KeepStatements int
}

// Registry holds every open session. It is safe for concurrent use.
type Registry struct {
	nextSession atomic.Uint64
	nextStmt    atomic.Uint64
	keep        int

	mu       sync.Mutex
	sessions map[uint64]*Session // guarded by mu
	byKey    map[string]*Session // guarded by mu; cancel keys
	recent   []*Statement        // guarded by mu; ring of ended statements
	next     int                 // guarded by mu; ring write position
	watchers []watcher           // guarded by mu
	watchID  uint64              // guarded by mu; last watcher id
}

// NewRegistry returns an empty registry.
func NewRegistry(opts Options) *Registry {
	keep := opts.KeepStatements
	if keep <= 0 {
		keep = 1000
	}
	return &Registry{
		keep:     keep,
		sessions: make(map[uint64]*Session),
		byKey:    make(map[string]*Session),
	}
}

// Watch adds w; the returned function removes it.
func (r *Registry) Watch(w Watcher) (unwatch func()) {
	r.mu.Lock()
	r.watchID++
	id := r.watchID
	r.watchers = append(r.watchers, watcher{id, w})
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, x := range r.watchers {
			if x.id == id {
				r.watchers = append(r.watchers[:i:i], r.watchers[i+1:]...)
				return
			}
		}
	}
}

type watcher struct {
	id uint64
	w  Watcher
}

func (r *Registry) emit(e Event) {
	r.mu.Lock()
	ws := r.watchers
	r.mu.Unlock()
	for _, w := range ws {
		w.w.Observe(e)
	}
}

// Info describes where a session comes from.
type Info struct {
	Route    string // route name
	Protocol string // postgres, mysql, tcp
	Link     string // link name
	Client   string // client address
	Upstream string // upstream address
}

// Open registers a new session.
func (r *Registry) Open(info Info, now time.Time) *Session {
	s := &Session{ID: r.nextSession.Add(1), Info: info, Opened: now, reg: r}
	r.mu.Lock()
	r.sessions[s.ID] = s
	r.mu.Unlock()
	r.emit(Event{Kind: SessionOpened, Session: s})
	return s
}

// Session returns the open session with id, or nil.
func (r *Registry) Session(id uint64) *Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

// Sessions returns the open sessions ordered by id.
func (r *Registry) Sessions() []*Session {
	r.mu.Lock()
	out := make([]*Session, 0, len(r.sessions))
	for _, s := range r.sessions {
		out = append(out, s)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ByCancelKey returns the open session that registered key, or nil.
func (r *Registry) ByCancelKey(key string) *Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[key]
}

// Active returns the running statements of all sessions, oldest first.
func (r *Registry) Active() []*Statement {
	var out []*Statement
	for _, s := range r.Sessions() {
		out = append(out, s.Active()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Recent returns up to Options.KeepStatements ended statements, oldest
// first.
func (r *Registry) Recent() []*Statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Statement, 0, len(r.recent))
	if len(r.recent) < r.keep {
		return append(out, r.recent...)
	}
	out = append(out, r.recent[r.next:]...)
	return append(out, r.recent[:r.next]...)
}

// Statement returns a running or recently ended statement by id, or nil.
func (r *Registry) Statement(id uint64) *Statement {
	for _, st := range r.Active() {
		if st.ID == id {
			return st
		}
	}
	for _, st := range r.Recent() {
		if st.ID == id {
			return st
		}
	}
	return nil
}

// ErrNotRunning is returned when cancelling a statement that has ended.
var ErrNotRunning = errors.New("statement is not running")

// ErrNoCanceler is returned when the session's protocol cannot cancel.
var ErrNoCanceler = errors.New("session cannot cancel statements")

// Cancel asks the database to cancel st through the session's protocol.
// The statement's outcome is recorded by the observer when the server
// answers; Cancel only marks it as requested.
func (r *Registry) Cancel(ctx context.Context, st *Statement) error {
	s := st.Session
	s.mu.Lock()
	c := s.canceler
	s.mu.Unlock()
	if st.Outcome() != Running {
		return ErrNotRunning
	}
	if c == nil {
		return ErrNoCanceler
	}
	st.cancelRequested.Store(true)
	if err := c.Cancel(ctx); err != nil {
		return fmt.Errorf("cancel statement %d of session %d: %w", st.ID, s.ID, err)
	}
	return nil
}

func (r *Registry) ended(st *Statement) {
	r.mu.Lock()
	if len(r.recent) < r.keep {
		r.recent = append(r.recent, st)
	} else {
		r.recent[r.next] = st
		r.next = (r.next + 1) % r.keep
	}
	r.mu.Unlock()
	r.emit(Event{Kind: StatementEnded, Session: st.Session, Statement: st})
}

// Session is one client connection through a route.
type Session struct {
	ID     uint64
	Info   Info
	Opened time.Time

	reg       *Registry
	bytesUp   atomic.Int64 // client to server
	bytesDown atomic.Int64 // server to client
	penalized atomic.Int32 // running statements that are penalised

	mu         sync.Mutex
	user       string       // guarded by mu
	database   string       // guarded by mu
	app        string       // guarded by mu
	pool       string       // guarded by mu
	cancelKey  string       // guarded by mu
	canceler   Canceler     // guarded by mu
	active     []*Statement // guarded by mu; oldest first
	statements int64        // guarded by mu; begun so far
	closed     time.Time    // guarded by mu; when Close ran
	isClosed   bool         // guarded by mu; Close has run
}

// SetIdentity records who the client says it is.
func (s *Session) SetIdentity(user, database, app string) {
	s.mu.Lock()
	s.user, s.database, s.app = user, database, app
	s.mu.Unlock()
}

// User returns the session's user name ("" before startup).
func (s *Session) User() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user
}

// Database returns the session's database name.
func (s *Session) Database() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.database
}

// Application returns the client's application name.
func (s *Session) Application() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.app
}

// SetPool records the resource pool the session is bound to.
func (s *Session) SetPool(pool string) {
	s.mu.Lock()
	s.pool = pool
	s.mu.Unlock()
}

// Pool returns the session's resource pool ("" for none).
func (s *Session) Pool() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pool
}

// SetCanceler installs how statements of this session are cancelled.
func (s *Session) SetCanceler(c Canceler) {
	s.mu.Lock()
	s.canceler = c
	s.mu.Unlock()
}

// Canceler returns the session's canceler, or nil.
func (s *Session) Canceler() Canceler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.canceler
}

// SetCancelKey registers key so Registry.ByCancelKey finds this session
// (PostgreSQL: the upstream's BackendKeyData).
func (s *Session) SetCancelKey(key string) {
	s.reg.mu.Lock()
	s.mu.Lock()
	if s.cancelKey != "" && s.reg.byKey[s.cancelKey] == s {
		delete(s.reg.byKey, s.cancelKey)
	}
	s.cancelKey = key
	s.mu.Unlock()
	s.reg.byKey[key] = s
	s.reg.mu.Unlock()
}

// AddUp counts n bytes sent by the client.
func (s *Session) AddUp(n int) { s.bytesUp.Add(int64(n)) }

// AddDown counts n bytes sent by the server.
func (s *Session) AddDown(n int) { s.bytesDown.Add(int64(n)) }

// BytesUp returns the bytes sent by the client so far.
func (s *Session) BytesUp() int64 { return s.bytesUp.Load() }

// BytesDown returns the bytes sent by the server so far.
func (s *Session) BytesDown() int64 { return s.bytesDown.Load() }

// Penalized reports whether a running statement of the session is
// penalised. It is one atomic load.
func (s *Session) Penalized() bool { return s.penalized.Load() > 0 }

// Begin opens a statement with its SQL text (already truncated by the
// caller if it wants) at now. The statement keeps the text with its
// password literals hidden (redact.SQL, in the dialect of the session's
// protocol; a literal cut short by the truncation is hidden through the
// end), so no view or log of it shows a password.
func (s *Session) Begin(sql string, now time.Time) *Statement {
	sql = redact.SQL(sql, dialect(s.Info.Protocol))
	st := &Statement{ID: s.reg.nextStmt.Add(1), Session: s, SQL: sql, Started: now}
	s.mu.Lock()
	s.statements++
	closed := s.isClosed
	if !closed {
		s.active = append(s.active, st)
	}
	s.mu.Unlock()
	s.reg.emit(Event{Kind: StatementStarted, Session: s, Statement: st})
	if closed {
		// An observer may still be finishing a chunk after the session
		// closed; its statement ends at once, as Close ends the others.
		st.End(now, Failed, -1, "08006")
	}
	return st
}

// dialect returns the SQL dialect of a protocol: MySQL's for mysql,
// PostgreSQL's for any other.
func dialect(protocol string) redact.Dialect {
	if protocol == "mysql" {
		return redact.MySQL
	}
	return redact.PostgreSQL
}

// Active returns the session's running statements, oldest first.
func (s *Session) Active() []*Statement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Statement(nil), s.active...)
}

// Statements returns how many statements the session has begun.
func (s *Session) Statements() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statements
}

// Closed returns when the session closed, or the zero time if open.
func (s *Session) Closed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends every running statement as failed and removes the session
// from the registry. Safe to call twice.
func (s *Session) Close(now time.Time) {
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		return
	}
	s.closed, s.isClosed = now, true
	// Close takes the running statements out of the session before ending
	// them: End removes a statement from s.active in place, so ranging
	// over a slice that shares its array would skip some and see others
	// twice (or nil) as the array shifts under the loop.
	active := s.active
	s.active = nil
	s.mu.Unlock()
	for _, st := range active {
		st.End(now, Failed, -1, "08006")
	}
	s.reg.mu.Lock()
	delete(s.reg.sessions, s.ID)
	if s.reg.byKey[s.cancelKey] == s {
		delete(s.reg.byKey, s.cancelKey)
	}
	s.reg.mu.Unlock()
	s.reg.emit(Event{Kind: SessionClosed, Session: s})
}

// Statement is one statement a client sent, from its first byte to the
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

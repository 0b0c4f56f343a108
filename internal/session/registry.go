package session

// This file holds the Registry: the sessions and statements of a process,
// their lookup by id and cancel key, the ring of recent statements and the
// watchers told of each change.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/ring"
)

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
	SessionLinked // Session is a shard session just linked to its Coordinator
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

	mu       sync.Mutex
	sessions map[uint64]*Session   // guarded by mu
	byKey    map[string]*Session   // guarded by mu; cancel keys
	byPID    map[uint32][]*Session // guarded by mu; backend pids of cancel keys, usually one session each
	recent   ring.Ring[*Statement] // guarded by mu; ended statements
	watchers []watcher             // guarded by mu
	watchID  uint64                // guarded by mu; last watcher id
}

// NewRegistry returns an empty registry.
func NewRegistry(opts Options) *Registry {
	keep := opts.KeepStatements
	if keep <= 0 {
		keep = 1000
	}
	return &Registry{
		recent:   ring.Ring[*Statement]{Size: keep},
		sessions: make(map[uint64]*Session),
		byKey:    make(map[string]*Session),
		byPID:    make(map[uint32][]*Session),
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

// ByBackendPID returns the open session whose cancel key carries backend
// process id pid, or nil when none does or when several do (sessions to
// different servers whose pids collide: which one is meant cannot be
// told).
func (r *Registry) ByBackendPID(pid uint32) *Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.byPID[pid]; len(l) == 1 {
		return l[0]
	}
	return nil
}

// unindexPIDLocked removes s from byPID under the pid of key, its old
// cancel key. The caller holds r.mu.
func (r *Registry) unindexPIDLocked(s *Session, key string) {
	pid, ok := keyPID(key)
	if !ok {
		return
	}
	l := r.byPID[pid]
	for i, x := range l {
		if x == s {
			l = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(r.byPID, pid)
	} else {
		r.byPID[pid] = l
	}
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
	return r.recent.All()
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
// answers; Cancel only marks it as requested. A statement held waiting
// for admission never reached the server: its wait ends with
// ErrCancelRequested instead, and no cancel request is sent; one whose
// wait failed already is ErrNotRunning.
func (r *Registry) Cancel(ctx context.Context, st *Statement) error {
	if st.CancelWait(ErrCancelRequested) {
		st.cancelRequested.Store(true)
		return nil
	}
	if st.neverRan() {
		return ErrNotRunning // its wait failed: the server never saw it
	}
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
	r.recent.Add(st)
	r.mu.Unlock()
	r.emit(Event{Kind: StatementEnded, Session: st.Session, Statement: st})
}

package session

// This file holds the Session: one client connection, who it is, what
// it has sent and received, and the statements it runs.

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/redact"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// Session is one client connection through a route.
type Session struct {
	ID     uint64
	Info   Info
	Opened time.Time

	reg       *Registry
	bytesUp   atomic.Int64            // client to server
	bytesDown atomic.Int64            // server to client
	penalized atomic.Int32            // running statements that are penalised
	kind      atomic.Uint32           // a Kind; SetKind
	coord     atomic.Pointer[Session] // the coordinator of a shard session; set once by Link
	shards    atomic.Bool             // a shard session was linked to this one (Link)

	mu        sync.Mutex
	user      string       // guarded by mu
	database  string       // guarded by mu
	app       string       // guarded by mu
	pool      string       // guarded by mu
	cancelKey string       // guarded by mu
	canceler  Canceler     // guarded by mu
	active    []*Statement // guarded by mu; oldest first
	running   atomic.Int32 // len(active), stored under mu, read without it
	// lastRan is the statement that ended last after its request had
	// reached the server (it was not waiting for admission when it
	// ended); guarded by mu; nil before the first.
	lastRan    *Statement
	statements int64           // guarded by mu; begun so far
	closed     time.Time       // guarded by mu; when Close ran
	isClosed   bool            // guarded by mu; Close has run
	unsent     func() int64    // guarded by mu; nil until SetHooks
	terminate  func(EndReason) // guarded by mu; nil until SetHooks, then after Terminate
	slot       Slot            // guarded by mu; the admission slot the session holds
	slotGen    uint64          // guarded by mu; counts TakeSlot calls, so a late DropSlot drops nothing newer
	idleEnded  bool            // guarded by mu; TerminateIdle ended the session
}

// Slot is what a session holds of its pool's active_statements, and how
// long it has sat idle inside a transaction. The zero Slot holds nothing.
type Slot struct {
	// Pool is the pool whose slot the session holds; "" when none.
	Pool string
	// Since is when the session took the slot; zero when none.
	Since time.Time
	// IdleSince is when the session went idle inside a transaction (the
	// server answered every request, a transaction is open, the client
	// sends nothing); zero when it is not. Set only for sessions under
	// admission (the front end's gate tracks it), slot or not.
	IdleSince time.Time
}

// IdleInTransaction reports how long, at now, the session has sat idle
// inside a transaction while holding a slot, and whether it does.
func (s Slot) IdleInTransaction(now time.Time) (time.Duration, bool) {
	if s.Pool == "" || s.IdleSince.IsZero() {
		return 0, false
	}
	return max(now.Sub(s.IdleSince), 0), true
}

// EndReason is why sluice ends a session (Session.Terminate).
type EndReason uint8

// The reasons.
const (
	// EndAdmin: an administrator's command (pg_terminate_backend).
	EndAdmin EndReason = iota
	// EndIdleInTransaction: the session sat idle inside a transaction,
	// holding an admission slot, past its pool's idle_in_transaction.
	EndIdleInTransaction
)

// SetHooks installs how UnsentBytes reads the bytes written to the
// client and not yet sent (unsent), and how Terminate ends the session
// (terminate, with the reason the client is told); unsent must be cheap
// and safe for concurrent use, terminate must not block and is called at
// most once.
func (s *Session) SetHooks(unsent func() int64, terminate func(EndReason)) {
	s.mu.Lock()
	s.unsent, s.terminate = unsent, terminate
	s.mu.Unlock()
}

// UnsentBytes returns the bytes written to the session's client that are
// not sent yet, 0 without SetHooks.
func (s *Session) UnsentBytes() int64 {
	s.mu.Lock()
	f := s.unsent
	s.mu.Unlock()
	if f == nil {
		return 0
	}
	return f()
}

// Terminate ends the session as an administrator's command (the client
// is told so in its protocol) and reports whether it could: false when
// the session is closed or its route cannot end it.
func (s *Session) Terminate() bool {
	s.mu.Lock()
	f := s.terminate
	s.terminate = nil
	closed := s.isClosed
	s.mu.Unlock()
	if f == nil || closed {
		return false
	}
	f(EndAdmin)
	return true
}

// TerminateIdle ends the session, as Terminate does but telling the
// client EndIdleInTransaction, if it still sits idle inside a
// transaction since since (Slot().IdleSince), and reports whether it did.
// The check and the claim are one step under the session's lock, so a
// request the client begins meanwhile either comes first (the session
// is no longer idle, nothing ends) or finds the session claimed
// (LeaveIdle reports false) and never reaches the server.
func (s *Session) TerminateIdle(since time.Time) bool {
	s.mu.Lock()
	f := s.terminate
	if f == nil || s.isClosed || s.slot.IdleSince.IsZero() || !s.slot.IdleSince.Equal(since) {
		s.mu.Unlock()
		return false
	}
	s.terminate, s.idleEnded = nil, true
	s.mu.Unlock()
	f(EndIdleInTransaction)
	return true
}

// LeaveIdle records that the session's client began a request after
// sitting idle inside a transaction. It reports false when TerminateIdle
// has ended the session meanwhile: the request must not go upstream.
func (s *Session) LeaveIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slot.IdleSince = time.Time{}
	return !s.idleEnded
}

// TakeSlot records that the session holds a slot of pool from now, and
// returns the token DropSlot takes.
func (s *Session) TakeSlot(pool string, now time.Time) (token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slotGen++
	s.slot.Pool, s.slot.Since = pool, now
	return s.slotGen
}

// DropSlot records that the slot TakeSlot returned token for went back;
// it does nothing when the session has taken another since.
func (s *Session) DropSlot(token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slotGen == token {
		s.slot.Pool, s.slot.Since = "", time.Time{}
	}
}

// SetIdleInTransaction records that the session went idle inside a
// transaction at since; the zero time records that it is no longer (see
// also LeaveIdle).
func (s *Session) SetIdleInTransaction(since time.Time) {
	s.mu.Lock()
	s.slot.IdleSince = since
	s.mu.Unlock()
}

// Slot returns the admission slot the session holds, and since when it
// has been idle inside a transaction.
func (s *Session) Slot() Slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slot
}

// SetIdentity records who the client says it is.
func (s *Session) SetIdentity(user, database, app string) {
	s.mu.Lock()
	s.user, s.database, s.app = user, database, app
	s.mu.Unlock()
}

// User returns the session's user name ("" before startup).
func (s *Session) User() string { return s.read(&s.user) }

// Database returns the session's database name.
func (s *Session) Database() string { return s.read(&s.database) }

// Application returns the client's application name.
func (s *Session) Application() string { return s.read(&s.app) }

// read returns *f, one of the string fields guarded by mu.
func (s *Session) read(f *string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *f
}

// SetPool records the resource pool the session is bound to.
func (s *Session) SetPool(pool string) {
	s.mu.Lock()
	s.pool = pool
	s.mu.Unlock()
}

// Pool returns the session's resource pool ("" for none).
func (s *Session) Pool() string { return s.read(&s.pool) }

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
// (PostgreSQL: the upstream's BackendKeyData), and, when key is at least
// 4 bytes long, so Registry.ByBackendPID finds it by the process id its
// first 4 bytes hold (big-endian, as PostgreSQL writes it).
func (s *Session) SetCancelKey(key string) {
	s.reg.mu.Lock()
	s.mu.Lock()
	if s.cancelKey != "" && s.reg.byKey[s.cancelKey] == s {
		delete(s.reg.byKey, s.cancelKey)
	}
	s.reg.unindexPIDLocked(s, s.cancelKey)
	s.cancelKey = key
	s.mu.Unlock()
	s.reg.byKey[key] = s
	if pid, ok := keyPID(key); ok {
		s.reg.byPID[pid] = append(s.reg.byPID[pid], s)
	}
	s.reg.mu.Unlock()
}

// keyPID returns the process id a cancel key begins with.
func keyPID(key string) (uint32, bool) {
	if len(key) < 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32([]byte(key[:4])), true
}

// Link records coord as the coordinator of s: s is a shard connection
// of a distributed query that coord's backend runs (PostgreSQL:
// postgres_fdw's connection, named by its application_name). From then
// on each statement s begins is a child of the statement coord executes
// at that moment (see Begin), and s reads Penalized true while coord
// does; watchers get a SessionLinked event for s. Link is called once,
// before the session relays a statement; it reports false, changing
// nothing, when coord is nil or s, when s is linked already, or when s
// is coord's coordinator (directly or further up), which would make a
// cycle.
func (s *Session) Link(coord *Session) bool {
	if coord == nil || coord == s {
		return false
	}
	for c := coord.coord.Load(); c != nil; c = c.coord.Load() {
		if c == s {
			return false
		}
	}
	if !s.coord.CompareAndSwap(nil, coord) {
		return false
	}
	coord.shards.Store(true)
	s.reg.emit(Event{Kind: SessionLinked, Session: s})
	return true
}

// Distributed reports whether s is a shard session (Link) or the
// coordinator of one. A shard statement's Parent is the coordinator's
// statement sluice saw reach the server, so such a session's bytes must
// be observed before they are relayed, never after (the kernel's fast
// path leaves it alone).
func (s *Session) Distributed() bool {
	return s.coord.Load() != nil || s.shards.Load()
}

// Coordinator returns the session s is a shard connection of, or nil.
// It is one atomic load.
func (s *Session) Coordinator() *Session { return s.coord.Load() }

// AddUp counts n bytes sent by the client.
func (s *Session) AddUp(n int) { s.bytesUp.Add(int64(n)) }

// AddDown counts n bytes sent by the server.
func (s *Session) AddDown(n int) { s.bytesDown.Add(int64(n)) }

// BytesUp returns the bytes sent by the client so far.
func (s *Session) BytesUp() int64 { return s.bytesUp.Load() }

// BytesDown returns the bytes sent by the server so far.
func (s *Session) BytesDown() int64 { return s.bytesDown.Load() }

// Penalized reports whether a running statement of the session is
// penalised, or, for a shard session (Link), one of its coordinator's
// (or of the coordinator's own coordinator, up the chain): a penalty of
// a distributed statement demotes every flow that works for it. It is
// one atomic load for a session that is not linked, one more per
// coordinator otherwise.
func (s *Session) Penalized() bool {
	if s.penalized.Load() > 0 {
		return true
	}
	for c := s.coord.Load(); c != nil; c = c.coord.Load() {
		if c.penalized.Load() > 0 {
			return true
		}
	}
	return false
}

// Begin opens a statement with its SQL text (already truncated by the
// caller if it wants) at now. The statement keeps the text with its
// password literals hidden (redact.SQL, in the dialect of the session's
// protocol; a literal cut short by the truncation is hidden through the
// end), so no view or log of it shows a password.
//
// A shard session's statement (Link) is a child of the statement its
// coordinator executes when it begins (Session.Executing), or, when the
// coordinator executes none, of the coordinator's statement that ran
// last (its backend's clean-up after sluice saw that statement end; see
// workingFor); it has no Parent only when the coordinator has run
// nothing yet. Its bytes count in the distributed totals of the top of
// its Parent chain as well as in its own, also after that top ended.
func (s *Session) Begin(sql string, now time.Time) *Statement {
	sql = redact.SQL(sql, dialect(s.Info.Protocol))
	st := &Statement{ID: s.reg.nextStmt.Add(1), Session: s, SQL: sql, Started: now}
	if c := s.coord.Load(); c != nil {
		if p := c.workingFor(); p != nil {
			st.Parent = p
			st.node = p.root().nodeOf(s.Info.Route)
		}
	}
	s.mu.Lock()
	s.statements++
	closed := s.isClosed
	if !closed {
		s.active = append(s.active, st)
		s.running.Store(int32(len(s.active)))
	}
	s.mu.Unlock()
	s.reg.emit(Event{Kind: StatementStarted, Session: s, Statement: st})
	if closed {
		// An observer may still be finishing a chunk after the session
		// closed; its statement ends at once, as Close ends the others.
		st.End(now, Failed, -1, sqlstate.ConnectionFailure)
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

// workingFor returns the statement a shard statement of a session linked
// to s begins under: the statement s's server is executing
// (Executing), or, when none is, the statement that ended last after
// reaching the server. A coordinator's backend keeps talking to its
// shards after sluice has seen its answer end or its client go: it ends
// its remote transactions (ABORT after an error or a cancel), drains a
// FETCH it sent ahead, and those bytes reach the shard's session after
// the coordinator's ended. Every statement that reaches the server
// begins in sluice before the server sees it, so the backend's shard
// traffic with nothing executing belongs to the last one that ran. nil
// when s has run no statement.
func (s *Session) workingFor() *Statement {
	if st := s.Executing(); st != nil {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastRan
}

// Executing returns the statement the session's server is executing:
// the oldest running statement that is not held for admission (the
// server answers in order), or nil.
func (s *Session) Executing() *Statement {
	for _, st := range s.Active() {
		if !st.Waiting() && st.Outcome() == Running {
			return st
		}
	}
	return nil
}

// Running reports whether the session has a running statement. It is one
// atomic load, for the data path.
func (s *Session) Running() bool { return s.running.Load() > 0 }

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
	s.running.Store(0)
	s.mu.Unlock()
	for _, st := range active {
		st.End(now, Failed, -1, sqlstate.ConnectionFailure)
	}
	s.reg.mu.Lock()
	delete(s.reg.sessions, s.ID)
	if s.reg.byKey[s.cancelKey] == s {
		delete(s.reg.byKey, s.cancelKey)
	}
	s.reg.unindexPIDLocked(s, s.cancelKey)
	s.reg.mu.Unlock()
	s.reg.emit(Event{Kind: SessionClosed, Session: s})
}

// Statement is one statement a client sent, from its first byte to the

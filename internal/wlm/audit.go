package wlm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/ring"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// The surfaces a catalog change comes from, as Actor.Surface names them.
const (
	SurfaceConsole = "console" // the admin console
	SurfaceHTTP    = "http"    // the HTTP API (and its Toxiproxy-compatible part)
	SurfaceForward = "forward" // data-port forwarding of CREATE/ALTER USER
	SurfaceConfig  = "config"  // the configuration file, at start
	SurfaceReload  = "reload"  // the configuration file, re-read while running
	SurfaceLab     = "lab"     // sluice lab setting up its experiments
	SurfaceWLM     = "wlm"     // the workload manager itself: a session ended for idle_in_transaction
)

// Actor is who asks for a catalog change: the surface it comes through,
// the user (the console's authenticated user, the data-route user,
// "token" for an HTTP request that presented the API token, "" when
// there is none) and the client's address (the configuration file's path
// for SurfaceConfig). For SurfaceReload, User and Addr are those of whoever
// asked for the reload ("console:admin" and the console client's address,
// "http:token" and the HTTP client's), or "signal" and the file's path for
// SIGHUP. It is a value, safe to copy.
type Actor struct {
	Surface string
	User    string
	Addr    string
}

// actorKey is the context key of an Actor.
type actorKey struct{}

// WithActor returns ctx carrying a: the Manager records it with every
// change made under ctx (Exec, ExecStatement, ForwardUser, BindUser,
// DefineLink, Set).
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the Actor ctx carries; ok is false when it carries
// none.
func ActorFrom(ctx context.Context) (a Actor, ok bool) {
	a, ok = ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// AuditEntry is one entry of the audit log, as package views defines it.
type AuditEntry = views.AuditEntry

// DefaultAuditSize is how many entries an audit log keeps when its size
// is not given.
const DefaultAuditSize = 1000

// AuditCount keys the audit log's counters: changes by surface and
// outcome ("ok" or "error").
type AuditCount struct {
	Surface, Outcome string
}

// AuditLog keeps the last entries of the catalog changes in a ring
// buffer of fixed size and counts every change by surface and outcome
// since it was made. It is pure logic: the caller gives the time. It is
// safe for concurrent use.
type AuditLog struct {
	mu      sync.Mutex
	ring    ring.Ring[AuditEntry]
	counted map[AuditCount]uint64
}

// NewAuditLog returns a log keeping the last size entries; size <= 0
// means DefaultAuditSize.
func NewAuditLog(size int) *AuditLog {
	if size <= 0 {
		size = DefaultAuditSize
	}
	return &AuditLog{ring: ring.Ring[AuditEntry]{Size: size}, counted: map[AuditCount]uint64{}}
}

// Record appends the change statement (already redacted) that a made at
// now, with its outcome err (nil: it took effect), and returns the
// entry. A *ddl.Error gives its SQLSTATE; any other error is XX000.
// When the log is full the oldest entry is dropped.
func (l *AuditLog) Record(now time.Time, a Actor, statement string, err error) AuditEntry {
	e := AuditEntry{Time: now, Surface: a.Surface, User: a.User, Addr: a.Addr, Statement: statement}
	if err != nil {
		de := &ddl.Error{Code: sqlstate.InternalError, Message: err.Error()}
		errors.As(err, &de)
		e.Code, e.Error = de.Code, de.Message
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring.Add(e)
	l.counted[AuditCount{Surface: e.Surface, Outcome: e.Outcome()}]++
	return e
}

// Entries returns a copy of the kept entries, oldest first.
func (l *AuditLog) Entries() []AuditEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ring.All()
}

// Counts returns a copy of the counters: every change recorded, kept or
// dropped from the ring, by surface and outcome.
func (l *AuditLog) Counts() map[AuditCount]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[AuditCount]uint64, len(l.counted))
	for k, n := range l.counted {
		out[k] = n
	}
	return out
}

// Audit returns the kept audit entries, oldest first.
func (m *Service) Audit() []AuditEntry { return m.audit.Entries() }

// AuditCounts returns the catalog changes recorded since the Manager was
// made, by surface and outcome.
func (m *Service) AuditCounts() map[AuditCount]uint64 { return m.audit.Counts() }

// record adds a change to the audit log and logs it at INFO. statement
// must already have its passwords masked. A ctx without an Actor is
// recorded with an empty one.
func (m *core) record(ctx context.Context, statement string, err error) {
	a, _ := ActorFrom(ctx)
	e := m.audit.Record(m.clk.Now(), a, statement, err)
	attrs := []any{"surface", e.Surface, "user", e.User, "client_addr", e.Addr, "statement", e.Statement, "outcome", e.Outcome()}
	if err != nil {
		attrs = append(attrs, "code", e.Code, "err", e.Error)
	}
	m.log.Info("catalog change", attrs...)
}

// quoteLiteral writes s as a SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

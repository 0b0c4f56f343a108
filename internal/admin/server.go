package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/limit"
	"github.com/sluicelab/sluice/internal/offpath"
	"github.com/sluicelab/sluice/internal/pgserver"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// Defaults.
const (
	// DefaultServerVersion is the server_version reported to clients.
	DefaultServerVersion = "15.0 (sluice)"
	// AuthTimeout bounds the startup and authentication exchange.
	AuthTimeout = 10 * time.Second
	// DefaultQueryTimeout bounds one SQL query over the views.
	DefaultQueryTimeout = 10 * time.Second
)

// DefaultUser is the console's built-in user: the one name
// AllowNoPassword accepts, and the user whose password the caller takes
// from SLUICE_ADMIN_PASSWORD or admin.password.
const DefaultUser = "admin"

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("admin: server closed")

// Statements runs a console statement: the workload manager's catalog
// service. It must be safe for concurrent use.
type Statements interface {
	ExecStatement(ctx context.Context, st ddl.Statement) (wlm.Result, error)
}

// Tables reads the views named (views.Names), all from one reading.
// It must be safe for concurrent use.
type Tables interface {
	ViewTables(names []string) map[string]views.Table
}

// SessionControl cancels a session's statement or ends the session, as
// an abort rule does. It must be safe for concurrent use.
type SessionControl interface {
	CancelSession(ctx context.Context, id uint64) (done bool, err error)
	TerminateSession(ctx context.Context, id uint64) (done bool)
	Registry() *session.Registry
}

// RegistrySyncer brings the session registry up to what the relays'
// clients have received (*proxy.Server: the kernel fast path's journal
// drained). SyncRegistry returns ctx's error if ctx ends first. It must
// be safe for concurrent use.
type RegistrySyncer interface {
	SyncRegistry(ctx context.Context) error
}

// Options configure a Server.
type Options struct {
	// Catalog runs the console's statements (*wlm.Service). Required.
	Catalog Statements
	// Views answers SQL over the views (*wlm.Views). Required.
	Views Tables
	// Sessions cancels and terminates sessions (*wlm.Runtime). Required.
	Sessions SessionControl
	// Reloader runs RELOAD and SHOW CONFIG; nil refuses both (0A000).
	Reloader Reloader
	// Fleet answers SHOW INSTANCES, SHOW CLUSTER, the cluster-wide
	// views of SQL and the session commands naming another instance;
	// nil refuses them (0A000).
	Fleet fleet.View
	// Sync is called before each statement, so that what it reads
	// holds every byte a client has received (*proxy.Server); nil reads
	// the registry as it is.
	Sync RegistrySyncer
	// Logger receives connection and authentication events; nil discards
	// them.
	Logger *slog.Logger
	// Clock times the drain after an over-limit message; nil means
	// clock.Real.
	Clock clock.Clock
	// Users maps console user names to passwords, checked with
	// SCRAM-SHA-256.
	Users map[string]string
	// AllowNoPassword accepts user DefaultUser without a password (trust
	// authentication); any other name is refused with 28000, as
	// PostgreSQL refuses a role that does not exist. The caller allows it
	// only on a loopback address.
	AllowNoPassword bool
	// ServerVersion is the server_version parameter reported to clients;
	// "" means DefaultServerVersion.
	ServerVersion string
	// QueryTimeout bounds one SQL query over the views (57014 beyond);
	// 0 means DefaultQueryTimeout.
	QueryTimeout time.Duration
	// MaxQueryRows bounds the rows of one SQL query over the views
	// (54000 beyond); 0 means viewsql.DefaultMaxRows.
	MaxQueryRows int
	// Engine bounds how many SQL queries over the views run at once and
	// wait for a turn (53000 beyond); the zero value is offpath's
	// defaults, one running and 64 waiting.
	Engine offpath.Options
	// StatementRate bounds the statements every console connection
	// together runs per second; a statement beyond it waits its turn
	// (a token bucket of StatementBurst). Parsing and answering a
	// statement runs on the relays' CPUs, so clients that send trivial
	// statements in a loop would otherwise take them: 20 psql sessions
	// sending SELECT 1 as fast as they could left a data route 16 % of
	// its transactions. 0 means DefaultStatementRate; a negative value
	// is no bound.
	StatementRate int
}

// Bounds of the console's statements per second (Options.StatementRate).
const (
	DefaultStatementRate = 500
	StatementBurst       = 100
)

// newPace returns the console's statement meter for rate (see
// Options.StatementRate).
func newPace(rate int) *limit.TokenBucket {
	switch {
	case rate < 0:
		return nil
	case rate == 0:
		rate = DefaultStatementRate
	}
	return limit.NewTokenBucket(int64(rate), StatementBurst)
}

// Server is the admin console. It is safe for concurrent use.
type Server struct {
	catalog      Statements
	views        Tables
	sessions     SessionControl
	reloader     Reloader       // nil: no RELOAD, no SHOW CONFIG
	fleet        fleet.View     // nil: no fleet statements
	sync         RegistrySyncer // nil: nothing to catch up
	log          *slog.Logger
	clk          clock.Clock
	version      string
	queryTimeout time.Duration
	maxRows      int
	cfg          pgserver.Config // authentication and limits; immutable
	// engine gives SQL queries over the views their turns, one at a time,
	// off the relays' CPUs (package offpath); immutable.
	engine *offpath.Runner
	// pace meters the statements of every connection
	// (Options.StatementRate); nil for no bound. Its own lock.
	pace *limit.TokenBucket

	wg sync.WaitGroup // connection goroutines

	mu        sync.Mutex
	closed    bool                      // guarded by mu
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[net.Conn]struct{}     // guarded by mu
}

// New returns a console for o. It derives the SCRAM credentials of every
// user, so it fails for a password SASLprep rejects.
func New(o Options) (*Server, error) {
	if o.Catalog == nil || o.Views == nil || o.Sessions == nil {
		return nil, errors.New("admin: Options.Catalog, Views and Sessions are required")
	}
	s := &Server{
		catalog:      o.Catalog,
		views:        o.Views,
		sessions:     o.Sessions,
		reloader:     o.Reloader,
		fleet:        o.Fleet,
		sync:         o.Sync,
		log:          o.Logger,
		clk:          o.Clock,
		version:      o.ServerVersion,
		queryTimeout: o.QueryTimeout,
		maxRows:      o.MaxQueryRows,
		engine:       offpath.New(o.Engine),
		pace:         newPace(o.StatementRate),
		listeners:    map[net.Listener]struct{}{},
		conns:        map[net.Conn]struct{}{},
		cfg:          pgserver.Config{MaxMessage: maxMessage, AuthTimeout: AuthTimeout, Clock: o.Clock},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.version == "" {
		s.version = DefaultServerVersion
	}
	if s.clk == nil {
		s.clk = clock.Real{}
	}
	if s.queryTimeout <= 0 {
		s.queryTimeout = DefaultQueryTimeout
	}
	if len(o.Users) == 0 && !o.AllowNoPassword {
		return nil, errors.New("admin: no users and AllowNoPassword is false: nobody could log in")
	}
	if o.AllowNoPassword {
		s.cfg.Auth = pgserver.Auth{Method: pgserver.Trust, User: DefaultUser}
		return s, nil
	}
	creds, err := pgserver.NewCredentials(o.Users)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	s.cfg.Auth = pgserver.Auth{Method: pgserver.SCRAM, Credentials: creds}
	return s, nil
}

// Serve accepts connections on ln until ctx ends or Close is called, and
// serves each in its own goroutine. It closes ln. It returns ctx.Err()
// when ctx ends, ErrServerClosed after Close, or the accept error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := track(s, s.listeners, ln, false); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer untrack(s, s.listeners, ln)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			return fmt.Errorf("admin: accept: %w", err)
		}
		if err := track(s, s.conns, c, true); err != nil {
			return err
		}
		go func() {
			defer s.wg.Done()
			defer untrack(s, s.conns, c)
			stopConn := context.AfterFunc(ctx, func() { c.Close() })
			defer stopConn()
			s.serveConn(ctx, c)
		}()
	}
}

// trackable is what Server tracks to close it: a listener or a
// connection.
type trackable interface {
	comparable
	Close() error
}

// track adds x to set, which Close closes, and when goroutine is true
// counts the goroutine that will serve x in s.wg, under s.mu so that
// Close waits for it. After Close it closes x and returns
// ErrServerClosed instead.
func track[T trackable](s *Server, set map[T]struct{}, x T, goroutine bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		x.Close()
		return ErrServerClosed
	}
	set[x] = struct{}{}
	if goroutine {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	return nil
}

// untrack removes x from set and closes it.
func untrack[T trackable](s *Server, set map[T]struct{}, x T) {
	s.mu.Lock()
	delete(set, x)
	s.mu.Unlock()
	x.Close()
}

// Close stops every Serve, closes every connection and waits for their
// goroutines. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

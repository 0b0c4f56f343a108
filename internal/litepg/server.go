package litepg

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// ServerVersion is the server_version the server reports.
const ServerVersion = "15.0 (litepg)"

// AuthMethod selects how clients authenticate.
type AuthMethod uint8

const (
	// AuthTrust accepts every client without a password.
	AuthTrust AuthMethod = iota
	// AuthPassword asks for the password in clear text.
	AuthPassword
	// AuthMD5 asks for PostgreSQL's salted MD5 password hash.
	AuthMD5
)

// TxMode selects when a transaction takes the database's write lock.
// SQLite allows one writer at a time; a transaction that reads first and
// writes later fails with 40001 if another transaction committed in
// between, so taking the lock up front trades concurrency for fewer
// retries.
type TxMode uint8

const (
	// TxAdaptive starts a transaction holding the write lock when the
	// previous transaction of the same session wrote, and without it
	// otherwise. Read-only sessions run concurrently; read-write
	// sessions queue for the lock instead of failing. The default.
	TxAdaptive TxMode = iota
	// TxDeferred takes the write lock at a transaction's first write.
	TxDeferred
	// TxImmediate takes the write lock at every transaction's start,
	// except BEGIN READ ONLY.
	TxImmediate
)

// Options configures a Server. The zero value serves a temporary
// database to any client without a password.
type Options struct {
	// Path is the SQLite database file, created if missing. "" creates
	// one in a new temporary directory that Close removes.
	Path string
	// Logger receives session events at debug level and unexpected
	// failures at warn level. nil discards them.
	Logger *slog.Logger
	// Clock times pg_sleep and the wait for the write lock. nil is the
	// wall clock.
	Clock clock.Clock
	// Auth selects client authentication; AuthPassword and AuthMD5
	// require Password.
	Auth AuthMethod
	// User, if set, is the only user name accepted.
	User string
	// Password is the password every user must give under AuthPassword
	// and AuthMD5.
	Password string
	// BusyTimeout bounds the wait for the write lock and for SQLite's
	// own locks; a statement that waits longer fails with 40001
	// (serialization_failure). 0 means 5 s.
	BusyTimeout time.Duration
	// TxMode selects when transactions take the write lock.
	TxMode TxMode
	// Synchronous is SQLite's PRAGMA synchronous for every connection:
	// "OFF", "NORMAL" or "FULL". "" means NORMAL, which in WAL mode
	// keeps the database consistent across a crash but may lose the
	// last transactions on power loss.
	Synchronous string
	// MaxConns bounds the number of concurrent sessions; further clients
	// get FATAL 53300. 0 means 100.
	MaxConns int
}

// authMethods maps AuthMethod to the server's methods.
var authMethods = [...]pgserver.Method{AuthTrust: pgserver.Trust, AuthPassword: pgserver.Cleartext, AuthMD5: pgserver.MD5}

// ErrServerClosed is returned by Serve once Close has been called.
var ErrServerClosed = errors.New("litepg: server closed")

// Server serves one SQLite database over the PostgreSQL protocol. It is
// safe for concurrent use; Serve may run on several listeners at once.
type Server struct {
	opts    Options
	cfg     pgserver.Config // protocol settings; immutable
	log     *slog.Logger
	clock   clock.Clock
	drv     *sqlite.Driver
	dsn     string
	path    string
	tempDir string // removed by Close; "" when Options.Path was given
	version string // version() result
	busy    time.Duration

	// meta keeps the database open for the server's lifetime; it is used
	// only by New and Close.
	meta driver.Conn

	// writeLock is held (one token in the channel) by the session whose
	// transaction or statement writes. SQLite admits one writer at a
	// time; queueing here hands the lock over at once instead of in
	// SQLite's sleep-and-retry busy loop.
	writeLock chan struct{}

	// schemaGen counts schema changes; sessions drop cached table
	// columns when it moves.
	schemaGen atomic.Uint64
	nextPID   atomic.Uint32

	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // Serve calls and their sessions

	mu sync.Mutex // guards the fields below
	// sessions are the live sessions by process ID, for CancelRequest
	// and pg_sleep.
	sessions map[uint32]*session
	// serving holds a cancel function per running Serve call.
	serving map[*context.CancelFunc]struct{}
	closed  bool
}

// New opens (or creates) the database, switches it to WAL mode and
// returns a Server ready to Serve.
func New(opts Options) (*Server, error) {
	if (opts.Auth == AuthPassword || opts.Auth == AuthMD5) && opts.Password == "" {
		return nil, errors.New("litepg: password authentication needs Options.Password")
	}
	if opts.Auth > AuthMD5 {
		return nil, fmt.Errorf("litepg: unknown auth method %d", opts.Auth)
	}
	if opts.TxMode > TxImmediate {
		return nil, fmt.Errorf("litepg: unknown transaction mode %d", opts.TxMode)
	}
	syncMode := strings.ToUpper(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "NORMAL"
	case "OFF", "NORMAL", "FULL", "EXTRA":
	default:
		return nil, fmt.Errorf("litepg: bad synchronous setting %q", opts.Synchronous)
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		clock:     opts.Clock,
		drv:       &sqlite.Driver{},
		busy:      opts.BusyTimeout,
		writeLock: make(chan struct{}, 1),
		sessions:  map[uint32]*session{},
		serving:   map[*context.CancelFunc]struct{}{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	s.cfg = pgserver.Config{
		Auth:       pgserver.Auth{Method: authMethods[opts.Auth], User: opts.User, Password: opts.Password},
		MaxMessage: maxMessageLen,
		Clock:      s.clock,
	}
	if s.busy <= 0 {
		s.busy = 5 * time.Second
	}
	var seed [4]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("litepg: random: %w", err)
	}
	s.nextPID.Store(binary.BigEndian.Uint32(seed[:])%1_000_000 + 1000)

	s.path = opts.Path
	if s.path == "" {
		dir, err := os.MkdirTemp("", "litepg-*")
		if err != nil {
			return nil, fmt.Errorf("litepg: temporary directory: %w", err)
		}
		s.tempDir = dir
		s.path = filepath.Join(dir, "lab.db")
	}
	if strings.ContainsAny(s.path, "?#") {
		s.cleanupTemp()
		return nil, fmt.Errorf("litepg: database path %q must not contain ? or #", s.path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", s.busy.Milliseconds()))
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "cache_size(-16384)")
	q.Add("_pragma", "temp_store(MEMORY)")
	s.dsn = s.path + "?" + q.Encode()

	if err := s.registerFunctions(); err != nil {
		s.cleanupTemp()
		return nil, err
	}
	meta, err := s.drv.Open(s.dsn)
	if err != nil {
		s.cleanupTemp()
		return nil, fmt.Errorf("litepg: open %s: %w", s.path, err)
	}
	s.meta = meta
	mode, err := queryString(meta, "PRAGMA journal_mode=WAL")
	if err == nil && !strings.EqualFold(mode, "wal") {
		err = fmt.Errorf("journal mode is %q", mode)
	}
	if err != nil {
		meta.Close()
		s.cleanupTemp()
		return nil, fmt.Errorf("litepg: enable WAL on %s: %w", s.path, err)
	}
	v, err := queryString(meta, "SELECT sqlite_version()")
	if err != nil {
		meta.Close()
		s.cleanupTemp()
		return nil, fmt.Errorf("litepg: %w", err)
	}
	s.version = "PostgreSQL " + strings.TrimSuffix(ServerVersion, " (litepg)") + " (litepg, SQLite " + v + ")"
	return s, nil
}

// Path returns the database file the server serves.
func (s *Server) Path() string { return s.path }

func (s *Server) cleanupTemp() {
	if s.tempDir != "" {
		os.RemoveAll(s.tempDir)
	}
}

// queryString runs a one-value query on a driver connection.
func queryString(c driver.Conn, query string) (string, error) {
	st, err := c.(driver.ConnPrepareContext).PrepareContext(context.Background(), query)
	if err != nil {
		return "", err
	}
	defer st.Close()
	rows, err := st.(driver.StmtQueryContext).QueryContext(context.Background(), nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		return "", err
	}
	if len(dest) == 0 {
		return "", errors.New("no columns")
	}
	v, _ := textArg(dest[0])
	return v, nil
}

// Serve accepts connections on ln and serves each in its own goroutine.
// It returns nil when ctx ends or ln is closed, ErrServerClosed after
// Close, and the Accept error otherwise. Before returning it closes the
// connections it accepted and waits for their sessions to end; it closes
// ln when ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.serving[&cancel] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.serving, &cancel)
		s.mu.Unlock()
		s.wg.Done()
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			cancel()
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			switch {
			case closed:
				return ErrServerClosed
			case ctx.Err() != nil, errors.Is(err, net.ErrClosed):
				return nil
			}
			return fmt.Errorf("litepg: accept: %w", err)
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			s.serveConn(ctx, c)
		}()
	}
}

// maxMessageLen bounds a frontend message. PostgreSQL allows 1 GB; the
// lab needs far less, and the reader allocates a message's declared
// length before reading it. A message announcing more ends the session
// with FATAL 54000.
const maxMessageLen = pgserver.DefaultMaxMessage

// serveConn runs one client connection to its end.
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	err := pgserver.Serve(ctx, c, &s.cfg, backend{s})
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		ctx.Err() != nil, errors.Is(err, pgserver.ErrCancelRequest):
		s.log.Debug("litepg: session ended", "remote", c.RemoteAddr().String(), "err", err)
	default:
		s.log.Warn("litepg: session failed", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// backend opens sessions for package pgserver.
type backend struct{ s *Server }

// Check refuses replication connections and bad settings in the startup
// packet.
func (backend) Check(st *pgserver.Startup) error {
	if r := st.Params["replication"]; r != "" && r != "false" && r != "off" && r != "0" {
		return &pgError{code: sqlstate.FeatureNotSupported, msg: "litepg does not support replication connections", fatal: true}
	}
	for k, v := range st.Params {
		if _, _, err := startupSetting(k, v); err != nil {
			return err
		}
	}
	return nil
}

// startupSetting checks a startup parameter; name "" marks one that is
// not a setting.
func startupSetting(k, v string) (name, value string, err error) {
	switch k {
	case "user", "database", "options", "replication":
		return "", "", nil
	}
	name = strings.ToLower(k)
	value, perr := checkSetting(name, v)
	if perr != nil {
		return "", "", perr
	}
	return name, value, nil
}

// Open registers a session under a fresh cancel key and opens its
// SQLite connection.
func (b backend) Open(ctx context.Context, pc *pgserver.Conn, st *pgserver.Startup) (*pgserver.Session, error) {
	s := b.s
	sess := newSession(ctx, s, pc)
	db := st.Params["database"]
	if db == "" {
		db = st.User
	}
	sess.params = defaultSettings(st.User, s)
	for k, v := range st.Params {
		if name, v, _ := startupSetting(k, v); name != "" {
			sess.params[name] = v
			sess.startParams[name] = v
		}
	}
	if err := s.register(sess); err != nil {
		return nil, err
	}
	sess.env = env{pid: sess.pid, user: st.User, database: db}
	conn, err := s.drv.Open(s.dsn)
	if err != nil {
		s.unregister(sess)
		return nil, &pgError{code: sqlstate.IOError, msg: "could not open database: " + err.Error(), fatal: true}
	}
	sess.db = conn
	var params []pgserver.Param
	for _, name := range reportedSettings {
		if v, ok := sess.params[strings.ToLower(name)]; ok {
			params = append(params, pgserver.Param{Name: name, Value: v})
		}
	}
	s.log.Debug("litepg: session started", "remote", pc.RemoteAddr().String(), "pid", sess.pid)
	return &pgserver.Session{Handler: sess, Key: pgserver.Key{ProcessID: sess.pid, Secret: sess.secret[:]}, Params: params}, nil
}

// Cancel handles a CancelRequest: it interrupts the running statement of
// the session with the key's process ID if the secret matches, and does
// nothing otherwise, as PostgreSQL does.
func (b backend) Cancel(key pgserver.Key) {
	sess := b.s.session(key.ProcessID)
	if sess == nil || len(key.Secret) != len(sess.secret) || subtle.ConstantTimeCompare(key.Secret, sess.secret[:]) != 1 {
		return
	}
	sess.cancelStatement()
}

// Close stops every Serve call, ends all sessions, closes the database
// and removes a temporary database. It is safe to call more than once;
// later calls return the first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for cancel := range s.serving {
			(*cancel)()
		}
		s.mu.Unlock()
		s.wg.Wait()
		if err := s.meta.Close(); err != nil {
			s.closeErr = fmt.Errorf("litepg: close database: %w", err)
		}
		if s.tempDir != "" {
			if err := os.RemoveAll(s.tempDir); err != nil && s.closeErr == nil {
				s.closeErr = fmt.Errorf("litepg: remove temporary database: %w", err)
			}
		}
	})
	return s.closeErr
}

// register adds a session under a fresh process ID and secret key. It
// fails when the server is at MaxConns.
func (s *Server) register(sess *session) error {
	max := s.opts.MaxConns
	if max <= 0 {
		max = 100
	}
	var key [4]byte
	if _, err := rand.Read(key[:]); err != nil {
		return fmt.Errorf("litepg: random: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &pgError{code: sqlstate.AdminShutdown, msg: "the database system is shutting down", fatal: true}
	}
	if len(s.sessions) >= max {
		return &pgError{code: sqlstate.TooManyConnections, msg: "sorry, too many clients already", fatal: true}
	}
	for {
		pid := s.nextPID.Add(1)
		if _, taken := s.sessions[pid]; pid != 0 && !taken {
			sess.pid, sess.secret = pid, key
			s.sessions[pid] = sess
			return nil
		}
	}
}

func (s *Server) unregister(sess *session) {
	s.mu.Lock()
	if s.sessions[sess.pid] == sess {
		delete(s.sessions, sess.pid)
	}
	s.mu.Unlock()
}

// session returns the live session with process ID pid, or nil.
func (s *Server) session(pid uint32) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[pid]
}

// acquireWrite takes the write lock, waiting at most BusyTimeout. It
// fails with 40001 after the timeout and with ctx's error when ctx ends.
func (s *Server) acquireWrite(ctx context.Context) error {
	select {
	case s.writeLock <- struct{}{}:
		return nil
	default:
	}
	t := s.clock.NewTimer(s.busy)
	defer t.Stop()
	select {
	case s.writeLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return &pgError{code: sqlstate.SerializationFailure, msg: "could not serialize access: timed out waiting for the write lock"}
	}
}

// releaseWrite gives the write lock back.
func (s *Server) releaseWrite() { <-s.writeLock }

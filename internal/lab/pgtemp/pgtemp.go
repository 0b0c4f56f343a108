package pgtemp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/loopport"
)

// ErrNotInstalled is wrapped by Start's error when initdb or postgres
// cannot be found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// Options configure Start. The zero value finds the binaries itself and
// runs as the "postgres" user when the process is root.
type Options struct {
	// BinDir is the directory holding initdb and postgres; "" searches
	// PATH and /usr/lib/postgresql/*/bin.
	BinDir string
	// User is the system user the server runs as when the process is
	// root; "" means "postgres". Ignored when not root.
	User string
	// StartTimeout bounds initdb plus the wait for the server to accept
	// connections; 0 means 90 s.
	StartTimeout time.Duration
	// Clock paces the readiness checks; nil means clock.Real.
	Clock clock.Clock
	// Logger receives the steps at debug level; nil discards them.
	Logger *slog.Logger
	// CertPEM and KeyPEM, when both are set, turn TLS on (ssl = on) with
	// this server certificate and its private key, both PEM. Clients
	// may then negotiate TLS; plain connections are still accepted. nil:
	// the server refuses TLS.
	CertPEM, KeyPEM []byte
	// Settings are more server settings, "name=value" each, passed as -c
	// after pgtemp's own (so they override them): "wal_level=logical".
	Settings []string
	// Start starts the server process (postgres; initdb runs as usual):
	// inside a network namespace, say (netlab's Namespace.Start). nil
	// means cmd.Start. The server is then reached over its Unix socket
	// (SocketURL, Socket), which does not depend on the namespace.
	Start func(cmd *exec.Cmd) error
}

// Server is a running throwaway PostgreSQL. Close it.
type Server struct {
	url     string
	port    int
	dir     string
	clk     clock.Clock
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the postmaster has exited
	waitErr error         // set before exited is closed
	log     *TailBuffer
	version string

	closeOnce sync.Once
	closeErr  error
}

// URL returns the superuser's connection URL (database postgres, TCP on
// loopback, sslmode=disable).
func (s *Server) URL() string { return s.url }

// Socket returns the path of the server's Unix socket.
func (s *Server) Socket() string {
	return filepath.Join(s.dir, ".s.PGSQL."+strconv.Itoa(s.port))
}

// SocketURL returns the superuser's connection URL over the Unix socket
// (database postgres; trusted, no password), which reaches the server
// from any network namespace.
func (s *Server) SocketURL() string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: url.Values{"host": {s.dir}, "port": {strconv.Itoa(s.port)}}.Encode()}
	return u.String()
}

// Dir returns the server's temporary directory (data directory and
// socket), which Close removes.
func (s *Server) Dir() string { return s.dir }

// Version returns the server's version as `postgres --version` reports
// it: "PostgreSQL 16.4 (Debian 16.4-1)"; "" if that failed.
func (s *Server) Version() string { return s.version }

// FindBinaries returns the directory holding initdb and postgres: dir if
// given (and complete), else the one in PATH, else the newest
// /usr/lib/postgresql/*/bin.
func FindBinaries(dir string) (string, error) {
	complete := func(d string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir != "" {
		if complete(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w in %s", ErrNotInstalled, dir)
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && complete(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if complete(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && complete(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if complete(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (install the PostgreSQL server, e.g. apt-get install postgresql, or give its bin directory)", ErrNotInstalled)
}

// versionOf reads the major version from /usr/lib/postgresql/VERSION/bin.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Start initialises and starts a server. ctx bounds the start only; the
// server runs until Close.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := FindBinaries(o.BinDir)
	if err != nil {
		return nil, fmt.Errorf("pgtemp: %w", err)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cred, err := credential(o.User)
	if err != nil {
		return nil, fmt.Errorf("pgtemp: %w", err)
	}
	dir, err := os.MkdirTemp("", "sluice-pg-*")
	if err != nil {
		return nil, fmt.Errorf("pgtemp: temporary directory: %w", err)
	}
	s := &Server{dir: dir, clk: clk, exited: make(chan struct{}), log: &TailBuffer{Max: 8 << 10}}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	password, err := randomHex(16)
	if err != nil {
		return nil, fmt.Errorf("pgtemp: %w", err)
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("pgtemp: %w", err)
	}
	if cred != nil {
		for _, p := range []string{dir, pwfile} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgtemp: hand %s to the server user: %w", p, err)
			}
		}
	}
	if out, err := command(ctx, cred, dir, filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
		s.version = "PostgreSQL " + strings.TrimPrefix(strings.TrimSpace(string(out)), "postgres (PostgreSQL) ")
	}
	data := filepath.Join(dir, "data")
	log.Debug("initdb", "bin", bin, "data", data)
	initdb := command(ctx, cred, dir, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--pwfile="+pwfile, "--auth-local=trust", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtemp: initdb: %w\n%s", err, Tail(out, 2000))
	}
	os.Remove(pwfile)

	// Held until the server listens on it, so servers started at once
	// never pick the same port (PostgreSQL listens with SO_REUSEADDR).
	res, err := loopport.Reserve()
	if err != nil {
		return nil, fmt.Errorf("pgtemp: %w", err)
	}
	defer res.Close()
	port := res.Port()
	args := []string{"-D", data, "-p", strconv.Itoa(port)}
	if o.CertPEM != nil && o.KeyPEM != nil {
		tlsArgs, err := writeTLS(dir, cred, o.CertPEM, o.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("pgtemp: %w", err)
		}
		args = append(args, tlsArgs...)
	}
	args = append(args,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+dir,
		"-c", "max_connections=200",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=128MB",
		"-c", "logging_collector=off")
	for _, kv := range o.Settings {
		args = append(args, "-c", kv)
	}
	s.cmd = command(context.Background(), cred, dir, filepath.Join(bin, "postgres"), args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	start := o.Start
	if start == nil {
		start = (*exec.Cmd).Start
	}
	if err := start(s.cmd); err != nil {
		return nil, fmt.Errorf("pgtemp: start postgres: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres", RawQuery: "sslmode=disable"}
	s.url = u.String()
	s.port = port
	log.Debug("waiting for postgres", "port", port)
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return nil, err
	}
	ok = true
	return s, nil
}

// waitReady connects until the server answers, exits or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, connErr := pgconn.Connect(cctx, s.SocketURL())
		cancel()
		if connErr == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgtemp: postgres exited during start (%v):\n%s", s.waitErr, s.log.String())
		default:
		}
		if err := clock.Sleep(ctx, s.clk, 100*time.Millisecond); err != nil {
			return fmt.Errorf("pgtemp: postgres did not accept connections: %w (last attempt: %v)\n%s", err, connErr, s.log.String())
		}
	}
}

// Close stops the server and removes its directory. It is safe to call
// more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.closeErr = os.RemoveAll(s.dir)
	})
	return s.closeErr
}

// stop asks the postmaster for a fast shutdown (SIGINT) and escalates to
// an immediate shutdown (SIGQUIT) after 20 s and SIGKILL after 10 more.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, 20 * time.Second}, {syscall.SIGQUIT, 10 * time.Second}, {syscall.SIGKILL, 10 * time.Second}} {
		select {
		case <-s.exited:
			return
		default:
		}
		s.cmd.Process.Signal(step.sig)
		t := s.clk.NewTimer(step.wait)
		select {
		case <-s.exited:
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// credential returns the identity to run the server as: nil when the
// process is not root, the named user (default postgres) when it is.
func credential(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: need the system user %q to run the server as: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s: non-numeric uid or gid", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// writeTLS writes the server certificate and key into dir, readable only
// by the server user (postgres refuses a key others can read), and
// returns the settings that turn TLS on with them.
func writeTLS(dir string, cred *syscall.Credential, certPEM, keyPEM []byte) ([]string, error) {
	cert, key := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	for _, f := range []struct {
		path string
		b    []byte
	}{{cert, certPEM}, {key, keyPEM}} {
		if err := os.WriteFile(f.path, f.b, 0o600); err != nil {
			return nil, fmt.Errorf("TLS files: %w", err)
		}
		if cred != nil {
			if err := os.Chown(f.path, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("hand %s to the server user: %w", f.path, err)
			}
		}
	}
	return []string{"-c", "ssl=on", "-c", "ssl_cert_file=" + cert, "-c", "ssl_key_file=" + key}, nil
}

// command prepares a server program, run as cred when set, in dir.
func command(ctx context.Context, cred *syscall.Credential, dir, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if cred != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		c.Env = append(c.Env, "HOME="+dir)
	}
	return c
}

// Password returns a new random password: 24 hex digits, for a role of
// a throwaway server.
func Password() (string, error) { return randomHex(12) }

// randomHex returns n random bytes in hex.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Tail returns the last n bytes of b as text, without the white space
// at either end: the end of what a program printed, for an error
// message.
func Tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// TailBuffer keeps the last Max bytes written to it: a program's
// output, for an error message. It is safe for concurrent use.
type TailBuffer struct {
	// Max is how many bytes it keeps; set it before the first Write.
	Max int

	mu  sync.Mutex
	buf []byte // guarded by mu
}

// Write keeps the end of p; it never fails.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.Max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.Max:]...)
	}
	return len(p), nil
}

// String returns what it keeps (see Tail).
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Tail(t.buf, t.Max)
}

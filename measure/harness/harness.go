// Package harness starts a real sluice process for the benchmark programs
// under measure/ and talks to its admin console, so every figure they print
// comes from the binary users run, over real sockets. It also holds what
// the programs share: the -etcd flag (EtcdFlag), the relays' flags
// (RelayFlags), a main that stops on a signal (Main), a loop serving each
// accepted connection (ServeEach) and one forwarding pairs (ServePairs).
package harness

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/loopport"
)

// Sluice is a running `sluice serve`.
type Sluice struct {
	Bin    string // path of the built binary
	Listen string // data route address
	Admin  string // admin console address
	cmd    *exec.Cmd
	dir    string
	admin  *pgx.Conn
}

// Build compiles ./cmd/sluice into a temporary directory, in the
// product's module (productRoot), so it works from the measure module
// too.
func Build() (bin, dir string, err error) {
	root, err := productRoot()
	if err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", "sluice-bench")
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "sluice")
	c := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	c.Dir = root
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	if err := c.Run(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("go build ./cmd/sluice: %w", err)
	}
	return bin, dir, nil
}

// productRoot returns the product module's directory as the go tool
// resolves it from the working directory: the measure module reaches it
// through its replace directive.
func productRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/sluicelab/sluice").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/sluicelab/sluice: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// FreeAddr returns a loopback address nothing listens on yet, reserved
// (package loopport) for as long as the measurement program runs, so two
// calls never return the same address; the server it is for can listen on
// it all the same.
func FreeAddr() string {
	r, err := loopport.Reserve()
	if err != nil {
		panic(err)
	}
	return r.Addr()
}

// Start builds sluice and serves one route of protocol to upstream, with
// an admin console on loopback. extra is appended to the serve command.
func Start(ctx context.Context, protocol, upstream string, extra ...string) (*Sluice, error) {
	bin, dir, err := Build()
	if err != nil {
		return nil, err
	}
	s := &Sluice{Bin: bin, dir: dir, Listen: FreeAddr(), Admin: FreeAddr()}
	args := append([]string{"serve", "--listen", s.Listen, "--upstream", upstream, "--protocol", protocol,
		"--admin", s.Admin, "--log-level", "warn"}, extra...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		s.Stop()
		return nil, err
	}
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", s.Admin); err == nil {
			c.Close()
			break
		}
		if i > 200 {
			s.Stop()
			return nil, fmt.Errorf("sluice did not start listening on %s", s.Admin)
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.admin, err = pgx.Connect(ctx, fmt.Sprintf("postgres://admin@%s/sluice?sslmode=disable&default_query_exec_mode=simple_protocol", s.Admin))
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("admin console: %w", err)
	}
	return s, nil
}

// Exec runs admin statements, in order.
func (s *Sluice) Exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if _, err := s.admin.Exec(ctx, q); err != nil {
			return fmt.Errorf("admin %q: %w", q, err)
		}
	}
	return nil
}

// Query runs an admin SHOW or SELECT and returns its rows as text.
func (s *Sluice) Query(ctx context.Context, q string) ([]map[string]string, error) {
	rows, err := s.admin.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for i, fd := range rows.FieldDescriptions() {
			m[fd.Name] = fmt.Sprint(vals[i])
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// RSS returns the sluice process's resident set size in KiB.
func (s *Sluice) RSS() float64 { return ProcessRSS(s.cmd.Process.Pid) }

// ProcessRSS returns a process's resident set size (VmRSS) in KiB, or 0
// if it cannot be read.
func ProcessRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), "%f", &kb)
			return kb
		}
	}
	return 0
}

// Stop ends the process and removes the binary.
func (s *Sluice) Stop() {
	if s.admin != nil {
		s.admin.Close(context.Background())
	}
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(s.dir)
}

// ReplaceHostPort returns a PostgreSQL URL with its host:port replaced.
func ReplaceHostPort(url, addr string) (string, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, cfg.Password, addr, cfg.Database), nil
}

// HostPort returns the host:port of a PostgreSQL URL.
func HostPort(url string) (string, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), nil
}

// Env returns the value of key or def.
func Env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// RelayFlags defines the flags of a program that relays clients to a
// server: -listen, the address to accept clients on (listen its
// default), and -upstream, the address to relay each client to.
func RelayFlags(listen string) (listenAddr, upstream *string) {
	return flag.String("listen", listen, "address to accept clients on"),
		flag.String("upstream", "127.0.0.1:15432", "address to relay each client to")
}

// Main runs the work of the program name with a context that ends on
// SIGINT or SIGTERM; when run fails, it prints "name: error" on stderr
// and exits with status 1.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// DefaultEtcd is the shared test cluster's client addresses, as
// scripts/testdb sets it up.
const DefaultEtcd = "127.0.0.1:12379,127.0.0.1:12389,127.0.0.1:12399"

// EtcdFlag defines the flag -etcd: etcd client addresses, comma-separated,
// by default SLUICE_TEST_ETCD or DefaultEtcd. The returned function,
// called after flag.Parse, gives the addresses as host:port, without
// any http:// and without empty ones.
func EtcdFlag() func() []string {
	s := flag.String("etcd", Env("SLUICE_TEST_ETCD", DefaultEtcd), "etcd client addresses, comma-separated")
	return func() []string {
		var eps []string
		for e := range strings.SplitSeq(*s, ",") {
			if e = strings.TrimPrefix(strings.TrimSpace(e), "http://"); e != "" {
				eps = append(eps, e)
			}
		}
		return eps
	}
}

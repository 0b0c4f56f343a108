package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// The sluice binary, built once for the tests that run it as a process.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
	binOut  []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// sluiceBinary builds this command once per test run and returns the
// path of the binary.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	goTool := testenv.Program(t, "go")
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "sluice-bin-*")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sluice")
		binOut, binErr = exec.Command(goTool, "build", "-o", binPath, ".").CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("go build: %v\n%s", binErr, binOut)
	}
	return binPath
}

// syncBuffer is a bytes.Buffer safe for concurrent use: a process writes
// it while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// process is a running `sluice` started by a test.
type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{} // closed once the process has exited
	err    error         // Wait's result; set before exited is closed
}

// startSluice runs the binary with args; the test's end kills it if it
// is still running.
func startSluice(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(sluiceBinary(t), args...), stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// wait waits up to d for the process to exit.
func (p *process) wait(t *testing.T, d time.Duration) {
	t.Helper()
	timer := clock.Real{}.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C():
		t.Fatalf("process still running after %v\n%s", d, p.stderr)
	}
}

// TestServeSurvivesSIGHUP sends SIGHUP to a serving process: it logs that
// live reload is not supported and keeps serving the open session.
func TestServeSurvivesSIGHUP(t *testing.T) {
	url := testenv.PostgresURL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	route := freeAddr(t)
	p := startSluice(t, "serve", "--listen", route, "--upstream", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), "--protocol", "postgres")
	ctx := context.Background()
	var conn *pgx.Conn
	waitUntil(t, 30*time.Second, "serve to accept a session", func() bool {
		if !p.running() {
			t.Fatalf("serve exited: %v\n%s", p.err, p.stderr)
		}
		conn, err = pgx.Connect(ctx, "postgres://"+cfg.User+":"+cfg.Password+"@"+route+"/"+cfg.Database+"?sslmode=disable")
		return err == nil
	})
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatal(err)
	}

	const want = "SIGHUP received: live reload is not supported; configuration unchanged"
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the SIGHUP warning", func() bool {
		if !p.running() {
			t.Fatalf("SIGHUP ended the process: %v\n%s", p.err, p.stderr)
		}
		return strings.Contains(p.stderr.String(), want)
	})
	if line := lineWith(p.stderr.String(), want); !strings.Contains(line, "level=WARN") {
		t.Errorf("log line %q: want level WARN", line)
	}
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n); err != nil || n != 42 {
		t.Fatalf("session after SIGHUP: %d, %v", n, err)
	}
	if !p.running() {
		t.Fatalf("process exited: %v\n%s", p.err, p.stderr)
	}

	// SIGTERM still shuts down cleanly.
	conn.Close(ctx)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 30*time.Second)
	if p.err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", p.err, p.stderr)
	}
}

// lineWith returns the first line of s containing sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestServeConfigClashExit2 runs serve on configurations that clash
// while the test itself holds every address they name: each run must
// exit 2 naming the file, key and value, without a SQLSTATE, having
// tried to bind nothing (a bind would have failed first, with exit 1).
func TestServeConfigClashExit2(t *testing.T) {
	held := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().String()
	}
	routeA, routeB, adminAddr := held(), held(), held()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	twice := write("twice.yaml", "admin:\n  listen: "+adminAddr+"\nroutes:\n  - name: a\n    listen: "+routeA+
		"\n    upstream: 127.0.0.1:1\n  - name: b\n    listen: "+routeA+"\n    upstream: 127.0.0.1:1\n")
	nolink := write("nolink.yaml", "admin:\n  listen: "+adminAddr+"\nroutes:\n  - name: a\n    listen: "+routeA+
		"\n    upstream: 127.0.0.1:1\n  - name: b\n    listen: "+routeB+"\n    upstream: 127.0.0.1:1\n    link: nope\n")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", twice},
			"config " + twice + `: routes[1].listen: bad value "` + routeA + `": address overlaps "` + routeA + `" given at routes[0].listen in ` + twice},
		{[]string{"serve", "--config", nolink},
			"config " + nolink + `: routes[1].link: bad value "nope": link "nope" does not exist`},
		{[]string{"serve", "--listen", routeA, "--upstream", "127.0.0.1:1", "--admin", routeA},
			`command line: --admin: bad value "` + routeA + `": address overlaps "` + routeA + `" given at --listen`},
	}
	for _, tt := range tests {
		p := startSluice(t, tt.args...)
		p.wait(t, 30*time.Second)
		code := p.cmd.ProcessState.ExitCode()
		out := p.stderr.String()
		if code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", tt.args, code, out)
		}
		if !strings.Contains(out, "sluice: "+tt.want+"\n") {
			t.Errorf("%v: stderr\n%s\nwant the line\nsluice: %s", tt.args, out, tt.want)
		}
		if strings.Contains(out, "listening") || strings.Contains(out, "42704") {
			t.Errorf("%v: stderr shows a bind or a SQLSTATE:\n%s", tt.args, out)
		}
	}
}

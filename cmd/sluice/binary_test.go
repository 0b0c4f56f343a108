package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// process is a running `sluice` started by a test.
type process struct {
	cmd    *exec.Cmd
	stderr *testenv.Buffer
	exited chan struct{} // closed once the process has exited
	err    error         // Wait's result; set before exited is closed
}

// startSluice runs the binary with args; the test's end kills it if it
// is still running.
func startSluice(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(sluiceBinary(t), args...), stderr: &testenv.Buffer{}, exited: make(chan struct{})}
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

// pgServe writes a configuration file of one postgres route named pg
// listening on listen, to the test PostgreSQL, and starts `sluice serve
// --config FILE` with extra flags; it returns the process, the file and
// the test server's URL.
func pgServe(t *testing.T, listen string, extra ...string) (p *process, path, url string) {
	t.Helper()
	url = testenv.PostgresURL(t)
	path = filepath.Join(t.TempDir(), "sluice.yaml")
	writePGRoutes(t, path, "pg", listen)
	return startSluice(t, append([]string{"serve", "--config", path}, extra...)...), path, url
}

// writePGRoutes writes a configuration file of postgres routes to the
// test server, given as pairs of name and listen address, with a
// shutdown_grace of 1 s.
func writePGRoutes(t *testing.T, path string, routes ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(pgRoutesConfig(t, time.Second, routes...)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pgRoutesConfig is the text of a configuration file of postgres routes
// to the test server, given as pairs of name and listen address, with
// shutdown_grace set to grace.
func pgRoutesConfig(t *testing.T, grace time.Duration, routes ...string) string {
	t.Helper()
	up := testenv.PostgresAddr(t)
	body := "shutdown_grace: " + grace.String() + "\nroutes:\n"
	for i := 0; i+1 < len(routes); i += 2 {
		body += "  - name: " + routes[i] + "\n    listen: " + routes[i+1] + "\n    upstream: " + up + "\n    protocol: postgres\n"
	}
	return body
}

// waitSession waits up to 30 s until p accepts a session to the
// database of url through addr; the session closes when the test ends.
func waitSession(t *testing.T, p *process, url, addr string) *pgx.Conn {
	t.Helper()
	cfg := testenv.PostgresConfigVia(t, url, addr)
	var conn *pgx.Conn
	testenv.Eventually(t, 30*time.Second, "a session through "+addr, func() bool {
		if !p.running() {
			t.Fatalf("serve exited: %v\n%s", p.err, p.stderr)
		}
		var err error
		conn, err = pgx.ConnectConfig(context.Background(), cfg.Copy())
		return err == nil
	})
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestServeSIGHUPReloads sends SIGHUP to a serving process whose
// configuration file has gained a route: it logs the reload at INFO,
// serves the new route, and keeps the open session of the old one; a
// SIGHUP with a broken file logs the refusal at ERROR naming the file,
// key and value, and changes nothing.
func TestServeSIGHUPReloads(t *testing.T) {
	testenv.SkipShort(t, "takes 5s here")
	first, second := freeAddr(t), freeAddr(t)
	p, path, url := pgServe(t, first)
	conn := waitSession(t, p, url, first)
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&n); err != nil {
		t.Fatal(err)
	}

	writePGRoutes(t, path, "pg", first, "pg2", second)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	const reloaded = "configuration reloaded"
	testenv.Eventually(t, 10*time.Second, "the reload's log line", func() bool {
		if !p.running() {
			t.Fatalf("SIGHUP ended the process: %v\n%s", p.err, p.stderr)
		}
		return strings.Contains(p.stderr.String(), reloaded)
	})
	if line := lineWith(p.stderr.String(), reloaded); !strings.Contains(line, "level=INFO") || !strings.Contains(line, "added=[pg2]") {
		t.Errorf("log line %q: want level INFO and added=[pg2]", line)
	}
	c2 := waitSession(t, p, url, second)
	if err := c2.QueryRow(context.Background(), "SELECT 2").Scan(&n); err != nil || n != 2 {
		t.Fatalf("session through the added route: %d, %v", n, err)
	}
	if err := conn.QueryRow(context.Background(), "SELECT 40 + 2").Scan(&n); err != nil || n != 42 {
		t.Fatalf("session opened before SIGHUP: %d, %v", n, err)
	}

	if err := os.WriteFile(path, []byte("routes:\n  - name: pg\n    listen: "+first+"\n    upstream: 127.0.0.1:1\n    protocol: postgres\n    dial_timeout: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	const refused = "reload refused; configuration unchanged"
	testenv.Eventually(t, 10*time.Second, "the refusal's log line", func() bool { return strings.Contains(p.stderr.String(), refused) })
	line := lineWith(p.stderr.String(), refused)
	for _, want := range []string{"level=ERROR", "file=" + path, "key=routes[0].dial_timeout", "value=soon"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q: want %s", line, want)
		}
	}
	if err := c2.QueryRow(context.Background(), "SELECT 3").Scan(&n); err != nil || n != 3 {
		t.Fatalf("session after a refused reload: %d, %v", n, err)
	}

	// SIGTERM still shuts down cleanly.
	conn.Close(context.Background())
	c2.Close(context.Background())
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 30*time.Second)
	if p.err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", p.err, p.stderr)
	}
}

// TestReloadCommand runs `sluice reload` against a serving process,
// through the HTTP API and through the admin console: an added route
// is served after it, a broken file makes it exit 1 naming the file,
// key and value and changes nothing, and a removed route stops
// accepting.
func TestReloadCommand(t *testing.T) {
	testenv.SkipShort(t, "takes 4s here")
	first, second := freeAddr(t), freeAddr(t)
	adminAddr, httpAddr := freeAddr(t), freeAddr(t)
	p, path, url := pgServe(t, first, "--admin", adminAddr, "--http", httpAddr)
	conn := waitSession(t, p, url, first)

	reload := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(sluiceBinary(t), append([]string{"reload"}, args...)...)
		cmd.Env = append(os.Environ(), "SLUICE_HTTP_TOKEN=", "SLUICE_ADMIN_PASSWORD=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("sluice reload %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	for _, via := range [][]string{{"--http", httpAddr}, {"--admin", adminAddr}} {
		t.Run(via[0], func(t *testing.T) {
			writePGRoutes(t, path, "pg", first, "pg2", second)
			code, out := reload(via...)
			if code != 0 || !strings.Contains(out, "route pg2 added") {
				t.Fatalf("reload adding pg2: exit %d\n%s", code, out)
			}
			c2 := waitSession(t, p, url, second)
			var n int
			if err := c2.QueryRow(context.Background(), "SELECT 2").Scan(&n); err != nil || n != 2 {
				t.Fatalf("session through the added route: %d, %v", n, err)
			}

			if err := os.WriteFile(path, []byte("routes:\n  - name: pg\n    listen: "+first+"\n    upstream: 127.0.0.1:1\n    protocol: postgres\n    link: nope\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out = reload(via...)
			want := "config " + path + `: routes[0].link: bad value "nope": link "nope" does not exist`
			if code != 1 || !strings.Contains(out, want) {
				t.Fatalf("reload of a broken file: exit %d\n%s\nwant exit 1 and %s", code, out, want)
			}
			if err := c2.QueryRow(context.Background(), "SELECT 3").Scan(&n); err != nil || n != 3 {
				t.Fatalf("session after a refused reload: %d, %v", n, err)
			}

			writePGRoutes(t, path, "pg", first)
			code, out = reload(via...)
			if code != 0 || !strings.Contains(out, "route pg2 removed") {
				t.Fatalf("reload removing pg2: exit %d\n%s", code, out)
			}
			if c, err := net.Dial("tcp", second); err == nil {
				c.Close()
				t.Fatalf("the removed route's %s still accepts", second)
			}
			c2.Close(context.Background())
		})
	}
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&n); err != nil {
		t.Fatalf("session of the unchanged route: %v", err)
	}
	code, out := reload()
	if code != 2 {
		t.Errorf("reload without --http or --admin: exit %d, want 2\n%s", code, out)
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
	testenv.SkipShort(t, "builds the sluice binary and runs it")
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

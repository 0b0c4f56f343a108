package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// freeAddr returns a loopback address that is free for a listener.
func freeAddr(t testing.TB) string { return testenv.DeadAddr(t) }

// testApp runs the whole of `sluice serve` in process: a postgres route to
// the test server and an admin console with a password.
type testApp struct {
	*stack.Stack
	route, admin, catalog string
	pgURL                 string
}

func startApp(t *testing.T, routes ...config.Route) *testApp {
	t.Helper()
	ta := &testApp{route: freeAddr(t), admin: freeAddr(t), catalog: filepath.Join(t.TempDir(), "catalog.json"), pgURL: testenv.PostgresURL(t)}
	c := &config.Config{
		Catalog: ta.catalog,
		Grace:   time.Second,
		Admin:   config.Admin{Listen: ta.admin, Password: "adminpw"},
		Routes: append([]config.Route{{Name: "pg", Listen: ta.route, Protocol: "postgres",
			Upstream: testenv.PostgresAddr(t)}}, routes...),
	}
	ta.Stack = runApp(t, c)
	return ta
}

// runApp starts the app of configuration c, closed when the test ends;
// it logs to stderr with -v.
func runApp(t *testing.T, c *config.Config) *stack.Stack {
	t.Helper()
	return runAppLogging(t, c, testenv.Logger(slog.LevelInfo))
}

// runAppLogging is runApp with the app's logger.
func runAppLogging(t *testing.T, c *config.Config, log *slog.Logger) *stack.Stack {
	t.Helper()
	st, err := stack.New(context.Background(), stack.Options{Config: c, Logger: log, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// psqlAdmin runs SQL through the real psql against the admin console.
func (ta *testApp) psqlAdmin(t *testing.T, sql string) string {
	t.Helper()
	return psqlConsole(t, ta.admin, "", sql)
}

// psqlConsole runs sql through the real psql against the admin console
// at addr (user admin, password adminpw) and returns its output; a
// failure fails t, with where (such as "on a") in the message.
func psqlConsole(t *testing.T, addr, where, sql string) string {
	t.Helper()
	out, err := runPsql(t, addr, "admin", "sluice", []string{"PGPASSWORD=adminpw"}, "-v", "ON_ERROR_STOP=1", "-X", "-c", sql)
	if err != nil {
		t.Fatalf("psql %s %q: %v\n%s", where, sql, err, out)
	}
	return out
}

// runPsql runs the real psql to the server at addr (host:port) as user
// on database db, with env added to this process's environment (such as
// PGPASSWORD=...) and args after the connection's flags; it returns the
// combined output and the run's error.
func runPsql(t *testing.T, addr, user, db string, env []string, args ...string) (string, error) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("psql to %q: %v", addr, err)
	}
	cmd := exec.Command(testenv.Program(t, "psql"), append([]string{"-h", host, "-p", port, "-U", user, "-d", db}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (ta *testApp) userURL(user, password string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/sluice?sslmode=disable", user, password, ta.route)
}

// ensureRole creates a PostgreSQL login role.
func ensureRole(t *testing.T, url, role, password string) {
	t.Helper()
	ctx := context.Background()
	c := testenv.ConnectPG(t, url)
	_, err := c.Exec(ctx, fmt.Sprintf("DO $$BEGIN CREATE ROLE %s LOGIN PASSWORD '%s'; EXCEPTION WHEN duplicate_object THEN ALTER ROLE %s PASSWORD '%s'; END$$", role, password, role, password))
	if err != nil {
		t.Fatal(err)
	}
}

const bigCopy = `COPY (SELECT i, repeat(md5(i::text), 30) FROM generate_series(1, 100000) i) TO STDOUT` // ~97 MB

// hashWriter hashes what it is given and notes when the first byte came.
type hashWriter struct {
	h     hash.Hash
	n     int64
	first chan struct{}
}

func newHashWriter() *hashWriter { return &hashWriter{h: sha256.New(), first: make(chan struct{})} }

func (w *hashWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		close(w.first)
	}
	w.n += int64(len(p))
	return w.h.Write(p)
}

// statementRow finds user's COPY in SHOW STATEMENTS.
func statementRow(t *testing.T, ta *testApp, user string) map[string]string {
	t.Helper()
	return findStatement(t, ta, func(m map[string]string) bool {
		return m["user"] == user && strings.HasPrefix(m["sql"], "COPY") && m["state"] == "running"
	})
}

// findStatement returns the first row of SHOW STATEMENTS, column name to
// value, that match accepts; nil if there is none.
func findStatement(t *testing.T, ta *testApp, match func(map[string]string) bool) map[string]string {
	t.Helper()
	res, err := ta.Manager().Service().Exec(context.Background(), "SHOW STATEMENTS")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		m := map[string]string{}
		for i, c := range res.Columns {
			m[c] = row[i]
		}
		if match(m) {
			return m
		}
	}
	return nil
}

// TestExceptRuleEndToEnd runs the three reference statements verbatim (with
// thresholds small enough for a test) in psql against the admin console,
// then has user1 pull a large COPY through the postgres route: the rule
// penalises it within elapsedtime + one check period, its bytes flow in
// the low class, and the data arrives byte-identical. With action='abort'
// the statement is cancelled, the client gets 57014 and the session goes
// on.
func TestExceptRuleEndToEnd(t *testing.T) {
	testenv.SkipShort(t, "takes 9s here")
	ta := startApp(t)
	ensureRole(t, ta.pgURL, "user1", "xxxxxxxx")
	ta.psqlAdmin(t, `CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=1, ELAPSEDTIME=2, action='penalty');
CREATE RESOURCE POOL rp1 WITH(EXCEPT_RULE='bandwidth_rule1');
CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';`)
	// 20 MB/s keeps the ~97 MB transfer running for about 5 s.
	ta.psqlAdmin(t, `ALTER LINK default WITH (capacity='20MB')`)
	if out := ta.psqlAdmin(t, "SHOW USERS"); !strings.Contains(out, "user1") || !strings.Contains(out, "rp1") {
		t.Fatalf("SHOW USERS:\n%s", out)
	}

	direct := newHashWriter()
	ctx := context.Background()
	dc, err := pgconn.Connect(ctx, ta.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.CopyTo(ctx, direct, bigCopy); err != nil {
		t.Fatal(err)
	}
	dc.Close(ctx)

	t.Run("penalty", func(t *testing.T) {
		c, err := pgconn.Connect(ctx, ta.userURL("user1", "xxxxxxxx"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		w := newHashWriter()
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := c.CopyTo(ctx, w, bigCopy); done <- err }()
		<-w.first
		var penalisedAt time.Duration
		for penalisedAt == 0 {
			select {
			case err := <-done:
				t.Fatalf("COPY ended (%v) before it was penalised", err)
			case <-time.After(50 * time.Millisecond):
			}
			if row := statementRow(t, ta, "user1"); row != nil && row["penalised"] == "yes" {
				penalisedAt = time.Since(start)
				if row["class"] != "low" || !strings.Contains(row["except_info"], "bandwidth_rule1") {
					t.Fatalf("penalised statement row: %v", row)
				}
			}
		}
		// elapsedtime 2 s plus one check period (5 s by default).
		if penalisedAt > 7*time.Second+500*time.Millisecond {
			t.Fatalf("penalised after %v, want within 7 s", penalisedAt)
		}
		lowBefore := lowBytes(ta)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if lowBytes(ta) <= lowBefore {
			t.Fatal("no bytes flowed in the low class after the penalty")
		}
		if w.n != direct.n || string(w.h.Sum(nil)) != string(direct.h.Sum(nil)) {
			t.Fatalf("penalised transfer differs: %d bytes vs %d direct", w.n, direct.n)
		}
		if out := ta.psqlAdmin(t, "SELECT * FROM gs_wlm_session_statistics"); !strings.Contains(out, "bandwidth_rule1") {
			// The view lists running statements; the COPY has ended, so
			// check the history instead.
			if out2 := ta.psqlAdmin(t, "SELECT * FROM gs_wlm_session_history"); !strings.Contains(out2, "bandwidth_rule1") {
				t.Fatalf("except_info missing from the views:\n%s\n%s", out, out2)
			}
		}
	})

	t.Run("abort", func(t *testing.T) {
		ta.psqlAdmin(t, `ALTER EXCEPT RULE bandwidth_rule1 WITH(action='abort')`)
		c, err := pgconn.Connect(ctx, ta.userURL("user1", "xxxxxxxx"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		w := newHashWriter()
		start := time.Now()
		_, err = c.CopyTo(ctx, w, bigCopy)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("COPY error = %v, want SQLSTATE 57014", err)
		}
		if el := time.Since(start); el > 8*time.Second {
			t.Fatalf("cancelled after %v", el)
		}
		res := c.ExecParams(ctx, "SELECT 40 + 2", nil, nil, nil, nil).Read()
		if res.Err != nil || string(res.Rows[0][0]) != "42" {
			t.Fatalf("next query after abort: %v %q", res.Err, res.Rows)
		}
	})
}

func lowBytes(ta *testApp) int64 {
	st := ta.Manager().Runtime().Link("default").Stats()
	return st.Directions[link.Down].Classes[link.Low].Bytes + st.Directions[link.Up].Classes[link.Low].Bytes
}

// TestCatalogSurvivesRestart checks the catalog file: a restart keeps it
// and a corrupted file stops sluice with an error naming the file.
func TestCatalogSurvivesRestart(t *testing.T) {
	ta := startApp(t)
	ta.psqlAdmin(t, `CREATE EXCEPT RULE r1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty'); CREATE RESOURCE POOL p1 WITH(EXCEPT_RULE='r1'); CREATE USER u1 RESOURCE POOL 'p1';`)
	ta.Close()
	cfg := &config.Config{Catalog: ta.catalog, Grace: time.Second}
	a, err := stack.New(context.Background(), stack.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Manager().Service().Exec(context.Background(), "SHOW USERS")
	a.Close()
	if err != nil || len(res.Rows) != 1 || !strings.Contains(strings.Join(res.Rows[0], " "), "p1") {
		t.Fatalf("after restart SHOW USERS = %v, %v", res.Rows, err)
	}
	if err := os.WriteFile(ta.catalog, []byte(`{"rules": {"r1": {"bandwidth": `), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	code := run(context.Background(), []string{"serve", "--catalog", ta.catalog, "--listen", freeAddr(t), "--upstream", "127.0.0.1:1"}, &stderr, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), ta.catalog) {
		t.Fatalf("corrupted catalog: exit %d, stderr %q", code, stderr.String())
	}
}

// TestPoolTargetedDelay: two users on one route; only the user whose pool
// carries a delay sees it, and changing the pool applies to the live
// session.
func TestPoolTargetedDelay(t *testing.T) {
	ta := startApp(t)
	ensureRole(t, ta.pgURL, "slowuser", "slow")
	ta.psqlAdmin(t, `CREATE RESOURCE POOL far WITH (delay='40ms'); CREATE USER slowuser RESOURCE POOL 'far';`)
	ctx := context.Background()
	rtt := func(url string) time.Duration {
		c, err := pgconn.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		best := time.Hour
		for i := 0; i < 5; i++ {
			start := time.Now()
			if err := c.Exec(ctx, "SELECT 1").Close(); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	slow := rtt(ta.userURL("slowuser", "slow"))
	fast := rtt(ta.userURL("sluice", "sluice"))
	// 40 ms each way: at least 80 ms per round trip for the pool's user.
	if slow < 80*time.Millisecond {
		t.Fatalf("targeted user's round trip %v, want >= 80ms", slow)
	}
	if fast >= 80*time.Millisecond {
		t.Fatalf("untargeted user's round trip %v, want well under the pool's 80ms", fast)
	}

	// A live session follows ALTER RESOURCE POOL.
	c, err := pgconn.Connect(ctx, ta.userURL("slowuser", "slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	ta.psqlAdmin(t, `ALTER RESOURCE POOL far WITH (delay='0ms')`)
	start := time.Now()
	for i := 0; i < 5; i++ {
		if err := c.Exec(ctx, "SELECT 1").Close(); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el >= 5*80*time.Millisecond {
		t.Fatalf("live session still delayed after ALTER: 5 queries took %v", el)
	}
}

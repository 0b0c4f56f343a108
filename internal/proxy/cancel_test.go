package proxy

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestCancelThroughRoute stops SELECT pg_sleep(30) three ways through a
// postgres route: a client CancelRequest (what psql's Ctrl-C sends), psql
// itself on SIGINT, and sluice's own Registry.Cancel. Each time the client
// gets 57014 and the session runs a next query.
func TestCancelThroughRoute(t *testing.T) {
	url, srv, addr := pgRoute(t)
	purl := viaProxy(t, url, addr)
	ctx := context.Background()

	admin := connect(t, url)
	running := func(t *testing.T) *session.Statement { return awaitPgSleep(t, ctx, srv, admin, sleepSQL(t)) }
	sleepThenCancel := func(t *testing.T, cancel func(c *pgconn.PgConn, st *session.Statement) error) {
		c := connect(t, purl)
		done := startPgSleep(t, ctx, c)
		st := running(t)
		start := time.Now()
		if err := cancel(c, st); err != nil {
			t.Fatal(err)
		}
		err := <-done
		took := time.Since(start)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("error = %v, want 57014", err)
		}
		if took > 5*time.Second {
			t.Fatalf("cancel took %v", took)
		}
		t.Logf("cancelled %v after the request", took)
		if st.Outcome() != session.Cancelled {
			t.Fatalf("statement outcome %v, want cancelled", st.Outcome())
		}
		res := c.ExecParams(ctx, "SELECT 1", nil, nil, nil, nil).Read()
		if res.Err != nil {
			t.Fatalf("next query: %v", res.Err)
		}
	}
	t.Run("client CancelRequest", func(t *testing.T) {
		sleepThenCancel(t, func(c *pgconn.PgConn, _ *session.Statement) error { return c.CancelRequest(ctx) })
	})
	t.Run("Registry.Cancel", func(t *testing.T) {
		sleepThenCancel(t, func(_ *pgconn.PgConn, st *session.Statement) error { return srv.Registry().Cancel(ctx, st) })
	})
	t.Run("psql SIGINT", func(t *testing.T) {
		cmd := exec.Command(testenv.Program(t, "psql"), purl, "-X", "-c", sleepSQL(t))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		running(t)
		start := time.Now()
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("psql returned %v after SIGINT", took)
		}
		if !strings.Contains(out.String(), "canceling statement due to user request") {
			t.Fatalf("psql output: %s", out.String())
		}
	})
}

// TestMySQLRegistryCancelTwiceAtOnce cancels a running SLEEP through a
// mysql route with Registry.Cancel twice at once. Each cancel dials a
// connection of its own beside the session's to run KILL QUERY; neither
// may disturb the other or the session, which runs its next query and
// closes with the client.
func TestMySQLRegistryCancelTwiceAtOnce(t *testing.T) {
	cfg := testenv.MySQLConfig(t)
	srv, addr := startProxy(t, "mysql", cfg.Addr)
	pcfg := cfg.Clone()
	pcfg.Addr = addr
	ctx := context.Background()
	db := testenv.OpenMySQL(t, pcfg)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := startSleep(ctx, conn, "SELECT SLEEP(30) /* twice at once */")
	var st *session.Statement
	testenv.Eventually(t, 10*time.Second, "the SLEEP in the registry", func() bool {
		for _, s := range srv.Registry().Active() {
			if strings.Contains(s.SQL, "twice at once") {
				st = s
				return true
			}
		}
		return false
	})
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- srv.Registry().Cancel(ctx, st) }()
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, session.ErrNotRunning) {
			t.Errorf("Registry.Cancel: %v", err)
		}
	}
	if err := sleepResult(done, false); err != nil {
		t.Fatal(err)
	}
	if err := myAfter(ctx, conn); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	db.Close()
	waitNoSessions(t, srv)
}

package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/testenv"
)

// tlsRoute starts a PostgreSQL with TLS on and a serve stack with one
// route to it over TLS (upstream_tls with a CA file), and returns the
// route's address and a direct connection to the server.
func tlsRoute(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	srv := testenv.StartTLSPostgres(t)
	route := freeAddr(t)
	runApp(t, &config.Config{Grace: time.Second, Routes: []config.Route{{Name: "pgtls", Listen: route, Protocol: "postgres",
		Upstream: srv.Addr, UpstreamTLS: &config.UpstreamTLS{CA: srv.Cert.CAFile}}}})
	return route, testenv.ConnectPG(t, srv.URL)
}

// TestCancelThroughUpstreamTLS runs a route configured with upstream_tls
// (CA file) to a PostgreSQL with TLS on; pgx cancels a statement when its
// context ends, and the statement ends with 57014.
func TestCancelThroughUpstreamTLS(t *testing.T) {
	testenv.SkipShort(t, "takes 3s here")
	route, direct := tlsRoute(t)
	ctx := context.Background()
	ccfg, err := pgx.ParseConfig("postgres://postgres:" + direct.Config().Password + "@" + route + "/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	// Send a CancelRequest as soon as the context ends; close the
	// connection only if the server has not answered long after.
	ccfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Minute}
	}
	conn, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if !testenv.ServerSSL(t, conn) {
		t.Fatal("upstream connection is plain; want TLS")
	}
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Exec(qctx, "SELECT pg_sleep(30)")
		errc <- err
	}()
	pid := conn.PgConn().PID()
	testenv.Eventually(t, 10*time.Second, "pg_sleep to run", func() bool {
		var n int
		err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE 'SELECT pg_sleep%'", pid).Scan(&n)
		return err == nil && n == 1
	})
	cancel()
	timer := clock.Real{}.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case err := <-errc:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("err = %v, want SQLSTATE 57014", err)
		}
	case <-timer.C():
		t.Fatal("statement still running 10s after its context ended")
	}
}

// TestPsqlThroughUpstreamTLS logs the real psql in through a route that
// is plain on the client side and TLS to the server. The server offers
// SCRAM-SHA-256-PLUS over its TLS leg; psql, on plain TCP, refuses a
// server whose only offer it cannot bind, so sluice offers the client
// SCRAM-SHA-256 alone, and the login goes through.
func TestPsqlThroughUpstreamTLS(t *testing.T) {
	testenv.SkipShort(t, "starts a PostgreSQL of its own with TLS on")
	route, direct := tlsRoute(t)
	ctx := context.Background()
	var method string
	if err := direct.QueryRow(ctx, "SHOW password_encryption").Scan(&method); err != nil || method != "scram-sha-256" {
		t.Fatalf("password_encryption %q, %v: the test needs SCRAM", method, err)
	}
	out, err := runPsql(t, route, "postgres", "postgres",
		[]string{"PGPASSWORD=" + direct.Config().Password, "PGSSLMODE=disable", "PGCHANNELBINDING=prefer"},
		"-X", "-At", "-c", "SELECT 'ssl=' || ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
	if err != nil || strings.TrimSpace(out) != "ssl=true" {
		t.Fatalf("psql through the route: %v\n%s", err, out)
	}
}

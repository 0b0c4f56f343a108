package proxy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/testenv"
)

// pgSocket returns the path of the test PostgreSQL's Unix socket, as the
// server reports it.
func pgSocket(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	c := testenv.ConnectPG(t, url)
	var dirs, port string
	if err := c.QueryRow(ctx, "SELECT current_setting('unix_socket_directories'), current_setting('port')").Scan(&dirs, &port); err != nil {
		t.Fatal(err)
	}
	for _, d := range strings.Split(dirs, ",") {
		p := filepath.Join(strings.TrimSpace(d), ".s.PGSQL."+port)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return p
		}
	}
	testenv.Missing(t, "a Unix socket of the test PostgreSQL (unix_socket_directories = %q)", dirs)
	return ""
}

// TestUnixSocketUpstream runs a postgres route whose upstream is the
// server's Unix socket: queries, a byte-exact COPY and a cancel (whose
// side connection dials the socket too) all work.
func TestUnixSocketUpstream(t *testing.T) {
	url := testenv.PostgresURL(t)
	sock := pgSocket(t, url)
	srv, addr := startProxy(t, "postgres", sock)
	purl := viaProxy(t, url, addr)
	ctx := context.Background()

	want, wantN := copyHash(t, url, "COPY (SELECT g, md5(g::text) FROM generate_series(1, 200000) g) TO STDOUT")
	got, gotN := copyHash(t, purl, "COPY (SELECT g, md5(g::text) FROM generate_series(1, 200000) g) TO STDOUT")
	if got != want || gotN != wantN {
		t.Fatalf("through the socket: %d bytes %x, direct %d bytes %x", gotN, got, wantN, want)
	}

	c := connect(t, purl)
	done := startPgSleep(t, ctx, c)
	// Cancel once PostgreSQL runs the query: a cancel that reaches it
	// before the query does is dropped.
	admin := connect(t, url)
	awaitPgSleep(t, ctx, srv, admin, sleepSQL(t))
	if err := c.CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("cancelled statement: %v, want 57014", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel through a Unix socket upstream did not stop pg_sleep")
	}
	if err := c.Exec(ctx, "SELECT 1").Close(); err != nil {
		t.Fatalf("next query: %v", err)
	}
	for _, s := range srv.Registry().Sessions() {
		if s.Info.Upstream != sock {
			t.Errorf("session upstream %q, want %q", s.Info.Upstream, sock)
		}
	}
}

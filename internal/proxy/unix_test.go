package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestUnixSocketUpstream runs a postgres route whose upstream is the
// server's Unix socket: queries, a byte-exact COPY and a cancel (whose
// side connection dials the socket too) all work.
func TestUnixSocketUpstream(t *testing.T) {
	url := testenv.PostgresURL(t)
	sock := testenv.PostgresSocket(t, url)
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

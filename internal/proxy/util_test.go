package proxy

import (
	"context"
	"crypto/md5"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

func md5sum(b []byte) [16]byte { return md5.Sum(b) }

// sleepSQL is a pg_sleep of 30 s that names the test in a comment, so
// that awaitPgSleep finds this test's statement and no other on the
// shared server.
func sleepSQL(t testing.TB) string {
	return fmt.Sprintf("SELECT pg_sleep(30) /* %s */", t.Name())
}

// awaitPgSleep waits until srv has the statement sql (from sleepSQL)
// running and PostgreSQL, asked through admin (a direct connection),
// executes it too, and returns the statement. sluice records a statement as it forwards
// it, and a cancel that reaches the server before the query does is
// ignored by PostgreSQL (a backend waiting for its client's next command
// drops it).
func awaitPgSleep(t *testing.T, ctx context.Context, srv *Server, admin *pgconn.PgConn, sql string) *session.Statement {
	t.Helper()
	var found *session.Statement
	testenv.Eventually(t, 10*time.Second, "a running pg_sleep statement", func() bool {
		for _, st := range srv.Registry().Active() {
			if st.SQL != sql {
				continue
			}
			rs := admin.ExecParams(ctx, "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query = $1", [][]byte{[]byte(sql)}, nil, nil, nil).Read()
			if rs.Err == nil && len(rs.Rows) > 0 {
				found = st
				return true
			}
		}
		return false
	})
	return found
}

// pgRoute starts a postgres route to the test PostgreSQL. It returns the
// server's URL, the proxy and the route's address.
func pgRoute(t testing.TB) (url string, srv *Server, addr string) {
	t.Helper()
	url = testenv.PostgresURL(t)
	srv, addr = startProxy(t, "postgres", upstreamAddr(t, url))
	return url, srv, addr
}

// connect opens a connection to url (see testenv.ConnectPG) for the
// tests that speak to PostgreSQL at the pgconn level; it closes when the
// test ends.
func connect(t testing.TB, url string) *pgconn.PgConn {
	t.Helper()
	return testenv.ConnectPG(t, url).PgConn()
}

// startPgSleep runs sleepSQL(t) on c on a goroutine of its own; the
// channel receives how it ended.
func startPgSleep(t testing.TB, ctx context.Context, c *pgconn.PgConn) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Exec(ctx, sleepSQL(t)).Close() }()
	return done
}

// waitNoSessions waits until srv has no session open.
func waitNoSessions(t testing.TB, srv *Server) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "every session to close", func() bool {
		return len(srv.Registry().Sessions()) == 0
	})
}

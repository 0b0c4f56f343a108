package proxy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/mysql"
	"github.com/sluicelab/sluice/internal/wire/pg"
)

// testLogger is the logger of the servers under test: debug level on
// stderr with -v, silent otherwise.
func testLogger(t testing.TB) *slog.Logger { return testenv.Logger(slog.LevelDebug) }

// newTestServer is New(o) with the test logger and a fresh session
// registry where o names none; the server closes when the test ends.
func newTestServer(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	if o.Registry == nil {
		o.Registry = session.NewRegistry(session.Options{})
	}
	srv := New(o)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// addTestRoute adds r to srv, listening on a loopback port unless r
// names one and relaying tcp unless r names a protocol, and returns the
// route's address. A failure fails t.
func addTestRoute(t testing.TB, srv *Server, r Route) string {
	t.Helper()
	r.Listen = cmp.Or(r.Listen, "127.0.0.1:0")
	r.Protocol = cmp.Or(r.Protocol, "tcp")
	addr, err := srv.AddRoute(r)
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

// startProxy starts a server with one route to upstream and returns its
// address.
func startProxy(t testing.TB, protocol, upstream string) (*Server, string) {
	t.Helper()
	reg := session.NewRegistry(session.Options{})
	srv := newTestServer(t, Options{Registry: reg})
	return srv, addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", protocol, upstream))
}

// testRoute returns a loopback route named name to upstream with the
// front end sluice serve gives protocol, logging to log. A mysql route
// cancels as the test server's user (read from SLUICE_TEST_MYSQL, not
// asked of the server: a route to a fake upstream needs no server).
func testRoute(t testing.TB, log *slog.Logger, reg *session.Registry, name, protocol, upstream string) Route {
	t.Helper()
	return testRouteWith(t, log, reg, name, protocol, upstream, frontOpts{})
}

// frontOpts are a test route's front end's options beyond testRoute's;
// the zero value is testRoute's.
type frontOpts struct {
	whatIf *whatif.Table // counts the sessions' round trips
	admit  wire.Admitter // admits the sessions' statements
}

// testRouteWith is testRoute with fo.
func testRouteWith(t testing.TB, log *slog.Logger, reg *session.Registry, name, protocol, upstream string, fo frontOpts) Route {
	t.Helper()
	r := Route{Name: name, Listen: "127.0.0.1:0", Upstream: upstream, Protocol: protocol, DialTimeout: 10 * time.Second}
	switch protocol {
	case "postgres":
		r.Frontend = pg.New(pg.Options{Clock: clock.Real{}, Logger: log, Upstream: upstream, Keys: reg, WhatIf: fo.whatIf, Admit: fo.admit})
	case "mysql":
		cfg, err := gomysql.ParseDSN(cmp.Or(os.Getenv("SLUICE_TEST_MYSQL"), testenv.DefaultMySQL))
		if err != nil {
			t.Fatal(err)
		}
		r.Frontend = mysql.New(mysql.Options{Clock: clock.Real{}, Logger: log, Upstream: upstream,
			KillUser: cfg.User, KillPassword: cfg.Passwd, ConnectTimeout: 10 * time.Second, WhatIf: fo.whatIf, Admit: fo.admit})
	}
	return r
}

// viaProxy rewrites a PostgreSQL URL to go through addr.
func viaProxy(t testing.TB, url, addr string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", cfg.User, cfg.Password, host, port, cfg.Database)
}

func upstreamAddr(t testing.TB, url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
}

// copyHash runs COPY ... TO STDOUT on url and returns the SHA-256 of the
// data and its length.
func copyHash(t testing.TB, url, query string) ([32]byte, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := connect(t, url)
	defer c.Close(ctx) // now: the tests wait for the session to end
	h := sha256.New()
	cw := &countWriter{w: h}
	if _, err := c.CopyTo(ctx, cw, query); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, cw.n
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return c.w.Write(p) }

// TestBigTransferByteExact moves 256 MiB (4 MiB with -short) from the
// real PostgreSQL through a tcp route and a postgres route and compares
// checksums with a direct read.
func TestBigTransferByteExact(t *testing.T) {
	url := testenv.PostgresURL(t)
	up := upstreamAddr(t, url)
	// 1,120,000 rows of 240 bytes: 256 MiB plus a little; with -short,
	// 18,000 rows: 4 MiB plus a little.
	rows, size := 1120000, 256<<20
	if testing.Short() {
		rows, size = 18000, 4<<20
	}
	q := fmt.Sprintf(`COPY (SELECT i, md5(i::text) || repeat('x', 200) FROM generate_series(1, %d) i) TO STDOUT`, rows)
	want, n := copyHash(t, url, q)
	if n < int64(size) {
		t.Fatalf("direct transfer was %d bytes, want >= %d MiB", n, size>>20)
	}
	for _, proto := range []string{"tcp", "postgres"} {
		t.Run(proto, func(t *testing.T) {
			srv, addr := startProxy(t, proto, up)
			got, gn := copyHash(t, viaProxy(t, url, addr), q)
			if got != want || gn != n {
				t.Fatalf("through %s route: %d bytes sha %x; direct %d bytes sha %x", proto, gn, got[:8], n, want[:8])
			}
			waitNoSessions(t, srv)
		})
	}
}

// TestUploadByteExact sends 64 MiB (1 MiB with -short) client to server
// through both routes and has the server checksum it.
func TestUploadByteExact(t *testing.T) {
	url := testenv.PostgresURL(t)
	up := upstreamAddr(t, url)
	size := 64 << 20 // bytes uploaded; 1 MiB with -short
	if testing.Short() {
		size = 1 << 20
	}
	var data bytes.Buffer
	for i := 0; data.Len() < size; i++ {
		fmt.Fprintf(&data, "%d\t%x%s\n", i, sha256.Sum256([]byte(fmt.Sprint(i))), strings.Repeat("y", 100))
	}
	for _, proto := range []string{"tcp", "postgres"} {
		t.Run(proto, func(t *testing.T) {
			_, addr := startProxy(t, proto, up)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c := connect(t, viaProxy(t, url, addr))
			if err := c.Exec(ctx, "CREATE TEMP TABLE up (n int, v text)").Close(); err != nil {
				t.Fatal(err)
			}
			tag, err := c.CopyFrom(ctx, bytes.NewReader(data.Bytes()), "COPY up FROM STDIN")
			if err != nil {
				t.Fatal(err)
			}
			res := c.ExecParams(ctx, "SELECT md5(string_agg(n::text || E'\\t' || v || E'\\n', '' ORDER BY n)) FROM up", nil, nil, nil, nil).Read()
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			got := string(res.Rows[0][0])
			want := fmt.Sprintf("%x", md5sum(data.Bytes()))
			if got != want || tag.RowsAffected() == 0 {
				t.Fatalf("server md5 %s, client md5 %s (%d rows)", got, want, tag.RowsAffected())
			}
		})
	}
}

func TestPgxAndPsqlThroughPostgresRoute(t *testing.T) {
	url := testenv.PostgresURL(t)
	psql := testenv.Program(t, "psql")
	srv, addr := startProxy(t, "postgres", upstreamAddr(t, url))
	purl := viaProxy(t, url, addr)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, purl)
	if err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := c.QueryRow(ctx, "SELECT sum(i) FROM generate_series(1, $1::int) i", 100).Scan(&sum); err != nil || sum != 5050 {
		t.Fatalf("sum = %d, %v", sum, err)
	}
	sessions := srv.Registry().Sessions()
	if len(sessions) != 1 || sessions[0].User() != "sluice" || sessions[0].Database() != "sluice" {
		t.Fatalf("sessions = %v", sessions)
	}
	c.Close(ctx)
	out, err := exec.Command(psql, purl, "-tAc", "SELECT 'through ' || 'sluice'").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "through sluice" {
		t.Fatalf("psql: %v: %s", err, out)
	}
	waitNoSessions(t, srv)
}

func TestUpstreamDownPostgres(t *testing.T) {
	dead := testenv.DeadAddr(t)
	_, addr := startProxy(t, "postgres", dead)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := pgconn.Connect(ctx, "postgres://u:p@"+addr+"/db?sslmode=disable&connect_timeout=5")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a PgError", err)
	}
	if pe.Code != "08006" || pe.Severity != "FATAL" || !strings.Contains(pe.Message, dead) {
		t.Fatalf("error = %s %s %q", pe.Severity, pe.Code, pe.Message)
	}
}

// TestHalfClose checks that a client's half-close reaches the upstream and
// the upstream's answer still reaches the client.
func TestHalfClose(t *testing.T) {
	up := testenv.ServeOnce(t, func(c net.Conn) {
		b, _ := io.ReadAll(c) // until the client's half-close
		fmt.Fprintf(c, "got %d bytes", len(b))
	})
	_, addr := startProxy(t, "tcp", up)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(bytes.Repeat([]byte("a"), 100000))
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	reply, err := io.ReadAll(c)
	if err != nil || string(reply) != "got 100000 bytes" {
		t.Fatalf("reply %q, %v", reply, err)
	}
}

// TestShutdownGrace checks that Shutdown stops accepting, lets a running
// session finish, and closes what is left when the grace period ends.
func TestShutdownGrace(t *testing.T) {
	srv, addr := startProxy(t, "tcp", testenv.Echo(t))
	finishing, _ := net.Dial("tcp", addr)
	lingering, _ := net.Dial("tcp", addr)
	defer finishing.Close()
	defer lingering.Close()
	for _, c := range []net.Conn{finishing, lingering} {
		c.Write([]byte("x"))
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var serr error
	wg.Add(1)
	go func() { defer wg.Done(); serr = srv.Shutdown(ctx) }()
	testenv.Eventually(t, 400*time.Millisecond, "Shutdown to stop accepting", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	finishing.(*net.TCPConn).CloseWrite()
	wg.Wait()
	if !errors.Is(serr, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded because one session lingered", serr)
	}
	lingering.SetReadDeadline(clock.SocketDeadline(2 * time.Second))
	if _, err := lingering.Read(make([]byte, 1)); err == nil {
		t.Fatal("lingering session not closed")
	}
}

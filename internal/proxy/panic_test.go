package proxy

// This file tests that a session that fails (a malformed message, a bad
// startup, a panic in its front end) ends alone, with an error its
// client can read, while the other sessions of the route go on.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/mysql"
	"github.com/sluicelab/sluice/internal/wire/pg"
)

// trigger panics when a chunk holds its marker.
type trigger struct {
	next   wire.Observer
	marker []byte
}

func (o trigger) Observe(p []byte) error {
	if bytes.Contains(p, o.marker) {
		panic("observer exploded on " + string(o.marker))
	}
	return o.next.Observe(p)
}

// panickyFrontend is a PostgreSQL front end whose observers panic on a
// marker in either direction, and whose opening exchange panics for one
// user.
type panickyFrontend struct {
	Frontend
	fail func(msg string) []byte // the wrapped front end's OpenFailure, or nil
}

func (f panickyFrontend) OpenFailure(msg string) []byte {
	if f.fail == nil {
		return nil
	}
	return f.fail(msg)
}

func (f panickyFrontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	var sess *session.Session
	reg := func() *session.Session {
		sess = register()
		return sess
	}
	dialer := func(ctx context.Context) (net.Conn, error) {
		if sess != nil && sess.User() == "explode_at_open" {
			panic("front end exploded")
		}
		return dial(ctx)
	}
	c, err := f.Frontend.Open(ctx, client, reg, dialer)
	if err != nil {
		return c, err
	}
	c.Up = trigger{c.Up, []byte("boom-up")}
	c.Down = trigger{c.Down, []byte("boom-down")}
	return c, nil
}

// TestPanicEndsOnlyThatSession injects panics into the observers of both
// directions and into the opening exchange of sessions against a real
// PostgreSQL. Each such session ends with FATAL XX000, the panic is
// logged with its stack and counted, and a session opened before goes
// on, as do new ones.
func TestPanicEndsOnlyThatSession(t *testing.T) {
	url := testenv.PostgresURL(t)
	up := upstreamAddr(t, url)
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg := session.NewRegistry(session.Options{})
	srv := New(Options{Logger: log, Registry: reg})
	t.Cleanup(func() { srv.Close() })
	pgfe := pg.New(pg.Options{Clock: clock.Real{}, Logger: log, Upstream: up, Keys: reg})
	fe := panickyFrontend{pgfe, pgfe.OpenFailure}
	a, err := srv.AddRoute(Route{Name: "r", Listen: "127.0.0.1:0", Upstream: up, Protocol: "postgres", Frontend: fe, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	addr := a.String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	good := connect(t, viaProxy(t, url, addr))

	cases := []struct {
		name, sql, user string
	}{
		{"up observer", "SELECT 'boom-up'", ""},
		{"down observer", "SELECT 'boom' || '-down'", ""},
		{"opening exchange", "SELECT 1", "explode_at_open"},
	}
	for i, tc := range cases {
		dsn := viaProxy(t, url, addr)
		if tc.user != "" {
			dsn = strings.Replace(dsn, "postgres://sluice:", "postgres://"+tc.user+":", 1)
		}
		var pgErr *pgconn.PgError
		c, err := pgconn.Connect(ctx, dsn)
		if err == nil {
			err = c.Exec(ctx, tc.sql).Close()
			c.Close(ctx)
		}
		if !errors.As(err, &pgErr) || pgErr.Code != "XX000" || pgErr.Severity != "FATAL" {
			t.Errorf("%s: err %v, want FATAL XX000 from sluice", tc.name, err)
		}
		if got := srv.SessionPanics()["r"]; got != uint64(i+1) {
			t.Errorf("%s: %d panics counted, want %d", tc.name, got, i+1)
		}
		res := good.ExecParams(ctx, "SELECT 7", nil, nil, nil, nil).Read()
		if res.Err != nil || string(res.Rows[0][0]) != "7" {
			t.Fatalf("%s: the other session: %v", tc.name, res.Err)
		}
	}
	fresh, err := pgconn.Connect(ctx, viaProxy(t, url, addr))
	if err != nil {
		t.Fatalf("new session after the panics: %v", err)
	}
	if err := fresh.Exec(ctx, "SELECT 1").Close(); err != nil {
		t.Fatal(err)
	}
	fresh.Close(ctx)

	out := logs.String()
	for _, want := range []string{"session panicked", "level=ERROR", "observer exploded on boom-up", "observer exploded on boom-down", "front end exploded", "panicky", "where=\"up pump\"", "where=\"down pump\"", "where=\"opening exchange\""} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// Every panicked session has left the registry.
	testenv.Eventually(t, 10*time.Second, "only the session that did not panic to stay open", func() bool {
		return len(reg.Sessions()) == 1
	})
}

// TestPanicEndsOnlyThatSessionMySQL: a panic in a mysql route's observer
// ends that session with ERR 1105, which the stock driver reads, and a
// session opened before goes on.
func TestPanicEndsOnlyThatSessionMySQL(t *testing.T) {
	cfg := testenv.MySQLConfig(t)
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv := New(Options{Logger: log})
	t.Cleanup(func() { srv.Close() })
	fe := panickyFrontend{mysql.New(mysql.Options{Logger: log, Upstream: cfg.Addr}), nil}
	a, err := srv.AddRoute(Route{Name: "my", Listen: "127.0.0.1:0", Upstream: cfg.Addr, Protocol: "mysql", Frontend: fe})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = a.String()
	open := func() *sql.DB {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}
	good, bad := open(), open()
	var v int
	if err := good.QueryRow("SELECT 5").Scan(&v); err != nil {
		t.Fatal(err)
	}
	_, err = bad.Exec("SELECT 'boom-up'")
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1105 || !strings.Contains(me.Message, "internal error") {
		t.Fatalf("err %v, want ERR 1105 from sluice", err)
	}
	if got := srv.SessionPanics()["my"]; got != 1 {
		t.Errorf("%d panics counted, want 1", got)
	}
	if err := good.QueryRow("SELECT 6").Scan(&v); err != nil || v != 6 {
		t.Fatalf("the other session: %d, %v", v, err)
	}
	if !strings.Contains(logs.String(), "observer exploded on boom-up") {
		t.Error("the panic is not in the log")
	}
}

// TestMalformedMessageEndsOnlyThatSession sends a message with an
// impossible length after a real startup: that client gets FATAL 08P01
// and is disconnected, while another session on the route goes on.
func TestMalformedMessageEndsOnlyThatSession(t *testing.T) {
	url, _, addr := pgRoute(t)
	ctx := context.Background()
	good := connect(t, viaProxy(t, url, addr))

	bad := pgtest.Hijack(t, viaProxy(t, url, addr), 10*time.Second)
	msg := []byte{'Q', 0, 0, 0, 2} // length 2 < 4: malformed
	if _, err := bad.Write(msg); err != nil {
		t.Fatal(err)
	}
	pgtest.ExpectFatal(t, bad, "08P01", "")
	res := good.ExecParams(ctx, "SELECT 7", nil, nil, nil, nil).Read()
	if res.Err != nil || string(res.Rows[0][0]) != "7" {
		t.Fatalf("other session: %v", res.Err)
	}
}

// TestBadStartupGetsError sends an unsupported protocol version.
func TestBadStartupGetsError(t *testing.T) {
	_, _, addr := pgRoute(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, 8)
	binary.BigEndian.PutUint32(b[4:], 9<<16) // protocol 9.0
	c.Write(b)
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	reply, _ := io.ReadAll(c)
	if len(reply) == 0 || reply[0] != 'E' || !bytes.Contains(reply, []byte("08P01")) && !bytes.Contains(reply, []byte("0A000")) {
		t.Fatalf("reply %q", reply)
	}
}

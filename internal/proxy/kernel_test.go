package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// openFastPath loads the kernel fast path, or fails the test under
// CI=true where it cannot (skips elsewhere).
func openFastPath(t *testing.T) *fastpath.Kernel {
	t.Helper()
	k, err := fastpath.Open(clock.Real{})
	if err != nil {
		testenv.Missing(t, "BPF sockmap (root, a 5.17 or later kernel): %v", err)
		return nil
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// statementRecord is what the registry keeps of one ended statement that
// both paths must agree on.
type statementRecord struct {
	sql      string
	up, down int64
	outcome  session.Outcome
	rows     int64
}

// pgWorkload runs a fixed mix on url: simple and extended queries, a
// transaction, an error, and results larger than the kernel's journal
// holds, so that both of its paths carry bytes.
func pgWorkload(ctx context.Context, url string, rounds int) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for i := range rounds {
		var n int
		if err := c.QueryRow(ctx, "select $1::int + 1", i).Scan(&n); err != nil || n != i+1 {
			return fmt.Errorf("extended query: %d, %v", n, err)
		}
		if _, err := c.Exec(ctx, "select 1; select 2", pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("simple query: %w", err)
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		var s string
		if err := tx.QueryRow(ctx, "select string_agg(md5(g::text), '') from generate_series(1, $1::int) g", 10+i*40).Scan(&s); err != nil {
			return fmt.Errorf("in a transaction: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, "select 1/0"); err == nil {
			return fmt.Errorf("division by zero succeeded")
		}
	}
	return nil
}

// mysqlWorkload is pgWorkload for MySQL: text and prepared statements,
// a transaction, an error and results larger than the journal holds.
func mysqlWorkload(ctx context.Context, dsn string, rounds int) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := range rounds {
		var n int
		if err := c.QueryRowContext(ctx, "select ? + 1", i).Scan(&n); err != nil || n != i+1 {
			return fmt.Errorf("prepared query: %d, %v", n, err)
		}
		if _, err := c.ExecContext(ctx, "do 1"); err != nil {
			return fmt.Errorf("text query: %w", err)
		}
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var s string
		if err := tx.QueryRowContext(ctx, fmt.Sprintf("select repeat(md5('x'), %d)", 10+i*40)).Scan(&s); err != nil {
			return fmt.Errorf("in a transaction: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, "select * from no_such_table_here"); err == nil {
			return fmt.Errorf("a query of a missing table succeeded")
		}
	}
	return nil
}

// runWorkload runs a protocol's workload through a new server (with the
// kernel fast path when k is not nil) and returns the statements the
// registry recorded, in order, and the session's bytes.
func runWorkload(t *testing.T, protocol string, k *fastpath.Kernel, rounds int) ([]statementRecord, int64, int64, *Server) {
	t.Helper()
	reg := session.NewRegistry(session.Options{KeepStatements: 100000})
	o := Options{Registry: reg}
	if k != nil {
		o.FastPath = k
	}
	srv := newTestServer(t, o)
	var up, down int64
	unwatch := reg.Watch(session.WatcherFunc(func(e session.Event) {
		if e.Kind == session.SessionClosed {
			up, down = e.Session.BytesUp(), e.Session.BytesDown()
		}
	}))
	defer unwatch()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	switch protocol {
	case "postgres":
		pgURL := testenv.PostgresURL(t)
		addr := addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", protocol, upstreamAddr(t, pgURL)))
		err = pgWorkload(ctx, viaProxy(t, pgURL, addr), rounds)
	case "mysql":
		cfg := testenv.MySQLConfig(t)
		cfg.Addr = addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", protocol, cfg.Addr))
		err = mysqlWorkload(ctx, cfg.FormatDSN(), rounds)
	}
	if err != nil {
		t.Fatal(err)
	}
	waitNoSessions(t, srv)
	var recs []statementRecord
	for _, st := range reg.Recent() {
		snap := st.Snapshot()
		recs = append(recs, statementRecord{sql: snap.SQL, up: st.BytesUp(), down: st.BytesDown(), outcome: snap.Outcome, rows: snap.Rows})
	}
	return recs, up, down, srv
}

// TestKernelPathSameData runs one workload through sluice without and
// with the kernel fast path, on each protocol: the registry records the
// same statements, with the same bytes, and the session the same totals.
func TestKernelPathSameData(t *testing.T) {
	k := openFastPath(t)
	for _, protocol := range []string{"postgres", "mysql"} {
		t.Run(protocol, func(t *testing.T) {
			const rounds = 30
			want, wantUp, wantDown, _ := runWorkload(t, protocol, nil, rounds)
			got, gotUp, gotDown, srv := runWorkload(t, protocol, k, rounds)
			t.Logf("%d statements, session bytes up %d down %d, %d in the kernel", len(got), gotUp, gotDown, srv.FastPathBytes())
			paired, resumed, _ := srv.FastPathEvents()
			if paired != 1 || resumed == 0 {
				t.Fatalf("fast path: %d sessions paired, %d resumes; want the session relayed in the kernel", paired, resumed)
			}
			// Both paths carried bytes: the small exchanges in the
			// kernel, the large results (more than the journal holds a
			// chunk of) through user space.
			if kb := srv.FastPathBytes(); kb == 0 || kb >= uint64(gotUp+gotDown) {
				t.Errorf("the kernel relayed %d of the session's %d bytes; want some, not all", kb, gotUp+gotDown)
			}
			if len(got) != len(want) {
				t.Fatalf("%d statements with the kernel path, %d without", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("statement %d: %+v with the kernel path, %+v without", i, got[i], want[i])
				}
			}
			if gotUp != wantUp || gotDown != wantDown {
				t.Errorf("session bytes: up %d down %d with the kernel path, %d %d without", gotUp, gotDown, wantUp, wantDown)
			}
			socks, links, flows, err := k.Entries()
			if err != nil || socks+links+flows != 0 {
				t.Errorf("map entries after the session: %d sockets, %d links, %d flows (%v)", socks, links, flows, err)
			}
		})
	}
}

// TestKernelPathLeavesForPumps terminates a session relayed in the
// kernel: it pauses, goes to its pumps, and the client reads the
// terminate's error; the maps hold nothing after.
func TestKernelPathLeavesForPumps(t *testing.T) {
	k := openFastPath(t)
	pgURL := testenv.PostgresURL(t)
	reg := session.NewRegistry(session.Options{})
	srv := newTestServer(t, Options{Registry: reg, FastPath: k})
	addr := addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", "postgres", upstreamAddr(t, pgURL)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, viaProxy(t, pgURL, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for i := range 20 {
		var n int
		if err := c.QueryRow(ctx, "select $1::int", i).Scan(&n); err != nil || n != i {
			t.Fatalf("query %d: %d, %v", i, n, err)
		}
	}
	if _, resumed, _ := srv.FastPathEvents(); resumed == 0 {
		t.Fatal("the session was not relayed in the kernel")
	}
	sessions := reg.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("%d sessions", len(sessions))
	}
	if !sessions[0].Terminate() {
		t.Fatal("Terminate: the session was not running")
	}
	var n int
	err = c.QueryRow(ctx, "select 1").Scan(&n)
	if err == nil {
		t.Fatal("a query after the terminate succeeded")
	}
	waitNoSessions(t, srv)
	if _, _, paused := srv.FastPathEvents(); paused == 0 {
		t.Error("the pair never paused")
	}
	socks, links, flows, err := k.Entries()
	if err != nil || socks+links+flows != 0 {
		t.Errorf("map entries after the session: %d sockets, %d links, %d flows (%v)", socks, links, flows, err)
	}
}

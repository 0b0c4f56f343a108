package litepg

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// startServer runs a Server with opts on a loopback listener for the
// duration of the test and returns it with a connection URL.
func startServer(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	srv, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, "postgres://lab@" + ln.Addr().String() + "/lab?sslmode=disable"
}

// allModes are pgx's query execution modes.
var allModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
}

func connect(t testing.TB, url string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func mustExec(t testing.TB, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// twoSessions starts a server with opts and opens two sessions on it;
// the first runs setup before they are returned.
func twoSessions(t testing.TB, opts Options, setup ...string) (a, b *pgx.Conn) {
	t.Helper()
	_, url := startServer(t, opts)
	a = connect(t, url, pgx.QueryExecModeCacheStatement)
	b = connect(t, url, pgx.QueryExecModeCacheStatement)
	for _, sql := range setup {
		mustExec(t, a, sql)
	}
	return a, b
}

// pgCode returns the SQLSTATE of err, "" if it has none.
func pgCode(err error) string { return testenv.PGError(err).Code }

const sbCreate = "CREATE TABLE sbtest1(id SERIAL, k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))"

func TestSysbenchStatementsAllModes(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			c := connect(t, url, mode)
			mustExec(t, c, "DROP TABLE IF EXISTS sbtest1")
			mustExec(t, c, sbCreate)
			mustExec(t, c, "CREATE INDEX k_1 ON sbtest1(k)")
			mustExec(t, c, "INSERT INTO sbtest1(k, c, pad) VALUES(10, 'c1', 'p1'),(20, 'c2', 'p2'),(30, 'c3', 'p3')")
			mustExec(t, c, "INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4)", 10, 40, "c10", "p10")

			var s string
			if err := c.QueryRow(ctx, "SELECT c FROM sbtest1 WHERE id=$1", 2).Scan(&s); err != nil || s != "c2" {
				t.Fatalf("point select: %q, %v", s, err)
			}
			rows, err := c.Query(ctx, "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2", 1, 3)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || strings.Join(got, ",") != "c1,c2,c3" {
				t.Fatalf("range: %v, %v", got, err)
			}
			var sum int64
			if err := c.QueryRow(ctx, "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2", 1, 10).Scan(&sum); err != nil || sum != 100 {
				t.Fatalf("sum: %d, %v", sum, err)
			}
			var sumInt int
			if err := c.QueryRow(ctx, "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2", 1, 2).Scan(&sumInt); err != nil || sumInt != 30 {
				t.Fatalf("sum into int: %d, %v", sumInt, err)
			}
			rows, _ = c.Query(ctx, "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c", 1, 10)
			got, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || strings.Join(got, ",") != "c1,c10,c2,c3" {
				t.Fatalf("order: %v, %v", got, err)
			}
			rows, _ = c.Query(ctx, "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c", 1, 3)
			got, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(got) != 3 {
				t.Fatalf("distinct: %v, %v", got, err)
			}
			tag, err := c.Exec(ctx, "UPDATE sbtest1 SET k=k+1 WHERE id=$1", 1)
			if err != nil || tag.String() != "UPDATE 1" {
				t.Fatalf("index update: %v, %v", tag, err)
			}
			tag, err = c.Exec(ctx, "UPDATE sbtest1 SET c=$1 WHERE id=$2", "new", 2)
			if err != nil || tag.String() != "UPDATE 1" {
				t.Fatalf("non-index update: %v, %v", tag, err)
			}
			tag, err = c.Exec(ctx, "DELETE FROM sbtest1 WHERE id=$1", 3)
			if err != nil || tag.String() != "DELETE 1" {
				t.Fatalf("delete: %v, %v", tag, err)
			}
			tag, err = c.Exec(ctx, "INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4)", 3, 1, "c3", "p3")
			if err != nil || tag.String() != "INSERT 0 1" {
				t.Fatalf("insert: %v, %v", tag, err)
			}
			var k int32
			if err := c.QueryRow(ctx, "SELECT k FROM sbtest1 WHERE id=$1", 1).Scan(&k); err != nil || k != 11 {
				t.Fatalf("k after update: %d, %v", k, err)
			}
			var one int
			if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1: %d, %v", one, err)
			}
			mustExec(t, c, "SET application_name = 'sysbench'")
			var v string
			if err := c.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil || v != ServerVersion {
				t.Fatalf("SHOW server_version: %q, %v", v, err)
			}
			if err := c.QueryRow(ctx, "SHOW application_name").Scan(&v); err != nil || v != "sysbench" {
				t.Fatalf("SHOW application_name: %q, %v", v, err)
			}
			mustExec(t, c, "DROP TABLE IF EXISTS sbtest1")
		})
	}
}

func TestTypesRoundTrip(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	setup := connect(t, url, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, setup, `CREATE TABLE typed (id BIGSERIAL PRIMARY KEY, i2 SMALLINT, i4 INT4, i8 BIGINT, f8 DOUBLE PRECISION,
		b BOOLEAN, t TEXT, v VARCHAR(20), by BYTEA, ts TIMESTAMPTZ, d DATE)`)
	when := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			c := connect(t, url, mode)
			mustExec(t, c, "DELETE FROM typed")
			mustExec(t, c, "INSERT INTO typed (i2, i4, i8, f8, b, t, v, by, ts, d) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
				int16(-7), int32(70000), int64(1)<<40, 2.5, true, "héllo", "var", []byte{0, 1, 255}, when, when)
			mustExec(t, c, "INSERT INTO typed (i2) VALUES (NULL)")
			var (
				i2 int16
				i4 int32
				i8 int64
				f8 float64
				b  bool
				s  string
				v  string
				by []byte
				ts time.Time
				d  time.Time
			)
			err := c.QueryRow(ctx, "SELECT i2, i4, i8, f8, b, t, v, by, ts, d FROM typed WHERE i8 = $1", int64(1)<<40).
				Scan(&i2, &i4, &i8, &f8, &b, &s, &v, &by, &ts, &d)
			if err != nil {
				t.Fatal(err)
			}
			if i2 != -7 || i4 != 70000 || i8 != 1<<40 || f8 != 2.5 || !b || s != "héllo" || v != "var" ||
				string(by) != "\x00\x01\xff" || !ts.Equal(when) || d.Format(dateLayout) != "2024-05-06" {
				t.Fatalf("got %v %v %v %v %v %q %q %x %v %v", i2, i4, i8, f8, b, s, v, by, ts, d)
			}
			var null *int16
			if err := c.QueryRow(ctx, "SELECT i2 FROM typed WHERE i2 IS NULL").Scan(&null); err != nil || null != nil {
				t.Fatalf("NULL: %v, %v", null, err)
			}
			var n int64
			var txt string
			var ok bool
			var f float64
			if err := c.QueryRow(ctx, "SELECT count(*), 'a' || 'b', 1 < 2, 1.5 FROM typed").Scan(&n, &txt, &ok, &f); err != nil ||
				n != 2 || txt != "ab" || !ok || f != 1.5 {
				t.Fatalf("expressions: %v %q %v %v %v", n, txt, ok, f, err)
			}
			if err := c.QueryRow(ctx, "SELECT $1::int + 1", 41).Scan(&n); err != nil || n != 42 {
				t.Fatalf("cast param: %v %v", n, err)
			}
			if err := c.QueryRow(ctx, "SELECT 't'::boolean").Scan(&ok); err != nil || !ok {
				t.Fatalf("bool cast: %v %v", ok, err)
			}
		})
	}
}

func TestRepeatAndGenerateSeries(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	for _, mode := range allModes {
		c := connect(t, url, mode)
		rows, err := c.Query(ctx, "SELECT repeat('x', 1000) FROM generate_series(1, 1000)")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil || len(s) != 1000 {
				t.Fatalf("%v: row %d: %d bytes, %v", mode, n, len(s), err)
			}
			n++
		}
		if rows.Err() != nil || n != 1000 {
			t.Fatalf("%v: %d rows, %v", mode, n, rows.Err())
		}
		var sum int64
		if err := c.QueryRow(ctx, "SELECT sum(i) FROM generate_series(1, 10, 3) AS g(i)").Scan(&sum); err != nil || sum != 1+4+7+10 {
			t.Fatalf("%v: stepped series sum %d, %v", mode, sum, err)
		}
		if err := c.QueryRow(ctx, "SELECT count(*) FROM generate_series(5, 1)").Scan(&sum); err != nil || sum != 0 {
			t.Fatalf("%v: empty series %d, %v", mode, sum, err)
		}
		if err := c.QueryRow(ctx, "SELECT max(generate_series) FROM generate_series(-3, $1)", 3).Scan(&sum); err != nil || sum != 3 {
			t.Fatalf("%v: series with parameter %d, %v", mode, sum, err)
		}
	}
}

func TestTransactionStatus(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	c := connect(t, url, pgx.QueryExecModeCacheStatement)
	pc := c.PgConn()
	mustExec(t, c, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
	steps := []struct {
		sql    string
		code   string // expected SQLSTATE, "" for success
		tag    string
		status byte
	}{
		{"BEGIN", "", "BEGIN", 'T'},
		{"INSERT INTO t VALUES (1, 'a')", "", "INSERT 0 1", 'T'},
		{"INSERT INTO t VALUES (1, 'dup')", "23505", "", 'E'},
		{"SELECT 1", "25P02", "", 'E'},
		{"COMMIT", "", "ROLLBACK", 'I'},
		{"SELECT count(*) FROM t", "", "SELECT 1", 'I'},
		{"START TRANSACTION", "", "START TRANSACTION", 'T'},
		{"INSERT INTO t VALUES (2, 'b')", "", "INSERT 0 1", 'T'},
		{"SAVEPOINT s1", "", "SAVEPOINT", 'T'},
		{"INSERT INTO t VALUES (2, 'dup')", "23505", "", 'E'},
		{"ROLLBACK TO SAVEPOINT s1", "", "ROLLBACK", 'T'},
		{"COMMIT", "", "COMMIT", 'I'},
		{"SAVEPOINT s2", "25P01", "", 'I'},
		{"BEGIN READ ONLY", "", "BEGIN", 'T'},
		{"DELETE FROM t", "25006", "", 'E'},
		{"ROLLBACK", "", "ROLLBACK", 'I'},
		{"COMMIT", "", "COMMIT", 'I'},
		{"BEGIN", "", "BEGIN", 'T'},
		{"VACUUM", "25001", "", 'E'},
		{"ABORT", "", "ROLLBACK", 'I'},
	}
	for _, s := range steps {
		tag, err := pc.Exec(ctx, s.sql).ReadAll()
		if code := pgCode(err); code != s.code {
			t.Fatalf("%s: code %q, want %q (%v)", s.sql, code, s.code, err)
		}
		if s.code == "" && (len(tag) != 1 || tag[0].CommandTag.String() != s.tag) {
			t.Fatalf("%s: tag %v, want %q", s.sql, tag, s.tag)
		}
		if st := pc.TxStatus(); st != s.status {
			t.Fatalf("%s: status %c, want %c", s.sql, st, s.status)
		}
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after transactions: %d, %v", n, err)
	}
	// pgx's transaction helpers.
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1, $2)", 3, "c"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after rollback: %d, %v", n, err)
	}
}

func TestErrorCodes(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		c := connect(t, url, mode)
		for _, tc := range []struct{ sql, code string }{
			{"LISTEN foo", "0A000"},
			{"SELECT ARRAY[1,2]", "0A000"},
			{"CREATE EXTENSION pgcrypto", "0A000"},
			{"SELECT * FROM pg_catalog.pg_class", "0A000"},
			{"SELEC 1", "42601"},
			{"SELECT FROM WHERE", "42601"},
			{"SELECT 'unterminated", "42601"},
			{"SELECT * FROM no_such_table", "42P01"},
			{"SELECT no_such_column FROM (SELECT 1 AS a)", "42703"},
			{"SELECT no_such_function(1)", "42883"},
			{"SHOW no_such_setting", "42704"},
			{"SET client_encoding = 'LATIN1'", "0A000"},
		} {
			_, err := c.Exec(ctx, tc.sql)
			if code := pgCode(err); code != tc.code {
				t.Errorf("%v: %s: code %q, want %q (%v)", mode, tc.sql, code, tc.code, err)
			}
		}
		var one int
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("%v: session unusable after errors: %v", mode, err)
		}
	}
}

func TestCancelSleep(t *testing.T) {
	fake := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	_, url := startServer(t, Options{Clock: fake})
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		c := connect(t, url, mode)
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(ctx, "SELECT pg_sleep(1000)")
			done <- err
		}()
		// The sleep is on the virtual clock, which never moves: only the
		// cancel request can end it.
		fake.BlockUntil(1)
		if err := c.PgConn().CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if pgCode(err) != "57014" || !strings.Contains(err.Error(), "canceling statement due to user request") {
			t.Fatalf("%v: canceled sleep: %v", mode, err)
		}
		var one int
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("%v: after cancel: %v", mode, err)
		}
		// A cancel request while idle does nothing.
		if err := c.PgConn().CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, "SELECT 2").Scan(&one); err != nil || one != 2 {
			t.Fatalf("%v: after idle cancel: %v", mode, err)
		}
	}
	// A sleep that the clock ends returns normally.
	c := connect(t, url, pgx.QueryExecModeSimpleProtocol)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "SELECT pg_sleep(2)")
		done <- err
	}()
	fake.BlockUntil(1)
	fake.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("sleep: %v", err)
	}
}

func TestCancelRealClock(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	c := connect(t, url, pgx.QueryExecModeCacheStatement)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "SELECT pg_sleep(30)")
		done <- err
	}()
	testenv.WaitBlocked(t, "litepg.(*Server).fnSleep", 1)
	if err := c.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; pgCode(err) != "57014" {
		t.Fatalf("canceled sleep: %v", err)
	}
	t.Logf("pg_sleep(30) canceled after %v", time.Since(start))
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
}

func TestWriteLockTimeout(t *testing.T) {
	fake := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	a, b := twoSessions(t, Options{Clock: fake, BusyTimeout: time.Second},
		"CREATE TABLE t (id INTEGER PRIMARY KEY)", "BEGIN", "INSERT INTO t VALUES (1)")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(ctx, "INSERT INTO t VALUES (2)")
		done <- err
	}()
	fake.BlockUntil(1)
	fake.Advance(time.Second)
	if err := <-done; pgCode(err) != "40001" {
		t.Fatalf("insert while locked: %v, want 40001", err)
	}
	// Readers are not blocked by the writer.
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("read during write: %d, %v", n, err)
	}
	mustExec(t, a, "COMMIT")
	mustExec(t, b, "INSERT INTO t VALUES (2)")
	if err := b.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after commit: %d, %v", n, err)
	}
}

func TestDeferredUpgradeConflict(t *testing.T) {
	a, b := twoSessions(t, Options{TxMode: TxDeferred},
		"CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)", "INSERT INTO t VALUES (1, 0)", "BEGIN")
	ctx := context.Background()
	var v int
	if err := a.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	mustExec(t, b, "UPDATE t SET v = v + 1 WHERE id = 1")
	_, err := a.Exec(ctx, "UPDATE t SET v = v + 1 WHERE id = 1")
	if pgCode(err) != "40001" {
		t.Fatalf("write after a concurrent commit: %v, want 40001", err)
	}
	if a.PgConn().TxStatus() != 'E' {
		t.Fatalf("status %c, want E", a.PgConn().TxStatus())
	}
	mustExec(t, a, "ROLLBACK")
	// The retry succeeds.
	mustExec(t, a, "BEGIN")
	mustExec(t, a, "UPDATE t SET v = v + 1 WHERE id = 1")
	mustExec(t, a, "COMMIT")
	if err := a.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != 2 {
		t.Fatalf("v = %d, %v", v, err)
	}
}

func TestTwoServersAreIndependent(t *testing.T) {
	fake1 := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	srv1, url1 := startServer(t, Options{Clock: fake1})
	srv2, url2 := startServer(t, Options{})
	if srv1.Path() == srv2.Path() {
		t.Fatalf("both servers use %s", srv1.Path())
	}
	ctx := context.Background()
	c1 := connect(t, url1, pgx.QueryExecModeCacheStatement)
	c2 := connect(t, url2, pgx.QueryExecModeCacheStatement)
	mustExec(t, c1, "CREATE TABLE only_one (id INTEGER)")
	if _, err := c2.Exec(ctx, "SELECT * FROM only_one"); pgCode(err) != "42P01" {
		t.Fatalf("table leaked to the second server: %v", err)
	}
	// A sleep on server 1 (virtual clock) does not block server 2 (wall
	// clock), and both have the registered functions.
	done := make(chan error, 1)
	go func() {
		_, err := c1.Exec(ctx, "SELECT pg_sleep(100)")
		done <- err
	}()
	fake1.BlockUntil(1)
	var s string
	if err := c2.QueryRow(ctx, "SELECT repeat('ab', 3)").Scan(&s); err != nil || s != "ababab" {
		t.Fatalf("server 2: %q, %v", s, err)
	}
	if _, err := c2.Exec(ctx, "SELECT pg_sleep(0.01)"); err != nil {
		t.Fatalf("server 2 sleep: %v", err)
	}
	fake1.Advance(100 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("server 1 sleep: %v", err)
	}
	if err := srv1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.QueryRow(ctx, "SELECT repeat('c', 2)").Scan(&s); err != nil || s != "cc" {
		t.Fatalf("server 2 after server 1 closed: %q, %v", s, err)
	}
}

func TestAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth AuthMethod
	}{{"cleartext", AuthPassword}, {"md5", AuthMD5}} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := startServer(t, Options{Auth: tc.auth, User: "lab", Password: "s3cret"})
			ctx := context.Background()
			good := strings.Replace(url, "lab@", "lab:s3cret@", 1)
			c, err := pgx.Connect(ctx, good)
			if err != nil {
				t.Fatalf("good password: %v", err)
			}
			c.Close(ctx)
			for _, bad := range []string{
				strings.Replace(url, "lab@", "lab:wrong@", 1),
				strings.Replace(url, "lab@", "other:s3cret@", 1),
			} {
				if _, err := pgx.Connect(ctx, bad); pgCode(err) != "28P01" {
					t.Fatalf("%s: %v, want 28P01", bad, err)
				}
			}
		})
	}
	if _, err := New(Options{Auth: AuthMD5}); err == nil {
		t.Fatal("New accepted password authentication without a password")
	}
	_, url := startServer(t, Options{User: "lab"})
	if _, err := pgx.Connect(context.Background(), strings.Replace(url, "lab@", "intruder@", 1)); pgCode(err) != "28000" {
		t.Fatalf("unknown user under trust: %v", err)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	srv, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	c, err := pgx.Connect(context.Background(), "postgres://lab@"+ln.Addr().String()+"/lab?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if err := c.Ping(context.Background()); err == nil {
		t.Fatal("session survived the end of Serve")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := srv.Serve(context.Background(), ln); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func TestPersistentPath(t *testing.T) {
	path := t.TempDir() + "/lab.db"
	srv, url := startServer(t, Options{Path: path})
	c := connect(t, url, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE kept (v TEXT)")
	mustExec(t, c, "INSERT INTO kept VALUES ('x')")
	c.Close(context.Background())
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_, url = startServer(t, Options{Path: path})
	c = connect(t, url, pgx.QueryExecModeSimpleProtocol)
	var v string
	if err := c.QueryRow(context.Background(), "SELECT v FROM kept").Scan(&v); err != nil || v != "x" {
		t.Fatalf("reopened database: %q, %v", v, err)
	}
}

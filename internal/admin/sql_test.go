package admin_test

// Tests of SQL over the console's views and of the session commands,
// through a whole sluice (package stack) with routes to the test
// PostgreSQL and MariaDB, by pgx, go-sql-driver/mysql and psql.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// lab is a whole sluice with a postgres route "pg" and a mysql route
// "my" (with kill credentials) to the test databases.
type lab struct {
	st      *stack.Stack
	pgURL   string // through route pg
	myDSN   string // through route my
	direct  string // the test PostgreSQL itself
	myCfg   *gomysql.Config
	console string // the admin console's URL
}

func startLab(t *testing.T) *lab { return startLabWith(t, "") }

// startLabWith is startLab with fast_path set to fastPath ("" for the
// default); "kernel" needs the kernel fast path (root, BPF sockmap).
func startLabWith(t *testing.T, fastPath string) *lab {
	t.Helper()
	pgURL := testenv.PostgresURL(t)
	pcfg, mcfg := testenv.PostgresConfig(t), testenv.MySQLConfig(t)
	st, err := stack.New(context.Background(), stack.Options{Config: &config.Config{Admin: config.Admin{Listen: "127.0.0.1:0"}, FastPath: fastPath}})
	if err != nil && fastPath == "kernel" {
		testenv.Missing(t, "the kernel fast path (root, a BPF sockmap): %v", err)
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pgAddr, err := st.AddRoute(stack.Route{Route: config.Route{Name: "pg", Listen: "127.0.0.1:0", Protocol: "postgres",
		Upstream: net.JoinHostPort(pcfg.Host, strconv.Itoa(int(pcfg.Port)))}})
	if err != nil {
		t.Fatal(err)
	}
	myAddr, err := st.AddRoute(stack.Route{Route: config.Route{Name: "my", Listen: "127.0.0.1:0", Protocol: "mysql",
		Upstream: mcfg.Addr, KillUser: mcfg.User, KillPassword: mcfg.Passwd}})
	if err != nil {
		t.Fatal(err)
	}
	via := mcfg.Clone()
	via.Addr = myAddr.String()
	return &lab{
		st:      st,
		pgURL:   fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", pcfg.User, pcfg.Password, pgAddr, pcfg.Database),
		myDSN:   via.FormatDSN(),
		direct:  pgURL,
		myCfg:   mcfg,
		console: "postgres://admin@" + st.AdminAddr().String() + "/sluice?sslmode=disable",
	}
}

func (l *lab) admin(t *testing.T) *pgx.Conn {
	t.Helper()
	return testenv.ConnectPG(t, l.console)
}

// psql runs the real psql against the console with -At and returns its
// output.
func (l *lab) psql(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(l.st.AdminAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Program(t, "psql"), append([]string{"-X", "-At", "-F", "|", "-h", host, "-p", port, "-U", "admin", "-d", "sluice", "-v", "ON_ERROR_STOP=1"}, args...)...)
	cmd.Env = append(os.Environ(), "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func pgCode(err error) string { return testenv.PGError(err).Code }

// TestSQLOverViews runs SQL with WHERE, GROUP BY, ORDER BY, joins and
// aggregates over sessions and statements made through real routes, by
// pgx and by psql, and checks the answers against the session registry.
func TestSQLOverViews(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Session big receives ~100 kB in one statement, session small a few
	// hundred bytes: as text, "9xx" would sort above "1xxxxx".
	big := testenv.ConnectPG(t, l.pgURL)
	small := testenv.ConnectPG(t, l.pgURL)
	var s string
	if err := big.QueryRow(ctx, "SELECT repeat('x', 100000) /* big */").Scan(&s); err != nil {
		t.Fatal(err)
	}
	if err := small.QueryRow(ctx, "SELECT 'hello' /* small */").Scan(&s); err != nil {
		t.Fatal(err)
	}
	my, err := sql.Open("mysql", l.myDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer my.Close()
	if err := my.QueryRowContext(ctx, "SELECT 'mysql marker'").Scan(&s); err != nil {
		t.Fatal(err)
	}

	// The expected sums, from the registry itself, once it holds what
	// the clients received (the console brings it up to date too).
	if err := l.st.Proxy().SyncRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	reg := l.st.Registry()
	want := map[string]int64{}
	bySession := map[uint64]int64{}
	var bigSession uint64
	add := func(st *session.Statement) {
		want[st.Session.User()] += st.BytesDown()
		bySession[st.Session.ID] += st.BytesDown()
		if strings.Contains(st.SQL, "/* big */") {
			bigSession = st.Session.ID
		}
	}
	for _, st := range reg.Recent() {
		add(st)
	}
	for _, st := range reg.Active() {
		add(st)
	}
	if bigSession == 0 {
		t.Fatal("the big statement is not in the registry")
	}

	adm := l.admin(t)
	rows, err := adm.Query(ctx, `SELECT user, sum(bytes_down) FROM statements GROUP BY 1 ORDER BY 2 DESC LIMIT 5`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for rows.Next() {
		var u string
		var n int64 // int8: the sum is a number, not text
		if err := rows.Scan(&u, &n); err != nil {
			t.Fatal(err)
		}
		got[u] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sum(bytes_down) by user = %v, want %v", got, want)
	}

	// Ordered by a number: the big session first.
	var first uint64
	var firstBytes int64
	if err := adm.QueryRow(ctx, `SELECT session, sum(bytes_down) FROM statements GROUP BY session ORDER BY 2 DESC LIMIT 1`).Scan(&first, &firstBytes); err != nil {
		t.Fatal(err)
	}
	if first != bigSession || firstBytes != bySession[bigSession] {
		t.Errorf("top session %d (%d bytes), want %d (%d bytes)", first, firstBytes, bigSession, bySession[bigSession])
	}
	// WHERE on numbers.
	var n int64
	if err := adm.QueryRow(ctx, `SELECT count(*) FROM statements WHERE bytes_down > 50000`).Scan(&n); err != nil || n != 1 {
		t.Errorf("statements over 50000 bytes: %d, %v; want 1", n, err)
	}
	// A join between views, quoted "user" and bare user alike.
	var route, user string
	err = adm.QueryRow(ctx, `SELECT s.route, st."user" FROM statements st JOIN sessions s ON s.id = st.session WHERE st.sql LIKE '%mysql marker%'`).Scan(&route, &user)
	if err != nil || route != "my" || user != l.myCfg.User {
		t.Errorf("join: route %q user %q, %v; want my, %s", route, user, err, l.myCfg.User)
	}
	// A subquery, and the new columns of statements.
	var db string
	err = adm.QueryRow(ctx, `SELECT database FROM statements WHERE session IN (SELECT id FROM sessions WHERE route = 'pg') AND route = 'pg' LIMIT 1`).Scan(&db)
	if err != nil || db == "" {
		t.Errorf("database of a pg statement: %q, %v", db, err)
	}
	// GaussDB's views live in pg_catalog: qualified, they are the same.
	var open int64
	if err := adm.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_session_wlmstat WHERE sessionid > 0`).Scan(&open); err != nil || open != int64(len(reg.Sessions())) {
		t.Errorf("sessions in pg_catalog.pg_session_wlmstat: %d, %v; want %d", open, err, len(reg.Sessions()))
	}
	var sid int64
	if err := adm.QueryRow(ctx, `SELECT sessionid FROM pg_catalog.gs_wlm_session_history s LIMIT 1`).Scan(&sid); err != nil || sid <= 0 {
		t.Errorf("pg_catalog.gs_wlm_session_history: %d, %v", sid, err)
	}
	// A query that references no view.
	if err := adm.QueryRow(ctx, `SELECT 1 + 1`).Scan(&n); err != nil || n != 2 {
		t.Errorf("SELECT 1 + 1 = %d, %v", n, err)
	}
	var f float64
	if err := adm.QueryRow(ctx, `SELECT max(bandwidth_mbps) FROM statements`).Scan(&f); err != nil || f < 0 {
		t.Errorf("max(bandwidth_mbps) = %v, %v", f, err)
	}
	// Errors carry their SQLSTATE (and, for a name, its position).
	for _, tt := range []struct {
		sql, code string
		pos       int32
	}{
		{"SELECT nope FROM sessions WHERE id > 0", "42703", 8},
		{"SELECT * FROM nowhere WHERE 1", "42P01", 15},
		{"SELECT * FROM sessions WHERE", "42601", 0},
		{"SELECT * FROM pg_catalog.pg_class WHERE 1", "0A000", 26},
		{"SELECT * FROM information_schema.tables", "0A000", 34},
	} {
		_, err := adm.Exec(ctx, tt.sql)
		if pe := testenv.PGError(err); pe.Code != tt.code || pe.Position != tt.pos {
			t.Errorf("%s: %v, want %s at %d", tt.sql, err, tt.code, tt.pos)
		}
	}
	// Literal SELECTs and drivers' health checks still answer.
	if err := adm.QueryRow(ctx, "SELECT version()").Scan(&s); err != nil || !strings.HasPrefix(s, "sluice") {
		t.Errorf("SELECT version() = %q, %v", s, err)
	}

	// psql: the same GROUP BY, both spellings of user.
	for _, q := range []string{`SELECT user, sum(bytes_down) FROM statements GROUP BY 1 ORDER BY 2 DESC LIMIT 5`, `SELECT "user", sum(bytes_down) FROM statements GROUP BY "user" ORDER BY 2 DESC`} {
		out, errOut, err := l.psql(t, "-c", q)
		if err != nil {
			t.Fatalf("psql %s: %v\n%s", q, err, errOut)
		}
		var lines []string
		for u, n := range want {
			lines = append(lines, u+"|"+strconv.FormatInt(n, 10))
		}
		if len(want) == 1 && out != lines[0]+"\n" {
			t.Errorf("psql %s:\n%s\nwant %v", q, out, lines)
		}
	}
	_, errOut, err := l.psql(t, "-c", "SELECT id FROM sessions ORDER BY nope")
	if err == nil || !strings.Contains(errOut, `column "nope" does not exist`) {
		t.Errorf("psql bad query: %v, %q", err, errOut)
	}
	_, errOut, err = l.psql(t, "-c", `\dt`)
	if err == nil || !strings.Contains(errOut, "unsupported SELECT") {
		t.Errorf(`psql \dt: %v, %q`, err, errOut)
	}
}

// TestAlterUnboundUser binds a user that has no binding with ALTER USER,
// as GaussDB moves a user out of the default pool.
func TestAlterUnboundUser(t *testing.T) {
	l := startLab(t)
	ctx := context.Background()
	adm := l.admin(t)
	if _, err := adm.Exec(ctx, "CREATE RESOURCE POOL rp1 WITH (weight=3)"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Exec(ctx, "ALTER USER newbie RESOURCE POOL 'rp1'"); err != nil {
		t.Fatalf("ALTER USER of an unbound user: %v", err)
	}
	out, errOut, err := l.psql(t, "-c", "SHOW USERS", "-c", `SELECT "user", resource_pool, sessions FROM users WHERE "user" = 'newbie'`,
		"-c", "SELECT respool_name, weight, mem_percent IS NULL FROM pg_resource_pool")
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, errOut)
	}
	if want := "newbie|rp1|0\nnewbie|rp1|0\nrp1|3|1\n"; out != want {
		t.Errorf("psql:\n%s\nwant\n%s", out, want)
	}
}

// waitPG waits until the test PostgreSQL runs a statement containing
// marker: a cancel request reaches only a running statement.
func waitPG(t *testing.T, direct *pgx.Conn, marker string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "PostgreSQL to run "+marker, func() bool {
		var n int
		err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()", marker).Scan(&n)
		return err == nil && n > 0
	})
}

// sessionOf returns, from the console, the session running a statement
// containing marker.
func sessionOf(t *testing.T, adm *pgx.Conn, marker string) int64 {
	t.Helper()
	var id int64
	testenv.Eventually(t, 20*time.Second, "sluice to see "+marker, func() bool {
		return adm.QueryRow(context.Background(), "SELECT session FROM statements WHERE state = 'running' AND sql LIKE '%"+marker+"%'").Scan(&id) == nil
	})
	return id
}

// TestCancelAndTerminatePostgres cancels a running pg_sleep from the
// console (the client gets 57014), then ends a session (57P01).
func TestCancelAndTerminatePostgres(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := l.admin(t)
	direct := testenv.ConnectPG(t, l.direct)
	client := testenv.ConnectPG(t, l.pgURL)

	var want []string // the audit trail's entries of the session commands
	for i, stmt := range []string{"SELECT pg_cancel_backend(%d)", "CANCEL STATEMENT %d"} {
		marker := fmt.Sprintf("cancel_me_%d", i)
		done := make(chan error, 1)
		go func() { _, err := client.Exec(ctx, "SELECT pg_sleep(30) /* "+marker+" */"); done <- err }()
		id := sessionOf(t, adm, marker)
		want = append(want, fmt.Sprintf("CANCEL STATEMENT %d ok", id))
		waitPG(t, direct, marker)
		start := time.Now()
		if i == 0 {
			var ok bool
			if err := adm.QueryRow(ctx, fmt.Sprintf(stmt, id)).Scan(&ok); err != nil || !ok {
				t.Fatalf("%s: %v, %v", stmt, ok, err)
			}
		} else if _, err := adm.Exec(ctx, fmt.Sprintf(stmt, id)); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		if err := <-done; pgCode(err) != "57014" {
			t.Errorf("%s: client got %v, want 57014", stmt, err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: the statement ended %v after the cancel", stmt, d)
		}
	}
	// Nothing runs now: f, and an error for the command form.
	var id int64
	if err := adm.QueryRow(ctx, "SELECT id FROM sessions WHERE route = 'pg'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := adm.QueryRow(ctx, fmt.Sprintf("SELECT pg_cancel_backend(%d)", id)).Scan(&ok); err != nil || ok {
		t.Errorf("pg_cancel_backend of an idle session: %v, %v; want false", ok, err)
	}
	if _, err := adm.Exec(ctx, "TERMINATE SESSION 999999"); pgCode(err) != "42704" {
		t.Errorf("TERMINATE SESSION of no session: %v, want 42704", err)
	}
	want = append(want, fmt.Sprintf("CANCEL STATEMENT %d error", id), "TERMINATE SESSION 999999 error")

	// Terminate during a pg_sleep: the client reads FATAL 57P01.
	done := make(chan error, 1)
	go func() { _, err := client.Exec(ctx, "SELECT pg_sleep(30) /* end_me */"); done <- err }()
	id = sessionOf(t, adm, "end_me")
	want = append(want, fmt.Sprintf("TERMINATE SESSION %d ok", id))
	if err := adm.QueryRow(ctx, fmt.Sprintf("SELECT pg_terminate_backend(%d)", id)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend: %v, %v", ok, err)
	}
	err := <-done
	if pe := testenv.PGError(err); pe.Code != "57P01" || pe.Severity != "FATAL" || pe.Message != "terminating connection due to administrator command" {
		t.Errorf("client got %v, want FATAL 57P01", err)
	}
	testenv.Eventually(t, 10*time.Second, "the session to close", func() bool {
		return l.st.Registry().Session(uint64(id)) == nil
	})
	// Each command is in the audit trail, as the console's user did it.
	var audited []string
	rows, err := adm.Query(ctx, "SELECT statement || ' ' || outcome FROM audit WHERE surface = 'console' AND user = 'admin' ORDER BY time")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		audited = append(audited, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(audited, want) {
		t.Errorf("audit trail of the session commands:\n%q\nwant\n%q", audited, want)
	}
	// The server side is gone as well, through the cancel that follows the
	// terminate: well before pg_sleep's 30 s would end it on its own (the
	// bound leaves room for a CI machine running every package at once).
	testenv.Eventually(t, 25*time.Second, "PostgreSQL to end the backend", func() bool {
		var n int
		err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%end_me%' AND pid <> pg_backend_pid()").Scan(&n)
		return err == nil && n == 0
	})
}

// TestCancelAndTerminateMySQL cancels a running SLEEP through the mysql
// route's kill credentials, then ends a session (ERR 1927).
func TestCancelAndTerminateMySQL(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := l.admin(t)
	db, err := sql.Open("mysql", l.myDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	direct, err := sql.Open("mysql", l.myCfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	waitMy := func(marker string) {
		testenv.Eventually(t, 20*time.Second, "MariaDB to run "+marker, func() bool {
			var n int
			err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", "%"+marker+"%").Scan(&n)
			return err == nil && n > 0
		})
	}

	type result struct {
		v   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		var v int
		err := conn.QueryRowContext(ctx, "SELECT SLEEP(30) /* my_cancel */").Scan(&v)
		res <- result{v, err}
	}()
	id := sessionOf(t, adm, "my_cancel")
	waitMy("my_cancel")
	start := time.Now()
	var ok bool
	if err := adm.QueryRow(ctx, fmt.Sprintf("SELECT pg_cancel_backend(%d)", id)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_cancel_backend: %v, %v", ok, err)
	}
	got := <-res
	var me *gomysql.MySQLError
	// KILL QUERY ends SLEEP early: MariaDB returns 1 (interrupted) or ERR 1317.
	if !(got.err == nil && got.v == 1) && !(errors.As(got.err, &me) && me.Number == 1317) {
		t.Errorf("client got %d, %v; want 1 or ERR 1317", got.v, got.err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("SLEEP ended %v after the cancel", d)
	}

	errc := make(chan error, 1)
	go func() {
		var v int
		errc <- conn.QueryRowContext(ctx, "SELECT SLEEP(30) /* my_end */").Scan(&v)
	}()
	id = sessionOf(t, adm, "my_end")
	if _, err := adm.Exec(ctx, fmt.Sprintf("TERMINATE SESSION %d", id)); err != nil {
		t.Fatalf("TERMINATE SESSION: %v", err)
	}
	err = <-errc
	if !errors.As(err, &me) || me.Number != 1927 {
		t.Errorf("client got %v, want ERR 1927", err)
	}
	testenv.Eventually(t, 10*time.Second, "the session to close", func() bool {
		return l.st.Registry().Session(uint64(id)) == nil
	})
}

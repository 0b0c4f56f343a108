package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// forwardApp runs `sluice serve` in process with a postgres route and a
// mysql route to the test servers, forwarding the statements of the test
// servers' own user.
type forwardApp struct {
	*stack.Stack
	pgRoute, myRoute string
	pgURL            string        // the test server, directly
	pgUser, pgPass   string        // the forwarding user on PostgreSQL
	my               *mysql.Config // the test server, directly
}

func startForwardApp(t *testing.T) *forwardApp {
	t.Helper()
	return startForwardAppWith(t, nil, nil)
}

// startForwardAppWith is startForwardApp with edit, if not nil, applied
// to the configuration first, and log, if not nil, as the app's logger.
func startForwardAppWith(t *testing.T, edit func(*config.Config), log *slog.Logger) *forwardApp {
	t.Helper()
	pcfg, mcfg := testenv.PostgresConfig(t), testenv.MySQLConfig(t)
	fa := &forwardApp{pgRoute: freeAddr(t), myRoute: freeAddr(t), pgURL: testenv.PostgresURL(t),
		pgUser: pcfg.User, pgPass: pcfg.Password, my: mcfg}
	c := &config.Config{
		Catalog: filepath.Join(t.TempDir(), "catalog.json"),
		Grace:   time.Second,
		Admin:   config.Admin{ForwardUsers: []string{pcfg.User, mcfg.User}},
		Routes: []config.Route{
			{Name: "pg", Listen: fa.pgRoute, Protocol: "postgres", Upstream: testenv.PostgresAddr(t)},
			{Name: "my", Listen: fa.myRoute, Protocol: "mysql", Upstream: mcfg.Addr},
		},
	}
	if edit != nil {
		edit(c)
	}
	if log != nil {
		fa.Stack = runAppLogging(t, c, log)
	} else {
		fa.Stack = runApp(t, c)
	}
	if _, err := fa.Manager().Service().Exec(context.Background(), "CREATE RESOURCE POOL p1"); err != nil {
		t.Fatal(err)
	}
	return fa
}

func (fa *forwardApp) routeURL(user, password string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/sluice?sslmode=disable", user, password, fa.pgRoute)
}

// pool returns the catalog binding of user, "-" when there is none.
func (fa *forwardApp) pool(user string) string {
	if u := fa.Manager().Service().Catalog().Users[user]; u != nil {
		return u.Pool
	}
	return "-"
}

// simple runs sql with PostgreSQL's simple query protocol.
func simple(ctx context.Context, c *pgx.Conn, sql string) error {
	_, err := c.PgConn().Exec(ctx, sql).ReadAll()
	return err
}

// pgCode is err's SQLSTATE, "" for none.
func pgCode(err error) string { return testenv.PGError(err).Code }

// dropMySQLUsers drops MySQL users user@'%' now and when the test ends,
// connected as cfg directly; it returns that connection, closed after the
// last drop.
func dropMySQLUsers(t *testing.T, cfg *mysql.Config, users ...string) *sql.DB {
	t.Helper()
	root := testenv.OpenMySQL(t, cfg)
	drop := func() {
		for _, u := range users {
			if _, err := root.Exec("DROP USER IF EXISTS '" + u + "'@'%'"); err != nil {
				t.Error(err)
			}
		}
	}
	drop()
	t.Cleanup(drop)
	return root
}

// dropRoles drops PostgreSQL roles now and when the test ends.
func dropRoles(t *testing.T, url string, roles ...string) {
	t.Helper()
	drop := func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		for _, r := range roles {
			if _, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+r); err != nil {
				t.Error(err)
			}
		}
	}
	drop()
	t.Cleanup(drop)
}

func TestForwardUserPostgres(t *testing.T) {
	fa := startForwardApp(t)
	ctx := context.Background()
	const prefix = "sluice_fwd_"
	u1, u2, u3, u4, plain := prefix+"u1", prefix+"u2", prefix+"u3", prefix+"u4", prefix+"plain"
	dropRoles(t, fa.pgURL, u1, u2, u3, u4, plain)

	t.Run("forwarding user", func(t *testing.T) {
		// psql sends the statement as a simple Query.
		out, err := runPsql(t, fa.pgRoute, fa.pgUser, "sluice", []string{"PGPASSWORD=" + fa.pgPass},
			"-v", "ON_ERROR_STOP=1", "-X", "-c", "CREATE USER "+u1+" RESOURCE POOL 'p1' PASSWORD 'pw1'")
		if err != nil || !strings.Contains(out, "CREATE ROLE") {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		if got := fa.pool(u1); got != "p1" {
			t.Fatalf("catalog binds %s to %q, want p1", u1, got)
		}
		res, err := fa.Manager().Service().Exec(ctx, "SHOW USERS")
		if err != nil || !strings.Contains(fmt.Sprint(res.Rows), u1+" p1") {
			t.Fatalf("SHOW USERS = %v, %v", res.Rows, err)
		}
		// The role exists and logs in with its password, through sluice.
		c, err := pgx.Connect(ctx, fa.routeURL(u1, "pw1"))
		if err != nil {
			t.Fatalf("log in as %s through the route: %v", u1, err)
		}
		defer c.Close(ctx)
		var who string
		if err := c.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != u1 {
			t.Fatalf("current_user = %q, %v", who, err)
		}
		if s := sessionOf(fa, u1); s == nil || s.Pool() != "p1" {
			t.Fatalf("session of %s not in pool p1: %+v", u1, s)
		}
	})

	t.Run("other user", func(t *testing.T) {
		ensureRole(t, fa.pgURL, plain, "plainpw")
		c := testenv.ConnectPG(t, fa.routeURL(plain, "plainpw"))
		err := simple(ctx, c, "CREATE USER "+u2+" RESOURCE POOL 'p1' PASSWORD 'pw2'")
		if pgCode(err) != "42601" {
			t.Fatalf("got %v, want PostgreSQL's syntax error 42601", err)
		}
		if got := fa.pool(u2); got != "-" {
			t.Fatalf("catalog binds %s to %q", u2, got)
		}
	})

	t.Run("unknown pool", func(t *testing.T) {
		c := testenv.ConnectPG(t, fa.routeURL(fa.pgUser, fa.pgPass))
		err := simple(ctx, c, "CREATE USER "+u3+" RESOURCE POOL 'nope' PASSWORD 'pw3'")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42704" || pe.Message != `resource pool "nope" does not exist` {
			t.Fatalf("got %v, want 42704 resource pool \"nope\" does not exist", err)
		}
		// The session is in step: the next statements work.
		var n int
		if err := c.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
			t.Fatalf("next query: %d, %v", n, err)
		}
		if err := simple(ctx, c, "ALTER USER "+u1+" RESOURCE POOL default_pool"); err != nil {
			t.Fatalf("ALTER USER on the same session: %v", err)
		}
		if got := fa.pool(u1); got != "" {
			t.Fatalf("after ALTER USER, %s is in %q", u1, got)
		}
		var exists bool
		if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", u3).Scan(&exists); err != nil || exists {
			t.Fatalf("role %s exists: %v, %v", u3, exists, err)
		}
		if got := fa.pool(u3); got != "-" {
			t.Fatalf("catalog binds %s to %q", u3, got)
		}
		// Inside a transaction the error aborts it, as the server's own would.
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := simple(ctx, c, "CREATE USER "+u3+" RESOURCE POOL 'nope'"); pgCode(err) != "42704" {
			t.Fatalf("in a transaction: %v", err)
		}
		if err := simple(ctx, c, "SELECT 1"); pgCode(err) != "25P02" {
			t.Fatalf("after the error in a transaction: %v, want 25P02", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("not split", func(t *testing.T) {
		c := testenv.ConnectPG(t, fa.routeURL(fa.pgUser, fa.pgPass))
		// Several statements in one Query, and the extended protocol,
		// reach the database as written.
		if err := simple(ctx, c, "CREATE USER "+u4+" RESOURCE POOL 'p1'; SELECT 1"); pgCode(err) != "42601" {
			t.Fatalf("multi-statement Query: %v, want 42601", err)
		}
		if _, err := c.PgConn().ExecParams(ctx, "CREATE USER "+u4+" RESOURCE POOL 'p1'", nil, nil, nil, nil).Close(); pgCode(err) != "42601" {
			t.Fatalf("extended protocol: %v, want 42601", err)
		}
		if got := fa.pool(u4); got != "-" {
			t.Fatalf("catalog binds %s to %q", u4, got)
		}
	})
}

// sessionOf returns the open session of user, or nil.
func sessionOf(fa *forwardApp, user string) *session.Session {
	for _, s := range fa.Proxy().Registry().Sessions() {
		if s.User() == user {
			return s
		}
	}
	return nil
}

func TestForwardUserMySQL(t *testing.T) {
	fa := startForwardApp(t)
	ctx := context.Background()
	const m1, m2 = "sluice_fwd_m1", "sluice_fwd_m2"
	root := dropMySQLUsers(t, fa.my, m1, m2)

	route := func(user, password string) *sql.DB {
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "tcp", fa.myRoute
		db := testenv.OpenMySQL(t, cfg)
		db.SetMaxOpenConns(1)
		return db
	}
	admin := route(fa.my.User, fa.my.Passwd)
	if _, err := admin.ExecContext(ctx, "CREATE USER "+m1+" RESOURCE POOL 'p1' PASSWORD 'pw1'"); err != nil {
		t.Fatalf("CREATE USER through the mysql route: %v", err)
	}
	if got := fa.pool(m1); got != "p1" {
		t.Fatalf("catalog binds %s to %q, want p1", m1, got)
	}
	var n int
	if err := root.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user WHERE user = ?", m1).Scan(&n); err != nil || n != 1 {
		t.Fatalf("MariaDB has %d users %s: %v", n, m1, err)
	}
	user := route(m1, "pw1")
	var who string
	if err := user.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&who); err != nil || who != m1+"@%" {
		t.Fatalf("log in as %s through the route: %q, %v", m1, who, err)
	}
	if s := sessionOf(fa, m1); s == nil || s.Pool() != "p1" {
		t.Fatalf("session of %s not in pool p1: %+v", m1, s)
	}

	// An unknown pool: MariaDB raises the error, the session goes on.
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "CREATE USER "+m2+" RESOURCE POOL 'nope' PASSWORD 'pw2'")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1644 || string(me.SQLState[:]) != "42704" || me.Message != `resource pool "nope" does not exist` {
		t.Fatalf("got %v, want error 1644 (42704) resource pool \"nope\" does not exist", err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("next query: %d, %v", n, err)
	}
	if got := fa.pool(m2); got != "-" {
		t.Fatalf("catalog binds %s to %q", m2, got)
	}
}

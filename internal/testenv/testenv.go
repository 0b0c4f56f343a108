package testenv

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql" // also the database/sql driver "mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Default addresses, as scripts/testdb sets them up.
const (
	DefaultPG    = "postgres://sluice:sluice@127.0.0.1:15432/sluice?sslmode=disable"
	DefaultMySQL = "sluice:sluice@tcp(127.0.0.1:13306)/sluice"
)

// CI reports whether the tests run in CI (CI=true), where a missing
// dependency is a failure.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing fails the test under CI and skips it elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("missing dependency (CI=true): "+format, args...)
	}
	t.Skipf("missing dependency: "+format, args...)
}

// PostgresURL returns the URL of the test PostgreSQL after checking that it
// answers.
func PostgresURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("SLUICE_TEST_PG")
	if url == "" {
		url = DefaultPG
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		Missing(t, "PostgreSQL at %s: %v (run scripts/testdb start)", url, err)
		return ""
	}
	c.Close(ctx)
	return url
}

// ConnectPG opens a pgx connection to url, within 30 s; it closes when
// the test ends.
func ConnectPG(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	return ConnectPGConfig(t, mustParse(t, url, pgx.ParseConfig))
}

// ConnectPGConfig opens a pgx connection with cfg, within 30 s; it
// closes when the test ends. A failure to connect fails t.
func ConnectPGConfig(t testing.TB, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	return openWithin(t, 30*time.Second,
		func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) },
		func(c *pgx.Conn) { c.Close(context.Background()) })
}

// openWithin returns what open gives within timeout and calls close on
// it when the test ends. An error of open fails t.
func openWithin[T any](t testing.TB, timeout time.Duration, open func(context.Context) (T, error), close func(T)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	v, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(v) })
	return v
}

// PGError is the *pgconn.PgError in err's chain, or an empty one (Code
// "") when there is none.
func PGError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return &pgconn.PgError{}
}

// MySQLDSN returns the go-sql-driver DSN of the test MariaDB after checking
// that it answers.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("SLUICE_TEST_MYSQL")
	if dsn == "" {
		dsn = DefaultMySQL
	}
	db, err := sql.Open("mysql", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		Missing(t, "MariaDB at %s: %v (run scripts/testdb start)", dsn, err)
		return ""
	}
	return dsn
}

// PostgresConfig returns the parsed PostgresURL.
func PostgresConfig(t testing.TB) *pgx.ConnConfig {
	t.Helper()
	return mustParse(t, PostgresURL(t), pgx.ParseConfig)
}

// PostgresAddr returns the host:port of the test PostgreSQL, as a
// route's upstream names it, after checking that it answers.
func PostgresAddr(t testing.TB) string {
	t.Helper()
	return PostgresAddrOf(t, PostgresURL(t))
}

// PostgresAddrOf returns the host:port of the PostgreSQL URL url, as a
// route's upstream names it. A malformed url fails t.
func PostgresAddrOf(t testing.TB, url string) string {
	t.Helper()
	cfg := mustParse(t, url, pgx.ParseConfig)
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// PostgresConfigVia returns url parsed, with its host and port replaced
// by those of addr (host:port): a session to the same database, user and
// password through a route listening on addr. A malformed url or addr
// fails t.
func PostgresConfigVia(t testing.TB, url, addr string) *pgx.ConnConfig {
	t.Helper()
	cfg := mustParse(t, url, pgx.ParseConfig)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("route address %q: %v", addr, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatalf("route address %q: %v", addr, err)
	}
	cfg.Host, cfg.Port = host, uint16(n)
	return cfg
}

// MySQLConfig returns the parsed MySQLDSN.
func MySQLConfig(t testing.TB) *mysql.Config {
	t.Helper()
	return mustParse(t, MySQLDSN(t), mysql.ParseDSN)
}

// OpenMySQL opens a database/sql pool of go-sql-driver/mysql with cfg,
// closed when the test ends. Opening only checks cfg: the pool's first
// statement connects.
func OpenMySQL(t testing.TB, cfg *mysql.Config) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open a MySQL pool: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// mustParse returns parse(s), failing t if it fails. The error is logged
// without s, which holds a password.
func mustParse[T any](t testing.TB, s string, parse func(string) (T, error)) T {
	t.Helper()
	v, err := parse(s)
	if err != nil {
		t.Fatalf("parse a test server's address: %v", err)
	}
	return v
}

// Program returns the path of an installed client program such as psql,
// pgbench, mariadb or sysbench.
func Program(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "program %s not found in PATH", name)
		return ""
	}
	return p
}

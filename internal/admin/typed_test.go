package admin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestTypedResults reads int8, float8, text, NULL and bool columns of
// console queries in every pgx query mode: the modes that prepare ask
// for binary int8 and float8, the others read text.
func TestTypedResults(t *testing.T) {
	c := startConsole(t, Options{MaxQueryRows: 100})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eachMode(t, c, func(t *testing.T, _ pgx.QueryExecMode, conn *pgx.Conn) {
		var (
			i    int64
			f    float64
			s    string
			null *string
		)
		if err := conn.QueryRow(ctx, "SELECT 40 + 2, 1.25 * 2, 'x' || 'y', NULL").Scan(&i, &f, &s, &null); err != nil {
			t.Fatal(err)
		}
		if i != 42 || f != 2.5 || s != "xy" || null != nil {
			t.Errorf("got %d %v %q %v", i, f, s, null)
		}
		var weight int64
		var name string
		if _, err := conn.Exec(ctx, "CREATE RESOURCE POOL IF NOT EXISTS typed WITH (weight=7)"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT name, weight FROM pools WHERE weight > 5 ORDER BY weight DESC").Scan(&name, &weight); err != nil || name != "typed" || weight != 7 {
			t.Errorf("pools: %q %d, %v", name, weight, err)
		}
		// No session 424242: false, as PostgreSQL answers for no backend.
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_terminate_backend(424242)").Scan(&ok); err != nil || ok {
			t.Errorf("pg_terminate_backend(424242) = %v, %v", ok, err)
		}
		_, err := conn.Exec(ctx, "SELECT * FROM sessions WHERE nope = 1")
		if pe, isPg := err.(*pgconn.PgError); !isPg || pe.Code != "42703" || pe.Position != 30 {
			t.Errorf("unknown column: %v", err)
		}
		// More rows than MaxQueryRows: 54000; as many: fine.
		const upTo = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < %d) SELECT n FROM c"
		_, err = conn.Exec(ctx, fmt.Sprintf(upTo, 101))
		if pe, isPg := err.(*pgconn.PgError); !isPg || pe.Code != "54000" {
			t.Errorf("101 rows: %v, want 54000", err)
		}
		if tag, err := conn.Exec(ctx, fmt.Sprintf(upTo, 100)); err != nil || tag.String() != "SELECT 100" {
			t.Errorf("100 rows: %v, %v", tag, err)
		}
	})
}

// eachMode runs f in a subtest per pgx query mode, with a connection to
// the console in that mode.
func eachMode(t *testing.T, c *console, f func(t *testing.T, mode pgx.QueryExecMode, conn *pgx.Conn)) {
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg, err := pgx.ParseConfig(c.url("admin", password))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DefaultQueryExecMode = mode
			f(t, mode, testenv.ConnectPGConfig(t, cfg))
		})
	}
}

// TestQueryTimeout: a query that runs past QueryTimeout ends with 57014
// and the connection goes on.
func TestQueryTimeout(t *testing.T) {
	c := startConsole(t, Options{QueryTimeout: time.Second}) // room for the next query on a loaded host
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := c.connect(t)
	_, err := conn.Exec(ctx, "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c")
	if pe, ok := err.(*pgconn.PgError); !ok || pe.Code != "57014" {
		t.Errorf("endless query: %v, want 57014", err)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Errorf("after the timeout: %d, %v", n, err)
	}
}

package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/testenv"
)

// The integration tests run against the servers of scripts/testdb, each in
// a database of its own, bench_test, created on demand, so they never
// touch tables other tests use.
const testDB = "bench_test"

// mysqlArgs returns the connection options of the test MariaDB's bench_test
// database, given as a go-sql-driver DSN.
func mysqlArgs(t *testing.T) []string {
	t.Helper()
	cfg := testenv.MySQLConfig(t)
	db, err := sql.Open("mysql", testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS " + testDB); err != nil {
		t.Fatal(err)
	}
	cfg.DBName = testDB
	return []string{"--dsn=" + cfg.FormatDSN()}
}

// pgArgs returns the connection options of the test PostgreSQL's
// bench_test database, given as --pgsql-* options.
func pgArgs(t *testing.T) []string {
	t.Helper()
	raw := testenv.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var pe *pgconn.PgError
	if _, err := c.Exec(ctx, "CREATE DATABASE "+testDB); err != nil && !(errors.As(err, &pe) && pe.Code == "42P04") {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(u.Host)
	pass, _ := u.User.Password()
	return []string{"--db-driver=pgsql", "--pgsql-host=" + host, "--pgsql-port=" + port,
		"--pgsql-user=" + u.User.Username(), "--pgsql-password=" + pass, "--pgsql-db=" + testDB}
}

// bench runs Main and returns its exit code and output.
func bench(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestIntegrationMySQL(t *testing.T) {
	testenv.SkipShort(t, "takes 7s here")
	integration(t, mysqlArgs(t), func(t *testing.T) {
		dsn := strings.TrimPrefix(mysqlArgs(t)[0], "--dsn=")
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var name, ddl string
		if err := db.QueryRow("SHOW CREATE TABLE sbtest1").Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"`id` int(11) NOT NULL AUTO_INCREMENT", "`c` char(120) NOT NULL DEFAULT ''", "PRIMARY KEY (`id`)", "KEY `k_1` (`k`)", "ENGINE=InnoDB AUTO_INCREMENT=3001"} {
			if !strings.Contains(ddl, want) {
				t.Errorf("sbtest1 lacks %q:\n%s", want, ddl)
			}
		}
	})
}

func TestIntegrationPgSQL(t *testing.T) {
	testenv.SkipShort(t, "takes 14s here")
	integration(t, pgArgs(t), func(t *testing.T) {
		u, _ := url.Parse(testenv.PostgresURL(t))
		u.Path = "/" + testDB
		ctx := context.Background()
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var idx string
		if err := c.QueryRow(ctx, "SELECT string_agg(indexdef, '; ' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'sbtest1'").Scan(&idx); err != nil {
			t.Fatal(err)
		}
		want := "CREATE INDEX k_1 ON public.sbtest1 USING btree (k); CREATE UNIQUE INDEX sbtest1_pkey ON public.sbtest1 USING btree (id)"
		if idx != want {
			t.Errorf("indexes %q, want %q", idx, want)
		}
		var next int64
		if err := c.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('sbtest1', 'id'))").Scan(&next); err != nil || next != 3001 {
			t.Errorf("next id %d (%v), want 3001", next, err)
		}
	})
}

// integration runs prepare, run and cleanup through Main and Run; schema
// checks the tables right after prepare.
func integration(t *testing.T, conn []string, schema func(t *testing.T)) {
	args := func(extra ...string) []string { return append(append([]string{}, conn...), extra...) }
	const size = "--table-size=3000"

	if code, _, stderr := bench(t, args("--tables=2", "oltp_read_write", "cleanup")...); code != 0 {
		t.Fatalf("cleanup: %d %s", code, stderr)
	}
	code, _, stderr := bench(t, args("--time=1", "oltp_read_write", "run")...)
	if code != ExitRuntime || stderr != "sluice bench: table sbtest1 does not exist (run `sluice bench oltp_read_write prepare` first)\n" {
		t.Fatalf("run before prepare: %d %q", code, stderr)
	}

	code, stdout, stderr := bench(t, args("--tables=2", size, "oltp_read_write", "prepare")...)
	if code != 0 {
		t.Fatalf("prepare: %d %s", code, stderr)
	}
	for _, want := range []string{"Creating table 'sbtest2'...\n", "Inserting 3000 records into 'sbtest1'\n", "Creating a secondary index on 'sbtest2'...\n", "Loaded 6000 rows into 2 table(s)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("prepare output lacks %q:\n%s", want, stdout)
		}
	}
	schema(t)
	code, _, stderr = bench(t, args("--tables=2", size, "oltp_read_write", "prepare")...)
	if code != ExitRuntime || !strings.Contains(stderr, "run cleanup first") {
		t.Fatalf("second prepare: %d %q", code, stderr)
	}

	// One thread, no contention: exactly sysbench's 14/4/2 and 20 round
	// trips per transaction, in both statement modes and both I/O models.
	for _, ps := range []string{"auto", "disable"} {
		for _, io := range []string{IOPoller, IOThread} {
			o, _, _, err := ParseArgs(args("--tables=2", size, "--threads=1", "--events=200", "--time=0", "--db-ps-mode="+ps, "--io-model="+io, "oltp_read_write", "run"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), o, &strings.Builder{})
			if err != nil {
				t.Fatalf("ps-mode %s, io-model %s: %v", ps, io, err)
			}
			if res.Transactions != 200 || res.Reads != 14*200 || res.Writes != 4*200 || res.Other != 2*200 || res.RoundTrips != 20*200 {
				t.Fatalf("ps-mode %s, io-model %s: r/w/o %d/%d/%d round trips %d over %d transactions", ps, io, res.Reads, res.Writes, res.Other, res.RoundTrips, res.Transactions)
			}
			if res.Latency.Min <= 0 || res.Latency.Max < res.Latency.Min || res.Histogram.TotalCount() != 200 {
				t.Fatalf("latency %+v", res.Latency)
			}
		}
	}

	// A thread per worker, several workers, cut short by the context: the
	// workers blocked in their reads return.
	{
		o, _, _, err := ParseArgs(args("--tables=2", size, "--threads=4", "--time=0", "--io-model=thread", "oltp_read_write", "run"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := Run(ctx, o, &strings.Builder{})
		cancel()
		// Statements of the transactions cut short count too.
		if !errors.Is(err, context.DeadlineExceeded) || res.Transactions == 0 || res.Reads < 14*res.Transactions {
			t.Fatalf("cancelled thread-model run: %v, %d transactions, %d reads", err, res.Transactions, res.Reads)
		}
	}

	// Several threads for a while, with interval reports.
	code, stdout, stderr = bench(t, args("--tables=2", size, "--threads=4", "--time=2", "--report-interval=1", "oltp_read_write", "run")...)
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	for _, want := range []string{"Number of threads: 4\n", "[ 1s ] thds: 4 tps: ", "    transactions:  ", "    per transaction:  "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("run output lacks %q:\n%s", want, stdout)
		}
	}

	// JSON.
	code, stdout, stderr = bench(t, args("--tables=2", size, "--threads=2", "--time=1", "--format=json", "oltp_read_only", "run")...)
	if code != 0 {
		t.Fatalf("json run: %d %s", code, stderr)
	}
	var doc struct {
		SQL struct {
			Transactions uint64 `json:"transactions"`
			Read         uint64 `json:"read"`
		} `json:"sql_statistics"`
		RoundTrips struct {
			PerTransaction float64 `json:"per_transaction"`
		} `json:"round_trips"`
		Histogram struct {
			Count int64 `json:"count"`
		} `json:"histogram"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("json: %v\n%s", err, stdout)
	}
	if doc.SQL.Transactions == 0 || doc.SQL.Read != 14*doc.SQL.Transactions || doc.RoundTrips.PerTransaction != 16 || doc.Histogram.Count != int64(doc.SQL.Transactions) {
		t.Fatalf("json figures %+v", doc)
	}

	// The other workloads, briefly.
	for _, w := range []struct {
		name  string
		extra []string
	}{
		{"oltp_read_only", nil}, {"oltp_write_only", nil}, {"oltp_point_select", nil},
		{"oltp_update_index", nil}, {"oltp_update_non_index", nil}, {"oltp_delete", nil},
		{"oltp_insert", nil}, {"oltp_insert", []string{"--auto-inc=off"}},
		{"select_random_points", []string{"--tables=1"}}, {"select_random_ranges", []string{"--tables=1"}},
		// Without transactions two threads may delete and then both
		// re-insert the same row: MySQL's duplicate key (1062) is then
		// expected, and ignored as a sysbench user would (PostgreSQL's
		// 23505 is ignorable by default, as in sysbench).
		{"oltp_read_write", []string{"--skip-trx", "--db-ps-mode=disable", "--mysql-ignore-errors=1062,1213,1020,1205"}},
	} {
		a := append([]string{"--tables=2", size, "--threads=2", "--events=100", "--time=0"}, w.extra...)
		code, stdout, stderr := bench(t, args(append(a, w.name, "run")...)...)
		if code != 0 || !strings.Contains(stdout, "total number of events:              100\n") {
			t.Fatalf("%s %v: %d %s\n%s", w.name, w.extra, code, stderr, stdout)
		}
	}

	if code, stdout, stderr := bench(t, args("--tables=2", "oltp_read_write", "cleanup")...); code != 0 || !strings.Contains(stdout, "Dropping table 'sbtest2'...") {
		t.Fatalf("cleanup: %d %s %s", code, stdout, stderr)
	}

	// bulk_insert has tables of its own, one per thread.
	for _, cmd := range []string{"prepare", "run", "cleanup"} {
		code, stdout, stderr := bench(t, args("--threads=2", "--events=5000", "--time=0", "bulk_insert", cmd)...)
		if code != 0 {
			t.Fatalf("bulk_insert %s: %d %s", cmd, code, stderr)
		}
		if cmd == "run" && !strings.Contains(stdout, "total number of events:              5000\n") {
			t.Fatalf("bulk_insert run:\n%s", stdout)
		}
	}
}

func TestIntegrationMySQLReconnect(t *testing.T) {
	conn := mysqlArgs(t)
	dsn := strings.TrimPrefix(conn[0], "--dsn=")
	args := append(append([]string{}, conn...), "--table-size=1000", "--tables=1")
	if code, _, stderr := bench(t, append(args, "oltp_read_write", "cleanup")...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := bench(t, append(args, "oltp_read_write", "prepare")...); code != 0 {
		t.Fatal(stderr)
	}
	defer bench(t, append(args, "oltp_read_write", "cleanup")...)

	o, _, _, err := ParseArgs(append(args, "--threads=2", "--time=2", "--mysql-ignore-errors=1213,1205,1927,2013", "oltp_point_select", "run"))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res Result
		err error
	}
	// The server's statement count before the run: the kill waits for
	// the run's statements, past its set-up queries (which the
	// reconnect does not cover).
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	questions := func() int64 {
		var name string
		var n int64
		if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	base := questions()
	done := make(chan result, 1)
	go func() {
		res, err := Run(context.Background(), o, &strings.Builder{})
		done <- result{res, err}
	}()

	// Kill the benchmark's connections once, mid-run: both threads
	// connected and a few hundred of the run's statements done.
	var ids []int64
	testenv.Eventually(t, 10*time.Second, "the benchmark's connections running in the process list", func() bool {
		if questions()-base < 300 {
			return false
		}
		rows, err := db.Query("SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()", testDB)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			ids = append(ids, id)
		}
		rows.Close()
		return len(ids) >= 2
	})
	for _, id := range ids {
		db.Exec("KILL ?", id)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("run failed after the kill: %v", r.err)
	}
	if len(ids) == 0 || r.res.Reconnects == 0 {
		t.Fatalf("killed %d connections, %d reconnects", len(ids), r.res.Reconnects)
	}
}

package viewsql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

func fixture() map[string]views.Table {
	return map[string]views.Table{
		"statements": {
			Columns: []string{"id", "user", "bytes_down", "bandwidth_mbps", "rows"},
			Types:   []views.Type{views.Integer, views.Text, views.Integer, views.Real, views.Integer},
			Rows: [][]string{
				{"1", "alice", "900", "1.50", "3"},
				{"2", "bob", "20", "0.25", ""},
				{"3", "alice", "100", "10.00", "1"},
				{"4", "carol", "5", "0.00", "0"},
			},
		},
		"users": {
			Columns: []string{"user", "resource_pool"},
			Rows:    [][]string{{"alice", "rp1"}, {"bob", ""}},
		},
	}
}

func query(t *testing.T, q string) (*Result, error) {
	t.Helper()
	return Query(context.Background(), fixture(), q, Options{})
}

func cells(r *Result) [][]string {
	out := [][]string{}
	for _, row := range r.Rows {
		var s []string
		for _, v := range row {
			if !v.Valid {
				s = append(s, "NULL")
				continue
			}
			s = append(s, v.String)
		}
		out = append(out, s)
	}
	return out
}

func TestQuery(t *testing.T) {
	tests := []struct {
		sql   string
		cols  []string
		types []views.Type
		rows  [][]string
	}{
		{`SELECT user, sum(bytes_down) FROM statements GROUP BY 1 ORDER BY 2 DESC LIMIT 2`,
			[]string{"user", "sum(bytes_down)"}, []views.Type{views.Text, views.Integer},
			[][]string{{"alice", "1000"}, {"bob", "20"}}},
		// Numbers sort as numbers: 100 < 900, not as text.
		{`SELECT "user", bytes_down FROM statements WHERE bytes_down >= 100 ORDER BY bytes_down`,
			[]string{"user", "bytes_down"}, []views.Type{views.Text, views.Integer},
			[][]string{{"alice", "100"}, {"alice", "900"}}},
		{`SELECT id, bandwidth_mbps, rows FROM statements WHERE id = 2`,
			[]string{"id", "bandwidth_mbps", "rows"}, []views.Type{views.Integer, views.Real, views.Integer},
			[][]string{{"2", "0.25", "NULL"}}},
		{`SELECT avg(bandwidth_mbps) AS a, max(bandwidth_mbps) FROM statements`,
			[]string{"a", "max(bandwidth_mbps)"}, []views.Type{views.Real, views.Real},
			[][]string{{"2.9375", "10"}}},
		{`SELECT s.id, u.resource_pool FROM statements s JOIN users u ON u.user = s.user WHERE u.resource_pool <> '' ORDER BY s.id`,
			[]string{"id", "resource_pool"}, []views.Type{views.Integer, views.Text},
			[][]string{{"1", "rp1"}, {"3", "rp1"}}},
		{`SELECT count(*) FROM statements WHERE user IN (SELECT user FROM users)`,
			[]string{"count(*)"}, []views.Type{views.Integer}, [][]string{{"3"}}},
		{`SELECT 1 + 1, 'x', 1.5 * 2, NULL`,
			[]string{"1 + 1", "'x'", "1.5 * 2", "NULL"}, []views.Type{views.Integer, views.Text, views.Real, views.Text},
			[][]string{{"2", "x", "3", "NULL"}}},
		{`SELECT id FROM statements WHERE 0`, []string{"id"}, []views.Type{views.Integer}, [][]string{}},
	}
	for _, tt := range tests {
		r, err := query(t, tt.sql)
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		if !reflect.DeepEqual(r.Columns, tt.cols) || !reflect.DeepEqual(r.Types, tt.types) || !reflect.DeepEqual(cells(r), tt.rows) {
			t.Errorf("%s:\n got %q %v %q\nwant %q %v %q", tt.sql, r.Columns, r.Types, cells(r), tt.cols, tt.types, tt.rows)
		}
	}
}

func code(err error) string {
	var e *ddl.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return fmt.Sprintf("%T", err)
}

// TestQueryRefused: the query only reads; everything else is refused
// with a SQLSTATE.
func TestQueryRefused(t *testing.T) {
	tests := []struct{ sql, code string }{
		{"SELEC 1", sqlstate.SyntaxError},
		{"SELECT * FROM nowhere", sqlstate.UndefinedTable},
		{"SELECT * FROM pg_catalog.pg_class", sqlstate.FeatureNotSupported},
		{"SELECT * FROM pg_class", sqlstate.FeatureNotSupported},
		{"SELECT nope FROM statements", sqlstate.UndefinedColumn},
		{`SELECT "nope" FROM statements`, sqlstate.UndefinedColumn}, // not a string, as SQLite's DQS would make it
		{"SELECT nosuch(1)", "42883"},
		{"CREATE TABLE x (a INTEGER)", "42501"},
		{"INSERT INTO users VALUES ('eve', '')", "42501"},
		{"DELETE FROM users", "42501"},
		{"DROP TABLE users", "42501"},
		{"ATTACH ':memory:' AS other", "42501"},
		{"PRAGMA query_only = OFF", "42501"},
		{"SELECT * FROM pragma_table_info('users')", "42501"},
		{"SELECT load_extension('x')", "42501"},
		{"BEGIN", "42501"},
	}
	for _, tt := range tests {
		_, err := query(t, tt.sql)
		if c := code(err); c != tt.code {
			t.Errorf("%s: %v (%s), want SQLSTATE %s", tt.sql, err, c, tt.code)
		}
	}
}

func TestQueryLimits(t *testing.T) {
	tabs := fixture()
	if _, err := Query(context.Background(), tabs, "SELECT * FROM statements", Options{MaxRows: 3}); code(err) != sqlstate.ProgramLimitExceeded {
		t.Errorf("4 rows over MaxRows 3: %v, want %s", err, sqlstate.ProgramLimitExceeded)
	}
	if r, err := Query(context.Background(), tabs, "SELECT * FROM statements", Options{MaxRows: 4}); err != nil || len(r.Rows) != 4 {
		t.Errorf("4 rows under MaxRows 4: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Query(ctx, tabs, "SELECT 1", Options{}); err == nil {
		t.Error("a query on an ended context ran")
	}
	// A query that runs forever ends with its context.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Query(ctx, tabs, "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c", Options{})
		done <- err
	}()
	cancel()
	if err := <-done; code(err) != "57014" {
		t.Errorf("endless query after cancel: %v, want 57014", err)
	}
}

// BenchmarkQuery1000Sessions measures a query over a snapshot of 1,000
// sessions: creating the database, loading the table, running the query.
func BenchmarkQuery1000Sessions(b *testing.B) {
	t := views.Table{
		Columns: []string{"id", "route", "user", "database", "pool", "client", "bytes_up", "bytes_down", "unsent_bytes", "statements", "started", "penalised", "kind"},
		Types:   []views.Type{views.Integer, views.Text, views.Text, views.Text, views.Text, views.Text, views.Integer, views.Integer, views.Integer, views.Integer, views.Text, views.Text, views.Text},
	}
	for i := range 1000 {
		n := strconv.Itoa(i)
		t.Rows = append(t.Rows, []string{n, "pg", "user" + strconv.Itoa(i%10), "db", "rp1", "127.0.0.1:" + n, n + "000", n + "0000", "0", "7", "2026-01-01 00:00:00.000Z", "no", "client"})
	}
	for _, bb := range []struct {
		name string
		tabs map[string]views.Table
		sql  string
		rows int
	}{
		{"no-view", nil, "SELECT 1", 1},
		{"sessions", map[string]views.Table{"sessions": t}, "SELECT user, sum(bytes_down) FROM sessions GROUP BY 1 ORDER BY 2 DESC LIMIT 5", 5},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := Query(context.Background(), bb.tabs, bb.sql, Options{})
				if err != nil || len(r.Rows) != bb.rows {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQueryMemoryBounds: a value longer than MaxValueBytes or a result
// larger than MaxResultBytes fails at once with 54000, without the
// process ever holding it: the high-water mark of its resident memory
// grows by far less than the value would take.
func TestQueryMemoryBounds(t *testing.T) {
	tabs := fixture()
	// Reset the resident high-water mark (VmHWM) to what is resident now.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the high-water mark: %v", err)
	}
	before := hwm(t)
	for _, q := range []string{
		"SELECT length(randomblob(1000000000))",
		"SELECT randomblob(1000000000)",
		"SELECT printf('%.*c', 100000000, 'x') FROM (SELECT 1 UNION ALL SELECT 2)",
		"SELECT length(zeroblob(500000000))",
		"SELECT group_concat(printf('%.*c', 1000000, 'x')) FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r LIMIT 100) SELECT n FROM r)",
	} {
		if _, err := Query(context.Background(), tabs, q, Options{}); code(err) != sqlstate.ProgramLimitExceeded {
			t.Errorf("%s: %v, want %s", q, err, sqlstate.ProgramLimitExceeded)
		}
	}
	if grew := hwm(t) - before; grew > 200<<20 {
		t.Errorf("resident memory peaked %d MiB above where it was", grew>>20)
	}
	// Ten values of 1,000 bytes fit 20,000 bytes, not 5,000.
	q := "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r LIMIT 10) SELECT printf('%.*c', 1000, 'x') FROM r"
	if _, err := Query(context.Background(), tabs, q, Options{MaxResultBytes: 5000}); code(err) != sqlstate.ProgramLimitExceeded {
		t.Errorf("10 kB over MaxResultBytes 5000: %v, want %s", err, sqlstate.ProgramLimitExceeded)
	}
	if r, err := Query(context.Background(), tabs, q, Options{MaxResultBytes: 20000}); err != nil || len(r.Rows) != 10 {
		t.Errorf("10 kB under MaxResultBytes 20000: %v", err)
	}
	if _, err := Query(context.Background(), tabs, "SELECT length(randomblob(2000))", Options{MaxValueBytes: 1000}); code(err) != sqlstate.ProgramLimitExceeded {
		t.Errorf("2000 bytes over MaxValueBytes 1000: %v, want %s", err, sqlstate.ProgramLimitExceeded)
	}
}

// hwm returns the process's resident high-water mark (VmHWM), in bytes.
func hwm(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

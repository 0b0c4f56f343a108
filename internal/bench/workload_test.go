package bench

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	sqlPoint    = "SELECT c FROM sbtest1 WHERE id=?"
	sqlSimple   = "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?"
	sqlSum      = "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?"
	sqlOrder    = "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"
	sqlDistinct = "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"
	sqlIdxUpd   = "UPDATE sbtest1 SET k=k+1 WHERE id=?"
	sqlNonIdx   = "UPDATE sbtest1 SET c=? WHERE id=?"
	sqlDelete   = "DELETE FROM sbtest1 WHERE id=?"
	sqlInsert   = "INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)"
)

func rep(s string, n int) []string { return slices.Repeat([]string{s}, n) }

func seq(parts ...[]string) []string { return slices.Concat(parts...) }

var one = func(s ...string) []string { return s }

func TestWorkloadStatementSequences(t *testing.T) {
	tests := []struct {
		name     string
		workload string
		args     []string
		want     []string
		r, w, o  uint64 // per transaction
	}{
		{
			name: "read_write", workload: "oltp_read_write",
			want: seq(one("BEGIN"), rep(sqlPoint, 10), one(sqlSimple, sqlSum, sqlOrder, sqlDistinct, sqlIdxUpd, sqlNonIdx, sqlDelete, sqlInsert, "COMMIT")),
			r:    14, w: 4, o: 2,
		},
		{
			name: "read_write skip_trx no ranges", workload: "oltp_read_write", args: []string{"--skip-trx", "--range-selects=off"},
			want: seq(rep(sqlPoint, 10), one(sqlIdxUpd, sqlNonIdx, sqlDelete, sqlInsert)),
			r:    10, w: 4, o: 0,
		},
		{
			name: "read_write counts", workload: "oltp_read_write",
			args: []string{"--point-selects=2", "--simple-ranges=2", "--sum-ranges=0", "--order-ranges=1", "--distinct-ranges=0", "--index-updates=2", "--non-index-updates=0", "--delete-inserts=2"},
			want: seq(one("BEGIN"), rep(sqlPoint, 2), one(sqlSimple, sqlSimple, sqlOrder, sqlIdxUpd, sqlIdxUpd, sqlDelete, sqlInsert, sqlDelete, sqlInsert, "COMMIT")),
			r:    5, w: 6, o: 2,
		},
		{
			name: "read_only", workload: "oltp_read_only",
			want: seq(one("BEGIN"), rep(sqlPoint, 10), one(sqlSimple, sqlSum, sqlOrder, sqlDistinct, "COMMIT")),
			r:    14, w: 0, o: 2,
		},
		{
			name: "write_only", workload: "oltp_write_only",
			want: one("BEGIN", sqlIdxUpd, sqlNonIdx, sqlDelete, sqlInsert, "COMMIT"),
			r:    0, w: 4, o: 2,
		},
		{name: "point_select", workload: "oltp_point_select", args: []string{"--point-selects=10"}, want: one(sqlPoint), r: 1},
		{name: "update_index", workload: "oltp_update_index", want: one(sqlIdxUpd), w: 1},
		{name: "update_non_index", workload: "oltp_update_non_index", want: one(sqlNonIdx), w: 1},
		{name: "delete", workload: "oltp_delete", want: one(sqlDelete), w: 1},
		{name: "insert mysql", workload: "oltp_insert", want: one(sqlInsert), w: 1},
		{name: "insert pgsql auto_inc", workload: "oltp_insert", args: []string{"--db-driver=pgsql"}, want: one("INSERT INTO sbtest1 (k, c, pad) VALUES (?, ?, ?)"), w: 1},
		{
			name: "random_points", workload: "select_random_points", args: []string{"--random-points=3"},
			want: one("\n        SELECT id, k, c, pad\n          FROM sbtest1\n          WHERE k IN (?, ?, ?)\n        "), r: 1,
		},
		{
			name: "random_ranges", workload: "select_random_ranges", args: []string{"--number-of-ranges=2"},
			want: one("\n        SELECT count(k)\n          FROM sbtest1\n          WHERE k BETWEEN ? AND ? OR k BETWEEN ? AND ?"), r: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, d := runFake(t, tt.workload, tt.args...)
			got := d.conn(0).sqls()
			if !slices.Equal(got, tt.want) {
				t.Fatalf("statements:\n got %q\nwant %q", got, tt.want)
			}
			if res.Transactions != 1 || res.Reads != tt.r || res.Writes != tt.w || res.Other != tt.o {
				t.Fatalf("counts r/w/o/txn = %d/%d/%d/%d, want %d/%d/%d/1", res.Reads, res.Writes, res.Other, res.Transactions, tt.r, tt.w, tt.o)
			}
			if res.RoundTrips != uint64(len(tt.want)) || res.RoundTripsPerTransaction() != float64(len(tt.want)) {
				t.Fatalf("round trips = %d, want %d", res.RoundTrips, len(tt.want))
			}
		})
	}
}

func TestReadWriteIsEighteenQueriesPlusTwo(t *testing.T) {
	res, _ := runFake(t, "oltp_read_write", "--events=50")
	if res.Transactions != 50 || res.Reads != 14*50 || res.Writes != 4*50 || res.Other != 2*50 || res.Queries() != 20*50 {
		t.Fatalf("got r/w/o %d/%d/%d over %d transactions", res.Reads, res.Writes, res.Other, res.Transactions)
	}
	if res.RoundTripsPerTransaction() != 20 {
		t.Fatalf("round trips per transaction = %v, want 20", res.RoundTripsPerTransaction())
	}
}

func TestWorkloadArguments(t *testing.T) {
	_, d := runFake(t, "oltp_read_write", "--events=200", "--table-size=1000", "--range-size=50", "--tables=3")
	digits := regexp.MustCompile(`^(\d{11}-){9}\d{11}$`)
	padRE := regexp.MustCompile(`^(\d{11}-){4}\d{11}$`)
	tablesSeen := map[string]bool{}
	calls := d.conn(0).workCalls()
	for i, c := range calls {
		if m := regexp.MustCompile(`sbtest(\d+)`).FindStringSubmatch(c.SQL); m != nil {
			tablesSeen[m[1]] = true
		}
		switch {
		case strings.Contains(c.SQL, "BETWEEN"):
			if lo, hi := c.Args[0].Int, c.Args[1].Int; hi != lo+49 || lo < 1 || lo > 1000 {
				t.Fatalf("range args %d..%d", lo, hi)
			}
		case strings.HasPrefix(c.SQL, "UPDATE") && strings.Contains(c.SQL, "SET c="):
			if !digits.Match(c.Args[0].Str) || len(c.Args[0].Str) != 119 {
				t.Fatalf("c value %q", c.Args[0].Str)
			}
		case strings.HasPrefix(c.SQL, "INSERT"):
			del := calls[i-1]
			if !strings.HasPrefix(del.SQL, "DELETE") || del.Args[0].Int != c.Args[0].Int {
				t.Fatalf("insert id %d does not follow a delete of it (%v)", c.Args[0].Int, del)
			}
			if !digits.Match(c.Args[2].Str) || !padRE.Match(c.Args[3].Str) {
				t.Fatalf("insert values %q %q", c.Args[2].Str, c.Args[3].Str)
			}
		case strings.Contains(c.SQL, "WHERE id=?"):
			if id := c.Args[len(c.Args)-1].Int; id < 1 || id > 1000 {
				t.Fatalf("id %d out of 1..1000", id)
			}
		}
	}
	if len(tablesSeen) != 3 {
		t.Fatalf("tables used: %v, want all 3", tablesSeen)
	}
}

func TestPreparedStatementsPerWorkload(t *testing.T) {
	tests := []struct {
		workload string
		args     []string
		want     int // statements prepared per connection
	}{
		{"oltp_read_write", nil, 2 + 9},
		{"oltp_read_write", []string{"--tables=2"}, 2 + 2*9},
		{"oltp_read_write", []string{"--skip-trx", "--range-selects=off"}, 5},
		{"oltp_read_only", nil, 2 + 5},
		{"oltp_write_only", nil, 2 + 4},
		{"oltp_point_select", nil, 1},
		{"oltp_insert", nil, 0},
		{"select_random_points", nil, 1},
		{"bulk_insert", nil, 0},
	}
	for _, tt := range tests {
		_, d := runFake(t, tt.workload, tt.args...)
		c := d.conn(0)
		if len(c.prepared) != tt.want {
			t.Errorf("%s %v: prepared %d statements, want %d", tt.workload, tt.args, len(c.prepared), tt.want)
		}
		names := map[string]bool{}
		for _, st := range c.prepared {
			if names[st.Name] {
				t.Errorf("%s: statement name %s repeated", tt.workload, st.Name)
			}
			names[st.Name] = true
		}
	}
}

func TestInsertIDs(t *testing.T) {
	// Without --auto-inc, oltp_insert draws unique client-side ids over
	// the whole int32 range; with it MySQL gets id 0 (auto-assign).
	_, d := runFake(t, "oltp_insert", "--events=500", "--auto-inc=off")
	seen := map[int64]bool{}
	for _, c := range d.conn(0).workCalls() {
		id := c.Args[0].Int
		if seen[id] || id < -1<<31 || id >= 1<<31 {
			t.Fatalf("id %d repeated or out of int32", id)
		}
		seen[id] = true
		if !strings.HasPrefix(c.Text, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (") || !strings.HasSuffix(c.Text, "')") {
			t.Fatalf("text %q", c.Text)
		}
	}
	_, d = runFake(t, "oltp_insert")
	if id := d.conn(0).workCalls()[0].Args[0].Int; id != 0 {
		t.Fatalf("auto-inc id = %d, want 0", id)
	}
}

func TestRandomPointsStayInWorkerSlice(t *testing.T) {
	_, d := runFake(t, "select_random_points", "--events=200", "--threads=4", "--table-size=1000", "--rand-type=uniform")
	for n := 0; n < 4; n++ {
		lo, hi := int64(250*n), int64(250*n+250)
		for _, c := range d.conn(n).workCalls() {
			for _, a := range c.Args {
				if a.Int < lo || a.Int > hi {
					t.Fatalf("worker %d drew k=%d outside %d..%d", n, a.Int, lo, hi)
				}
			}
		}
	}
}

func TestBulkInsert(t *testing.T) {
	res, d := runFake(t, "bulk_insert", "--events=3", "--threads=2")
	// Three events between two workers; each worker sends its rows at the
	// end, into its own table, numbered from 1.
	rows, stmts := 0, 0
	for n := 0; n < 2; n++ {
		for _, c := range d.conn(n).workCalls() {
			stmts++
			head := fmt.Sprintf("INSERT INTO sbtest%d VALUES(1,1)", n+1)
			if !strings.HasPrefix(c.SQL, head) {
				t.Fatalf("worker %d sent %q", n, c.SQL)
			}
			rows += strings.Count(c.SQL, "(")
		}
	}
	if rows != 3 || res.Transactions != 3 || res.Writes != uint64(stmts) {
		t.Fatalf("rows %d transactions %d writes %d statements %d", rows, res.Transactions, res.Writes, stmts)
	}
}

func TestBulkInsertSplitsAtPacketSize(t *testing.T) {
	w := &worker{id: 0, o: &Options{}}
	c := &fakeConn{}
	w.conn = c
	ctx := context.Background()
	for i := 0; i < 60000; i++ {
		if err := w.bulkInsert(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.bulkFlush(ctx); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for i, cl := range c.calls {
		if len(cl.SQL) > bulkPacket {
			t.Fatalf("statement %d is %d bytes", i, len(cl.SQL))
		}
		if !strings.HasPrefix(cl.SQL, "INSERT INTO sbtest1 VALUES(") {
			t.Fatalf("statement %d starts %q", i, cl.SQL[:40])
		}
		rows += strings.Count(cl.SQL, "(")
	}
	if len(c.calls) < 2 || rows != 60000 {
		t.Fatalf("%d statements, %d rows", len(c.calls), rows)
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		sql  string
		args []Arg
		want string
	}{
		{"SELECT c FROM t WHERE id=?", []Arg{IntArg(42)}, "SELECT c FROM t WHERE id=42"},
		{"UPDATE t SET c=? WHERE id=?", []Arg{StrArg([]byte("a-1")), IntArg(-3)}, "UPDATE t SET c='a-1' WHERE id=-3"},
		{"x=?", []Arg{StrArg([]byte("it's"))}, "x='it''s'"},
		{"x=? AND y=?", []Arg{IntArg(1)}, "x=1 AND y=?"},
		{"BEGIN", nil, "BEGIN"},
		{"x=?", []Arg{StrArg(nil)}, "x=''"},
	}
	for _, tt := range tests {
		if got := string(render(nil, tt.sql, tt.args)); got != tt.want {
			t.Errorf("render(%q) = %q, want %q", tt.sql, got, tt.want)
		}
	}
	if got := dollarParams("INSERT INTO t (a, b) VALUES (?, ?)"); got != "INSERT INTO t (a, b) VALUES ($1, $2)" {
		t.Errorf("dollarParams = %q", got)
	}
}

func BenchmarkReadWriteEvent(b *testing.B) {
	o := testOptions("oltp_read_write")
	set := buildStatements(mustWorkload("oltp_read_write"), &o)
	w := &worker{o: &o, set: set, conn: nopConn{}, rnd: newRowGen(1, &o).rnd}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := w.readWrite(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	args := []Arg{StrArg([]byte(cTemplate)), IntArg(123456)}
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = render(buf[:0], "UPDATE sbtest1 SET c=? WHERE id=?", args)
	}
}

// nopConn answers every statement at once.
type nopConn struct{}

func (nopConn) Prepare(context.Context, []*Statement) error { return nil }
func (nopConn) Exec(_ context.Context, st *Statement, _ []Arg) (Outcome, error) {
	if st.Reads {
		return Outcome{Counter: CountRead, RoundTrips: 1}, nil
	}
	return Outcome{Counter: CountWrite, RoundTrips: 1}, nil
}
func (nopConn) Close() error { return nil }

func mustWorkload(name string) *workload {
	wl, ok := lookupWorkload(name)
	if !ok {
		panic(name)
	}
	return wl
}

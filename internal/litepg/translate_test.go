package litepg

import (
	"fmt"
	"strings"
	"testing"
)

var testEnv = env{pid: 42, user: "lab", database: "labdb"}

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // SQLite text, or "error: CODE"
		tag  string
		kind stmtKind
	}{
		{sbCreate,
			`CREATE TABLE "sbtest1"( "id" INTEGER PRIMARY KEY AUTOINCREMENT, "k" INTEGER DEFAULT '0' NOT NULL, "c" CHAR(120) DEFAULT '' NOT NULL, "pad" CHAR(60) DEFAULT '' NOT NULL)`,
			"CREATE TABLE", skExec},
		{"CREATE TABLE t (id bigserial primary key, v text)", `CREATE TABLE "t"( "id" INTEGER PRIMARY KEY AUTOINCREMENT, "v" TEXT)`, "CREATE TABLE", skExec},
		{"CREATE TABLE t (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY)", `CREATE TABLE "t"( "id" INTEGER PRIMARY KEY AUTOINCREMENT)`, "CREATE TABLE", skExec},
		{"CREATE UNLOGGED TABLE IF NOT EXISTS public.t (a timestamp with time zone DEFAULT now(), b double precision, c varchar(3))",
			`CREATE TABLE IF NOT EXISTS "t"( "a" TIMESTAMPTZ DEFAULT (now()), "b" DOUBLE PRECISION, "c" VARCHAR(3))`, "CREATE TABLE", skExec},
		{"CREATE TABLE t (id serial, v text)", `CREATE TABLE "t"( "id" INTEGER PRIMARY KEY AUTOINCREMENT, "v" TEXT)`, "CREATE TABLE", skExec},
		{"CREATE TABLE t (id serial, v text PRIMARY KEY)", "error: 0A000", "", 0},
		{"CREATE TABLE t (id serial, v text, PRIMARY KEY (v, id))", "error: 0A000", "", 0},
		{"CREATE TABLE t (a int[])", "error: 0A000", "", 0},
		{"CREATE TABLE t (a int) WITH (fillfactor=70)", "error: 0A000", "", 0},
		{"CREATE INDEX k_1 ON sbtest1(k)", `CREATE INDEX "k_1" ON "sbtest1"(k)`, "CREATE INDEX", skExec},
		{"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ON t USING btree (a, b)", `CREATE UNIQUE INDEX IF NOT EXISTS "t_a_idx" ON "t" (a, b)`, "CREATE INDEX", skExec},
		{"DROP TABLE IF EXISTS sbtest1", `DROP TABLE IF EXISTS "sbtest1"`, "DROP TABLE", skExec},
		{"DROP TABLE a, b CASCADE", `DROP TABLE "a"; DROP TABLE "b"`, "DROP TABLE", skExec},
		{"TRUNCATE TABLE a, b RESTART IDENTITY", `DELETE FROM "a"; DELETE FROM "b"`, "TRUNCATE TABLE", skExec},
		{"SELECT c FROM sbtest1 WHERE id=$1", "SELECT c FROM sbtest1 WHERE id = ?1", "SELECT", skQuery},
		{"SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2", "SELECT c FROM sbtest1 WHERE id BETWEEN ?1 AND ?2", "SELECT", skQuery},
		{"UPDATE sbtest1 SET k=k+1 WHERE id=$1", "UPDATE sbtest1 SET k = k + 1 WHERE id = ?1", "UPDATE", skExec},
		{"INSERT INTO t VALUES (1) RETURNING id", "INSERT INTO t VALUES (1) RETURNING id", "INSERT", skQuery},
		{"select x::int, 'a'::text, (1+2)::bigint, count(*)::int8 from t", "select CAST(x AS INTEGER), CAST('a' AS TEXT), CAST((1 + 2) AS INTEGER), CAST(count(*) AS INTEGER) from t", "SELECT", skQuery},
		{"select 't'::boolean, CAST('\\x01' AS bytea), '2024-01-01'::date", "select litepg_bool('t'), litepg_bytea('\\x01'), ('2024-01-01')", "SELECT", skQuery},
		{"select t.a::varchar(10)::int from t", "select CAST(CAST(t.a AS TEXT) AS INTEGER) from t", "SELECT", skQuery},
		{"select 1::regclass", "error: 0A000", "", 0},
		{"select E'a\\'b\\n', $tag$it's$tag$, $$x$$", "select 'a''b\n', 'it''s', 'x'", "SELECT", skQuery},
		{"select a from t where b ilike 'x%' and c is distinct from d and e is not distinct from f",
			"select a from t where b LIKE 'x%' and c IS NOT d and e IS f", "SELECT", skQuery},
		{"select pg_sleep(1.5)", "select litepg_sleep( 42,1.5)", "SELECT", skQuery},
		{"select current_user, current_database(), pg_backend_pid(), current_schema", "select 'lab', 'labdb', 42, 'public'", "SELECT", skQuery},
		{"select greatest(1, 2), least(3, 4) limit all", "select max(1, 2), min(3, 4) limit -1", "SELECT", skQuery},
		{"select * from t for update", "select * from t", "SELECT", skQuery},
		{"table t", `SELECT * FROM "t"`, "SELECT", skQuery},
		{"select * from pg_catalog.pg_class", "error: 0A000", "", 0},
		{"select pg_catalog.now()", "select now()", "SELECT", skQuery},
		{"select 1 into t2", "error: 0A000", "", 0},
		{"select a ~ 'x' from t", "error: 0A000", "", 0},
		{"SELECT repeat('x', 3) FROM generate_series(1, 2)",
			`SELECT repeat('x', 3) FROM (WITH RECURSIVE litepg_series(v) AS (SELECT CAST((1) AS NUMERIC) WHERE CAST((1) AS NUMERIC) <= CAST((2) AS NUMERIC) UNION ALL SELECT v + 1 FROM litepg_series WHERE v + 1 <= CAST((2) AS NUMERIC)) SELECT v AS "generate_series" FROM litepg_series) AS "generate_series"`,
			"SELECT", skQuery},
		{"select * from generate_series(1, 2, 0, 1)", "error: 0A000", "", 0},
		{"BEGIN ISOLATION LEVEL REPEATABLE READ, READ WRITE", "", "BEGIN", skBegin},
		{"start transaction read only", "", "START TRANSACTION", skBegin},
		{"COMMIT AND CHAIN", "error: 0A000", "", 0},
		{"END", "", "COMMIT", skCommit},
		{"ABORT WORK", "", "ROLLBACK", skRollback},
		{"ROLLBACK TO SAVEPOINT s1", `ROLLBACK TO "s1"`, "ROLLBACK", skExec},
		{"RELEASE s1", `RELEASE "s1"`, "RELEASE", skExec},
		{"SET search_path TO public, \"$user\"", "", "SET", skSet},
		{"SET LOCAL statement_timeout = 0", "", "SET", skSet},
		{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "", "SET", skNoop},
		{"SET x", "error: 42601", "", 0},
		{"SHOW ALL", "", "SHOW", skShow},
		{"SHOW TRANSACTION ISOLATION LEVEL", "", "SHOW", skShow},
		{"DEALLOCATE PREPARE ALL", "", "DEALLOCATE ALL", skDeallocate},
		{"DISCARD ALL", "", "DISCARD ALL", skDiscard},
		{"EXPLAIN ANALYZE SELECT 1", "EXPLAIN QUERY PLAN SELECT 1", "EXPLAIN", skExplain},
		{"COPY t TO STDOUT", "", "COPY", skCopy},
		{"copy \"sbtest1\" ( \"id\", \"k\" ) from stdin binary;", "", "COPY", skCopy},
		{"COPY t FROM STDIN WITH (FORMAT parquet)", "error: 42601", "", 0},
		{"COPY t FROM STDIN (FORCE_QUOTE *)", "error: 0A000", "", 0},
		{"LISTEN x", "error: 0A000", "", 0},
		{"PREPARE p AS SELECT 1", "error: 0A000", "", 0},
		{"SELEC 1", "error: 42601", "", 0},
		{"select 'open", "error: 42601", "", 0},
		{"select /* open", "error: 42601", "", 0},
		{"select $0", "error: 42P02", "", 0},
		{"select U&'x'", "error: 0A000", "", 0},
		{"-- only a comment", "", "", skEmpty},
	} {
		sts, err := translate(tc.in, testEnv)
		got := ""
		switch {
		case err != nil:
			got = "error: " + toPGError(err).code
		case len(sts) != 1:
			got = fmt.Sprintf("%d statements", len(sts))
		default:
			got = sts[0].sql
			if sts[0].tag != tc.tag || sts[0].kind != tc.kind {
				t.Errorf("%s: tag %q kind %d, want %q %d", tc.in, sts[0].tag, sts[0].kind, tc.tag, tc.kind)
			}
		}
		if got != tc.want {
			t.Errorf("%s\n got: %s\nwant: %s", tc.in, got, tc.want)
		}
	}
}

func TestTranslateSplitsStatements(t *testing.T) {
	sts, err := translate("BEGIN; SELECT ';' ; ;COMMIT", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, st := range sts {
		kinds = append(kinds, st.tag)
	}
	if strings.Join(kinds, ",") != "BEGIN,SELECT,COMMIT" {
		t.Fatalf("statements: %v", kinds)
	}
	if sts[1].sql != "SELECT ';'" {
		t.Fatalf("string with a semicolon: %q", sts[1].sql)
	}
}

func TestCopySpecs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"COPY t FROM STDIN", "from=true table=t cols=[] format=0 delim=9 null=\\N header=false"},
		{"COPY t (a, \"B\") FROM STDIN WITH CSV HEADER DELIMITER ';' NULL 'x'", "from=true table=t cols=[a B] format=1 delim=59 null=x header=true"},
		{"COPY BINARY t FROM STDIN", "from=true table=t cols=[] format=2 delim=0 null= header=false"},
		{"COPY (SELECT 1) TO STDOUT (FORMAT csv)", "from=false table= cols=[] format=1 delim=44 null= header=false"},
	} {
		sts, err := translate(tc.in, testEnv)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		c := sts[0].copy
		got := fmt.Sprintf("from=%v table=%s cols=%v format=%d delim=%d null=%s header=%v", c.from, c.table, c.columns, c.format, c.delim, c.null, c.header)
		if got != tc.want {
			t.Errorf("%s\n got: %s\nwant: %s", tc.in, got, tc.want)
		}
	}
}

func TestHints(t *testing.T) {
	render := func(h typeHint) string {
		switch {
		case h.oid != 0:
			return fmt.Sprint(h.oid)
		case h.ref != nil:
			if h.ref.column == "" {
				return fmt.Sprintf("%s#%d", h.ref.table, h.ref.index)
			}
			return h.ref.table + "." + h.ref.column
		case h.fn != "":
			var args []string
			for _, a := range h.args {
				args = append(args, fmt.Sprint(a.oid))
				if a.ref != nil {
					args[len(args)-1] = "." + a.ref.column
				}
			}
			return h.fn + "(" + strings.Join(args, ",") + ")"
		}
		return "?"
	}
	for _, tc := range []struct {
		in     string
		params string
		cols   string
	}{
		{"SELECT c FROM sbtest1 WHERE id=$1", ".id", "c=.c"},
		{"SELECT c FROM t WHERE $1 = t.id AND k BETWEEN $2 AND $3 AND z IN ($4, $5) LIMIT $6",
			"t.id .k .k .z .z 20", "c=.c"},
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4), ($5, $6, $7, $8)",
			"sbtest1.id sbtest1.k sbtest1.c sbtest1.pad sbtest1.id sbtest1.k sbtest1.c sbtest1.pad", ""},
		{"INSERT INTO t VALUES ($1, $2)", "t#0 t#1", ""},
		{"UPDATE sbtest1 SET c=$1 WHERE id=$2", ".c .id", ""},
		{"SELECT $1::int, repeat($2, $3), x LIKE $4", "23 25 20 25", "int4=23 repeat=25 ?column?=16"},
		{"SELECT sum(k), count(*), avg(k), max(k) AS m, k + 1, k * 1.5, 'a' || k FROM t", "",
			"sum=sum(.k) count=20 avg=701 m=same(.k) ?column?=arith(.k,23) ?column?=arith(.k,701) ?column?=25"},
		{"SELECT i FROM generate_series(1, $1) AS g(i) WHERE i > $2", "20 20", "i=20"},
		{"DELETE FROM t WHERE id = $1 RETURNING id, v", ".id", "id=.id v=.v"},
		{"SELECT *, 1 FROM t", "", ""},
		{"VALUES (1, 'x')", "", "column1=23 column2=25"},
		{"SELECT 1 one, t.v FROM t", "", "one=23 v=t.v"},
	} {
		sts, err := translate(tc.in, testEnv)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		st := sts[0]
		var params, cols []string
		for _, p := range st.params {
			params = append(params, render(p))
		}
		for _, c := range st.cols {
			cols = append(cols, c.name+"="+render(c.hint))
		}
		if got := strings.Join(params, " "); got != tc.params {
			t.Errorf("%s: params %q, want %q", tc.in, got, tc.params)
		}
		if got := strings.Join(cols, " "); got != tc.cols {
			t.Errorf("%s: cols %q, want %q", tc.in, got, tc.cols)
		}
	}
}

// FuzzTranslate checks that translation never panics, and that a
// successful translation's SQLite text lexes again.
func FuzzTranslate(f *testing.F) {
	for _, s := range []string{
		sbCreate,
		"SELECT c FROM sbtest1 WHERE id=$1",
		"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c",
		"UPDATE sbtest1 SET k=k+1 WHERE id=$1",
		"INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4)",
		"COPY (SELECT repeat('b', 7000) FROM generate_series(1, 100000)) TO STDOUT",
		"copy \"sbtest1\" ( \"id\" ) from stdin binary;",
		"SELECT x::int::text, CAST(y AS boolean), E'\\x41\\u00e9', $q$a$q$ FROM public.t g(i)",
		"SELECT * FROM generate_series(1, 10, 2) AS s(n) JOIN t ON t.id = s.n, generate_series(1,2)",
		"BEGIN; SET TIME ZONE 'UTC'; SHOW ALL; COMMIT",
		"CREATE TABLE t (id integer GENERATED BY DEFAULT AS IDENTITY (START 1) PRIMARY KEY, d numeric(10,2) DEFAULT -1)",
		"/* nested /* comment */ */ SELECT 1 -- tail",
		"select a::",
		"select (((((",
		"cast(",
		"SELECT pg_sleep($1)",
		"EXPLAIN (ANALYZE) DELETE FROM t WHERE id IN ($1, $2) RETURNING *",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		sts, err := translate(src, testEnv)
		if err != nil {
			if toPGError(err).code == "" {
				t.Fatalf("error without SQLSTATE: %v", err)
			}
			return
		}
		for _, st := range sts {
			if st.kind == skQuery || st.kind == skExec || st.kind == skExplain {
				if _, err := lex(st.sql); err != nil {
					t.Fatalf("%q translated to %q, which does not lex: %v", src, st.sql, err)
				}
			}
			if len(st.params) != st.nparams {
				t.Fatalf("%q: %d hints for %d parameters", src, len(st.params), st.nparams)
			}
		}
	})
}

func TestLex(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a<=-1", "a|<=|-|1"},
		{"a::int", "a|::|int"},
		{"x @- y", "x|@-|y"},
		{"1.5e3 .5 1..2", "1.5e3|.5|1|.|.2"},
		{"$1 $$a$$ $t$b$t$", "$1|$$a$$|$t$b$t$"},
		{"\"Q\"\"x\" 'a''b' E'c\\'d'", "\"Q\"\"x\"|'a''b'|E'c\\'d'"},
	} {
		toks, err := lex(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		var parts []string
		for _, tk := range toks {
			parts = append(parts, tk.text)
		}
		if got := strings.Join(parts, "|"); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}

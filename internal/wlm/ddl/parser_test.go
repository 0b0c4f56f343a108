package ddl

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// strip zeroes the source position and text of st, in place, so
// statements compare by content.
func strip(st Statement) Statement {
	st.(node).setBase(base{})
	return st
}

func num(text string, pos int) Value  { return Value{Kind: Number, Text: text, Pos: pos} }
func str(text string, pos int) Value  { return Value{Kind: String, Text: text, Pos: pos} }
func word(text string, pos int) Value { return Value{Kind: Word, Text: text, Pos: pos} }

func TestParseStatements(t *testing.T) {
	tests := []struct {
		sql  string
		want Statement
	}{
		// The three reference statements, verbatim.
		{
			"CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty');",
			&Create{Kind: Rule, Name: Name{"bandwidth_rule1", 20}, Options: []Option{
				{"bandwidth", 41, num("128", 51)},
				{"elapsedtime", 56, num("60", 68)},
				{"action", 72, str("penalty", 79)},
			}},
		},
		{
			"CREATE RESOURCE POOL rp1 WITH(EXCEPT_RULE='bandwidth_rule1');",
			&Create{Kind: Pool, Name: Name{"rp1", 22}, Options: []Option{
				{"except_rule", 31, str("bandwidth_rule1", 43)},
			}},
		},
		{
			"CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';",
			&Create{Kind: User, Name: Name{"user1", 13}, Options: []Option{
				{"resource_pool", 19, str("rp1", 33)},
				{"password", 39, str("xxxxxxxx", 48)},
			}},
		},
		{
			"create except rule r WITH (bandwidth = -1, elapsedtime=+5)",
			&Create{Kind: Rule, Name: Name{"r", 20}, Options: []Option{
				{"bandwidth", 28, num("-1", 40)},
				{"elapsedtime", 44, num("5", 56)},
			}},
		},
		{
			`CREATE RESOURCE POOL "Big Pool"`,
			&Create{Kind: Pool, Name: Name{"Big Pool", 22}},
		},
		{
			"CREATE LINK wan WITH (capacity='1Gbit', delay=10ms, jitter = '1ms', distribution=normal, loss=0.1%)",
			&Create{Kind: Link, Name: Name{"wan", 13}, Options: []Option{
				{"capacity", 23, str("1Gbit", 32)},
				{"delay", 41, num("10ms", 47)},
				{"jitter", 53, str("1ms", 62)},
				{"distribution", 69, word("normal", 82)},
				{"loss", 90, num("0.1%", 95)},
			}},
		},
		{
			"CREATE LINK IF NOT EXISTS wan",
			&Create{Kind: Link, IfNotExists: true, Name: Name{"wan", 27}},
		},
		{
			"ALTER LINK default WITH (delay=DEFAULT)",
			&Alter{Kind: Link, Name: Name{"default", 12}, Options: []Option{
				{"delay", 26, Value{Kind: Default, Text: "default", Pos: 32}},
			}},
		},
		{
			"ALTER RESOURCE POOL rp1 WITH (network_priority=LOW, weight=3)",
			&Alter{Kind: Pool, Name: Name{"rp1", 21}, Options: []Option{
				{"network_priority", 31, word("LOW", 48)},
				{"weight", 53, num("3", 60)},
			}},
		},
		{
			"ALTER RESOURCE POOL rp1 WITH (ACTIVE_STATEMENTS=-1, queue_timeout=DEFAULT)",
			&Alter{Kind: Pool, Name: Name{"rp1", 21}, Options: []Option{
				{"active_statements", 31, num("-1", 49)},
				{"queue_timeout", 53, Value{Kind: Default, Text: "default", Pos: 67}},
			}},
		},
		{
			"CREATE EXCEPT RULE q WITH (blocktime=2.5, action=penalty)",
			&Create{Kind: Rule, Name: Name{"q", 20}, Options: []Option{
				{"blocktime", 28, num("2.5", 38)},
				{"action", 43, word("penalty", 50)},
			}},
		},
		{
			"ALTER LINK l WITH (max_active_statements=16)",
			&Alter{Kind: Link, Name: Name{"l", 12}, Options: []Option{{"max_active_statements", 20, num("16", 42)}}},
		},
		{
			"ALTER EXCEPT RULE r WITH (action=abort)",
			&Alter{Kind: Rule, Name: Name{"r", 19}, Options: []Option{{"action", 27, word("abort", 34)}}},
		},
		{
			"alter user User1 resource pool 'rp2'",
			&Alter{Kind: User, Name: Name{"user1", 12}, Options: []Option{{"resource_pool", 18, str("rp2", 32)}}},
		},
		{
			"CREATE USER u WITH ENCRYPTED PASSWORD 'p' RESOURCE POOL rp1",
			&Create{Kind: User, Name: Name{"u", 13}, Options: []Option{
				{"password", 20, str("p", 39)},
				{"resource_pool", 43, word("rp1", 57)},
			}},
		},
		{
			"CREATE USER u IDENTIFIED BY 'p'",
			&Create{Kind: User, Name: Name{"u", 13}, Options: []Option{{"password", 15, str("p", 29)}}},
		},
		{
			"CREATE USER u PASSWORD DISABLE",
			&Create{Kind: User, Name: Name{"u", 13}, Options: []Option{{"password", 15, word("disable", 24)}}},
		},
		{"DROP EXCEPT RULE r", &Drop{Kind: Rule, Names: []Name{{"r", 18}}}},
		{"DROP EXCEPT RULE IF EXISTS r", &Drop{Kind: Rule, Names: []Name{{"r", 28}}, IfExists: true}},
		{"DROP IF EXISTS EXCEPT RULE r", &Drop{Kind: Rule, Names: []Name{{"r", 28}}, IfExists: true}},
		{"DROP RESOURCE POOL a, b CASCADE", &Drop{Kind: Pool, Names: []Name{{"a", 20}, {"b", 23}}, Cascade: true}},
		{"DROP RESOURCE POOL a RESTRICT", &Drop{Kind: Pool, Names: []Name{{"a", 20}}}},
		{"DROP USER user1", &Drop{Kind: User, Names: []Name{{"user1", 11}}}},
		{"DROP LINK IF EXISTS wan", &Drop{Kind: Link, Names: []Name{{"wan", 21}}, IfExists: true}},
		{"SET low_priority_bandwidth = '64MB'", &Set{Name: "low_priority_bandwidth", NamePos: 5, Value: str("64MB", 30)}},
		{"SET network_control TO off", &Set{Name: "network_control", NamePos: 5, Value: word("off", 24)}},
		{"SET SESSION except_check_period TO 2", &Set{Name: "except_check_period", NamePos: 13, Value: num("2", 36)}},
		{"SET x TO DEFAULT", &Set{Name: "x", NamePos: 5, Value: Value{Kind: Default, Text: "default", Pos: 10}}},
		{"SET client_encoding = 'UTF8'", &Set{Name: "client_encoding", NamePos: 5, Value: str("UTF8", 23)}},
		{"SHOW low_priority_bandwidth", &Show{Name: "low_priority_bandwidth", NamePos: 6}},
		{"show SESSIONS", &Show{Name: "sessions", NamePos: 6}},
		{"SHOW ALL", &Show{Name: "all", NamePos: 6}},
		{"SHOW CLUSTER SESSIONS", &Show{Name: "sessions", NamePos: 14, Cluster: true}},
		{"SHOW cluster", &Show{Name: "cluster", NamePos: 6}},
		{"SHOW INSTANCES", &Show{Name: "instances", NamePos: 6}},
		{"RESET network_control", &Reset{Name: "network_control", NamePos: 7}},
		{"RESET ALL", &Reset{Name: "all", NamePos: 7}},
		{
			"SELECT * FROM pg_session_wlmstat",
			&Select{Targets: []Target{{Pos: 8, Star: true}}, From: "pg_session_wlmstat", FromPos: 15, Limit: -1},
		},
		{
			"select sessionid, query AS q from pg_catalog.gs_wlm_session_statistics s limit 10",
			&Select{Targets: []Target{{Pos: 8, Name: "sessionid"}, {Pos: 19, Name: "query", Alias: "q"}},
				Schema: "pg_catalog", From: "gs_wlm_session_statistics", FromPos: 35, Limit: 10},
		},
		{
			"SELECT version()",
			&Select{Targets: []Target{{Pos: 8, Name: "version", Func: true}}, Limit: -1},
		},
		{
			"SELECT 1, 'a' x",
			&Select{Targets: []Target{{Pos: 8, Value: &Value{Kind: Number, Text: "1", Pos: 8}}, {Pos: 11, Value: &Value{Kind: String, Text: "a", Pos: 11}, Alias: "x"}}, Limit: -1},
		},
		{
			"SELECT pg_catalog.current_setting('network_control')",
			&Select{Targets: []Target{{Pos: 8, Name: "current_setting", Func: true, Args: []Value{str("network_control", 35)}}}, Limit: -1},
		},
		{
			"-- comment\nSHOW /* inner /* nested */ still */ links;;",
			&Show{Name: "links", NamePos: 48},
		},
	}
	for _, tt := range tests {
		sts, err := Parse(tt.sql)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.sql, err)
			continue
		}
		if len(sts) != 1 {
			t.Errorf("Parse(%q): %d statements, want 1", tt.sql, len(sts))
			continue
		}
		if got := strip(sts[0]); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q)\n got %#v\nwant %#v", tt.sql, got, tt.want)
		}
	}
}

func TestParseText(t *testing.T) {
	sts, err := Parse("  SHOW a ; /* c */ SET b = 1;\nSELECT * FROM pg_session_wlmstat")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		text string
		pos  int
	}{{"SHOW a", 3}, {"SET b = 1", 20}, {"SELECT * FROM pg_session_wlmstat", 31}}
	if len(sts) != len(want) {
		t.Fatalf("got %d statements, want %d", len(sts), len(want))
	}
	for i, w := range want {
		if sts[i].Text() != w.text || sts[i].Position() != w.pos {
			t.Errorf("statement %d: text %q pos %d, want %q pos %d", i, sts[i].Text(), sts[i].Position(), w.text, w.pos)
		}
	}
}

func TestParseEmpty(t *testing.T) {
	for _, sql := range []string{"", "   ", ";", " ; ; ", "-- only a comment", "/* x */"} {
		sts, err := Parse(sql)
		if err != nil || len(sts) != 0 {
			t.Errorf("Parse(%q) = %d statements, %v; want none", sql, len(sts), err)
		}
	}
	if _, err := ParseOne(""); err == nil {
		t.Error("ParseOne(\"\") succeeded")
	}
	if _, err := ParseOne("SHOW a; SHOW b"); err == nil {
		t.Error("ParseOne of two statements succeeded")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		sql  string
		code string
		pos  int
		msg  string // substring of the message
	}{
		{"FOO BAR", sqlstate.SyntaxError, 1, `syntax error at or near "FOO"`},
		{"CREATE EXCEPT RULE", sqlstate.SyntaxError, 19, "syntax error at end of input"},
		{"CREATE EXCEPT r", sqlstate.SyntaxError, 15, `at or near "r"`},
		{"CREATE LINK IF EXISTS x", sqlstate.SyntaxError, 16, `at or near "EXISTS"`},
		{"CREATE TEBLE t (a int)", sqlstate.SyntaxError, 8, `at or near "TEBLE"`},
		// What would write or reach outside the views is refused as
		// the query engine refuses it, not as a syntax error.
		{"CREATE TABLE t (a int)", sqlstate.InsufficientPrivilege, 8, "only read (TABLE)"},
		{"DROP VIEW sessions", sqlstate.InsufficientPrivilege, 6, "only read (VIEW)"},
		{"PRAGMA query_only = off", sqlstate.InsufficientPrivilege, 1, "only read (PRAGMA)"},
		{"ATTACH DATABASE 'x' AS y", sqlstate.InsufficientPrivilege, 1, "only read (ATTACH)"},
		{"insert into users values (1)", sqlstate.InsufficientPrivilege, 1, "only read (INSERT)"},
		{"UPDATE rules SET a = 1", sqlstate.InsufficientPrivilege, 1, "only read (UPDATE)"},
		{"DELETE FROM sessions", sqlstate.InsufficientPrivilege, 1, "only read (DELETE)"},
		{"CREATE EXCEPT RULE r WITH (bandwidth 128)", sqlstate.SyntaxError, 38, `at or near "128"`},
		{"CREATE EXCEPT RULE r WITH (bandwidth=128", sqlstate.SyntaxError, 41, "end of input"},
		{"CREATE EXCEPT RULE r WITH bandwidth=128", sqlstate.SyntaxError, 27, `at or near "bandwidth"`},
		{"CREATE EXCEPT RULE r WITH ()", sqlstate.SyntaxError, 28, `at or near ")"`},
		{"CREATE EXCEPT RULE r WITH (a=1, A=2)", sqlstate.SyntaxError, 33, "conflicting or redundant options"},
		{"CREATE EXCEPT RULE r WITH (a=1) extra", sqlstate.SyntaxError, 33, `at or near "extra"`},
		{"CREATE EXCEPT RULE r WITH (a='x)", sqlstate.SyntaxError, 30, "unterminated quoted string"},
		{`CREATE RESOURCE POOL "`, sqlstate.SyntaxError, 22, "unterminated quoted identifier"},
		{`CREATE RESOURCE POOL ""`, sqlstate.SyntaxError, 22, "zero-length delimited identifier"},
		{"SHOW a /* never closed", sqlstate.SyntaxError, 8, "unterminated /* comment"},
		{"CREATE RESOURCE POOL p WITH (w=@)", sqlstate.SyntaxError, 32, `at or near "@"`},
		{"CREATE USER u LOGIN", sqlstate.FeatureNotSupported, 15, "user option LOGIN is not supported"},
		{"CREATE USER u RESOURCE 'p'", sqlstate.SyntaxError, 24, `at or near "'p'"`},
		{"CREATE USER u RESOURCE POOL 'a' RESOURCE POOL 'b'", sqlstate.SyntaxError, 33, "conflicting or redundant"},
		{"ALTER RESOURCE POOL p", sqlstate.SyntaxError, 22, "end of input"},
		{"ALTER USER u", sqlstate.SyntaxError, 13, "end of input"},
		{"DROP EXCEPT RULE", sqlstate.SyntaxError, 17, "end of input"},
		{"DROP RESOURCE POOL a,", sqlstate.SyntaxError, 22, "end of input"},
		{"DROP RESOURCE POOL a b", sqlstate.SyntaxError, 22, `at or near "b"`},
		{"ALTER ROUTE", sqlstate.SyntaxError, 12, "end of input"},
		{"ALTER ROUTE r", sqlstate.SyntaxError, 14, "end of input"},
		{"ALTER ROUTE r WITH ()", sqlstate.SyntaxError, 21, `at or near ")"`},
		{"ALTER ROUTE r RESET delay", sqlstate.SyntaxError, 21, `at or near "delay"`},
		{"ALTER ROUTE r RESET (delay, delay)", sqlstate.SyntaxError, 29, "conflicting or redundant options"},
		{"ALTER ROUTE r RESET (delay=1)", sqlstate.SyntaxError, 27, `at or near "="`},
		{"RELOAD now", sqlstate.SyntaxError, 8, `at or near "now"`},
		{"RELOAD CONFIG", sqlstate.SyntaxError, 8, `at or near "CONFIG"`},
		{"SET = 1", sqlstate.SyntaxError, 5, `at or near "="`},
		{"SET a 1", sqlstate.SyntaxError, 7, `at or near "1"`},
		{"SET a = ", sqlstate.SyntaxError, 9, "end of input"},
		{"SHOW", sqlstate.SyntaxError, 5, "end of input"},
		{"SHOW a b", sqlstate.SyntaxError, 8, `at or near "b"`},
		{"RESET", sqlstate.SyntaxError, 6, "end of input"},
		{"SHOW a; FOO", sqlstate.SyntaxError, 9, `at or near "FOO"`},
		{"ÄÖ BAR", sqlstate.SyntaxError, 1, `"ÄÖ"`},
		{"SHOW é é", sqlstate.SyntaxError, 8, `at or near "é"`},
		{"(", sqlstate.SyntaxError, 1, `at or near "("`},
	}
	for _, tt := range tests {
		_, err := Parse(tt.sql)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want *Error", tt.sql, err)
			continue
		}
		if e.Code != tt.code || e.Position != tt.pos || !strings.Contains(e.Message, tt.msg) {
			t.Errorf("Parse(%q) = %s %q at %d, want %s %q at %d", tt.sql, e.Code, e.Message, e.Position, tt.code, tt.msg, tt.pos)
		}
	}
}

// parseOneAs parses sql as one statement, which must be an S; anything
// else is reported on t and gives ok false.
func parseOneAs[S Statement](t *testing.T, sql string) (_ S, ok bool) {
	t.Helper()
	st, err := ParseOne(sql)
	v, ok := st.(S)
	if err != nil || !ok {
		t.Errorf("%s: %T, %v; want %T", sql, st, err, v)
		return v, false
	}
	return v, true
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		sql        string
		names      []string
		qualifiers []string
	}{
		{"SELECT * FROM pg_session_wlmstat WHERE usename = 'x'", []string{"select", "from", "pg_session_wlmstat", "where", "usename"}, nil},
		{`SELECT "user", sum(bytes_down) FROM Statements GROUP BY 1 ORDER BY 2 DESC LIMIT 5`, []string{"select", "user", "sum", "bytes_down", "from", "statements", "group", "by", "order", "desc", "limit"}, nil},
		{"SELECT n.nspname FROM pg_catalog.pg_namespace n JOIN x ON true", []string{"select", "n", "nspname", "from", "pg_namespace", "join", "x", "on", "true"}, []string{"n.nspname", "pg_catalog.pg_namespace"}},
		{"SELECT 1 + 1", []string{"select"}, nil},
		{"SELECT count(*) FROM (SELECT 1) AS s", []string{"select", "count", "from", "as", "s"}, nil},
		{"WITH a AS (SELECT 1) SELECT * FROM a", []string{"with", "a", "as", "select", "from"}, nil},
		{"VALUES (1), (2)", []string{"values"}, nil},
		{"SELECT ';' FROM t ORDER BY 1", []string{"select", "from", "t", "order", "by"}, nil},
	}
	for _, tt := range tests {
		q, ok := parseOneAs[*Query](t, tt.sql)
		if !ok {
			continue
		}
		var quals []string
		for _, n := range q.Qualified {
			quals = append(quals, n.Qualifier.Name+"."+n.Name.Name)
		}
		if !reflect.DeepEqual(q.Names, tt.names) || !reflect.DeepEqual(quals, tt.qualifiers) || q.Text() != tt.sql {
			t.Errorf("%s: names %q qualifiers %q text %q; want %q %q", tt.sql, q.Names, quals, q.Text(), tt.names, tt.qualifiers)
		}
	}
}

func TestQuerySQL(t *testing.T) {
	tests := []struct{ sql, want string }{
		{"SELECT a>=1 FROM t WHERE b<>'x'", "SELECT a>=1 FROM t WHERE b<>'x'"},
		{"SELECT 1 /* ; ATTACH */ -- c\n + 2 ORDER BY 1", "SELECT 1 + 2 ORDER BY 1"},
		{"SELECT 'a;b''c', \"x\"\"y\" FROM t WHERE 1", "SELECT 'a;b''c', \"x\"\"y\" FROM t WHERE 1"},
		{"SELECT 1 /* /* nested */ ; */ + 1", "SELECT 1 + 1"},
		{"SELECT s.id FROM pg_catalog.sessions s, (public.users) WHERE 1", "SELECT s.id FROM sessions s, (users) WHERE 1"},
	}
	for _, tt := range tests {
		q, ok := parseOneAs[*Query](t, tt.sql)
		if !ok {
			continue
		}
		if q.SQL != tt.want {
			t.Errorf("%s: SQL %q, want %q", tt.sql, q.SQL, tt.want)
		}
	}
}

func TestQueryOf(t *testing.T) {
	sts, err := Parse("SHOW sessions; SELECT a /* ; x */ FROM sessions LIMIT 1")
	if err != nil {
		t.Fatal(err)
	}
	q, err := QueryOf(sts[1])
	if err != nil || q.SQL != "SELECT a FROM sessions LIMIT 1" || q.Text() != "SELECT a /* ; x */ FROM sessions LIMIT 1" || q.PosOf("sessions") != 40 || q.Position() != 16 {
		t.Errorf("QueryOf: %+v, %v", q, err)
	}
	if _, err := QueryOf(sts[0]); err == nil {
		t.Error("QueryOf(SHOW): no error")
	}
}

func TestParseQueryErrors(t *testing.T) {
	for _, sql := range []string{"SELECT (1", "SELECT 1)", "SELECT 'x", "SELECT E'\\'; ATTACH' FROM t WHERE 1"} {
		if _, err := Parse(sql); err == nil {
			t.Errorf("Parse(%q) = nil error", sql)
		}
	}
}

func TestQueryParameters(t *testing.T) {
	tests := []struct {
		sql   string
		param string // "" when the query has none
	}{
		{"SELECT a FROM whatif WHERE database = $1", "$1"},
		{"SELECT a FROM t WHERE b = ? ORDER BY 1", "?"},
		{"SELECT a FROM t WHERE b = ?2 ORDER BY 1", "?2"},
		{"SELECT a FROM t WHERE b = :name ORDER BY 1", ":name"},
		{"SELECT a FROM t WHERE b = @x ORDER BY 1", "@x"},
		{"SELECT a FROM t WHERE b = $x ORDER BY 1", "$x"},
		{"SELECT a FROM t WHERE b = '$1 ? :x' ORDER BY 1", ""},
		{"SELECT \"$1\" FROM t WHERE 1", ""},
		{"SELECT a::int FROM t WHERE 1", ""},
		{"SELECT a FROM t WHERE b = $ 1", ""},
	}
	for _, tt := range tests {
		_, err := Parse(tt.sql)
		var e *Error
		switch {
		case tt.param == "" && err != nil:
			t.Errorf("Parse(%q): %v", tt.sql, err)
		case tt.param == "":
		case !errors.As(err, &e) || e.Code != sqlstate.UndefinedParameter || !strings.Contains(e.Message, "parameter "+tt.param+":"):
			t.Errorf("Parse(%q) = %v, want %s naming %s", tt.sql, err, sqlstate.UndefinedParameter, tt.param)
		}
	}
}

func TestParseSimpleSelectStays(t *testing.T) {
	for _, sql := range []string{"SELECT 1", "SELECT version()", "SELECT current_setting('low_priority_bandwidth')", "SELECT a, b FROM v LIMIT 2"} {
		parseOneAs[*Select](t, sql)
	}
}

func TestParseSessionCommands(t *testing.T) {
	tests := []struct {
		sql  string
		want SessionCommand
	}{
		{"CANCEL STATEMENT 7", SessionCommand{Session: 7, SessionPos: 18}},
		{"terminate session 12;", SessionCommand{Terminate: true, Session: 12, SessionPos: 19}},
		{"SELECT pg_cancel_backend(3)", SessionCommand{Session: 3, SessionPos: 26, Column: "pg_cancel_backend"}},
		{"SELECT pg_terminate_backend(4) AS done", SessionCommand{Terminate: true, Session: 4, SessionPos: 29, Column: "done"}},
		{"CANCEL STATEMENT 7 ON INSTANCE 'db-2:6433'", SessionCommand{Session: 7, SessionPos: 18, Instance: "db-2:6433", InstancePos: 32}},
		{"TERMINATE SESSION 8 on instance b", SessionCommand{Terminate: true, Session: 8, SessionPos: 19, Instance: "b", InstancePos: 33}},
		{"SELECT pg_cancel_backend(3, 'b')", SessionCommand{Session: 3, SessionPos: 26, Column: "pg_cancel_backend", Instance: "b", InstancePos: 29}},
	}
	for _, tt := range tests {
		c, ok := parseOneAs[*SessionCommand](t, tt.sql)
		if !ok {
			continue
		}
		c.base = base{}
		if *c != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.sql, *c, tt.want)
		}
	}
	// Anything more than one call is an SQL query, not a command (a call
	// over a column with FROM is a SessionQuery: TestSessionQuery).
	for _, sql := range []string{"SELECT pg_cancel_backend(1), 2"} {
		if st, err := ParseOne(sql); err != nil || reflect.TypeOf(st) != reflect.TypeOf(&Query{}) {
			t.Errorf("%s: %T, %v; want *Query", sql, st, err)
		}
	}
	for _, sql := range []string{"CANCEL STATEMENT x", "TERMINATE SESSION -1", "CANCEL 3", "TERMINATE SESSION 10ms",
		"CANCEL STATEMENT 3 ON", "CANCEL STATEMENT 3 ON INSTANCE", "CANCEL STATEMENT 3 ON INSTANCE ''", "TERMINATE SESSION 3 ON NODE 'b'"} {
		if _, err := ParseOne(sql); err == nil {
			t.Errorf("%s: no error", sql)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Rule: "EXCEPT RULE", Pool: "RESOURCE POOL", Link: "LINK", User: "USER", 9: "kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
	e := Errorf(sqlstate.SyntaxError, 3, "bad %s", "thing")
	if got := e.Error(); got != "42601: bad thing (at character 3)" {
		t.Errorf("Error() = %q", got)
	}
}

func BenchmarkParseReference(b *testing.B) {
	const sql = "CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty');"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(sql); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSessionQuery: a session function over a column parses as a
// SessionQuery whose Ids query selects the argument from the same FROM.
func TestSessionQuery(t *testing.T) {
	for _, c := range []struct {
		sql, column, ids string
		terminate        bool
	}{
		{"SELECT pg_terminate_backend(id) FROM sessions WHERE \"user\" = 'etl'", "pg_terminate_backend", "SELECT id FROM sessions WHERE \"user\" = 'etl'", true},
		{"select pg_cancel_backend(s.id) as c from sessions s join statements t on t.session = s.id where t.elapsed > 60;", "c", "SELECT s.id from sessions s join statements t on t.session = s.id where t.elapsed > 60", false},
	} {
		q, ok := parseOneAs[*SessionQuery](t, c.sql)
		if !ok {
			continue
		}
		if q.Column != c.column || q.Terminate != c.terminate || q.Ids == nil || q.Ids.Text() != c.ids {
			t.Errorf("%s: column %q, terminate %v, ids %q", c.sql, q.Column, q.Terminate, q.Ids.Text())
		}
	}
	// A literal stays a SessionCommand; a call nested in a query is not
	// a SessionQuery.
	if st, err := ParseOne("SELECT pg_terminate_backend(7)"); err != nil {
		t.Fatal(err)
	} else if _, ok := st.(*SessionCommand); !ok {
		t.Errorf("a literal id: %T", st)
	}
	if st, err := ParseOne("SELECT count(*) FROM (SELECT pg_terminate_backend(id) FROM sessions)"); err == nil {
		if _, ok := st.(*SessionQuery); ok {
			t.Error("a nested call parsed as a SessionQuery")
		}
	}
}

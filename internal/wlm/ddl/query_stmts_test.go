package ddl

import (
	"reflect"
	"testing"
)

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
		st, err := ParseOne(tt.sql)
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		q, ok := st.(*Query)
		if !ok {
			t.Errorf("%s: parsed as %T, want *Query", tt.sql, st)
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
		st, err := ParseOne(tt.sql)
		q, ok := st.(*Query)
		if err != nil || !ok {
			t.Errorf("%s: %T, %v", tt.sql, st, err)
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

func TestParseSimpleSelectStays(t *testing.T) {
	for _, sql := range []string{"SELECT 1", "SELECT version()", "SELECT current_setting('low_priority_bandwidth')", "SELECT a, b FROM v LIMIT 2"} {
		st, err := ParseOne(sql)
		if _, ok := st.(*Select); err != nil || !ok {
			t.Errorf("%s: %T, %v; want *Select", sql, st, err)
		}
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
	}
	for _, tt := range tests {
		st, err := ParseOne(tt.sql)
		c, ok := st.(*SessionCommand)
		if err != nil || !ok {
			t.Errorf("%s: %T, %v", tt.sql, st, err)
			continue
		}
		c.base = base{}
		if *c != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.sql, *c, tt.want)
		}
	}
	// Anything more than one call is an SQL query, not a command.
	for _, sql := range []string{"SELECT pg_cancel_backend(id) FROM sessions WHERE id > 1", "SELECT pg_cancel_backend(1), 2"} {
		if st, err := ParseOne(sql); err != nil || reflect.TypeOf(st) != reflect.TypeOf(&Query{}) {
			t.Errorf("%s: %T, %v; want *Query", sql, st, err)
		}
	}
	for _, sql := range []string{"CANCEL STATEMENT x", "TERMINATE SESSION -1", "CANCEL 3", "TERMINATE SESSION 10ms"} {
		if _, err := ParseOne(sql); err == nil {
			t.Errorf("%s: no error", sql)
		}
	}
}

// FuzzQuerySQL holds Query.SQL to its contract: the text for the SQL
// engine is one statement that parses again to a Query of the same SQL.
// Seeds: testdata/fuzz/FuzzQuerySQL.
func FuzzQuerySQL(f *testing.F) {
	f.Fuzz(func(t *testing.T, sql string) {
		sts, err := Parse(sql)
		if err != nil {
			return
		}
		for _, st := range sts {
			q, ok := st.(*Query)
			if !ok {
				continue
			}
			again, err := Parse(q.SQL)
			if err != nil || len(again) != 1 {
				t.Fatalf("Parse(%q): SQL %q parses to %d statements, %v", sql, q.SQL, len(again), err)
			}
			if q2, ok := again[0].(*Query); ok && q2.SQL != q.SQL {
				t.Fatalf("Parse(%q): SQL %q re-parses to SQL %q", sql, q.SQL, q2.SQL)
			}
		}
	})
}

package ddl

import (
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty');",
		"CREATE RESOURCE POOL rp1 WITH(EXCEPT_RULE='bandwidth_rule1');",
		"CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';",
		"ALTER LINK default WITH (capacity='1Gbit', delay='10ms', jitter='1ms')",
		"DROP IF EXISTS RESOURCE POOL a, b CASCADE",
		"SET low_priority_bandwidth TO '64MB'; SHOW ALL; RESET ALL",
		"SELECT sessionid, query AS q FROM pg_catalog.pg_session_wlmstat s LIMIT 3",
		"SELECT version(), 1, -2.5e3, 'it''s'",
		"/* a /* b */ c */ -- d\nSHOW links",
		`CREATE LINK "x""y" WITH (loss=0.1%, rate=256MB/s, delay=-1)`,
		"'unterminated", `"`, "/*", "SELECT * FROM t WHERE", "ÄÖ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		sts, err := Parse(sql)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) returned %T, want *Error", sql, err)
			}
			if e.Position < 0 || e.Position > utf8.RuneCountInString(sql)+1 {
				t.Fatalf("Parse(%q): position %d outside the text", sql, e.Position)
			}
			return
		}
		for _, st := range sts {
			if st.Position() < 1 || st.Position() > utf8.RuneCountInString(sql) {
				t.Fatalf("Parse(%q): statement position %d outside the text", sql, st.Position())
			}
			// A statement's own text parses to the same kind of statement.
			again, err := ParseOne(st.Text())
			if err != nil {
				t.Fatalf("Parse(%q): re-parsing %q: %v", sql, st.Text(), err)
			}
			if reflect.TypeOf(again) != reflect.TypeOf(st) {
				t.Fatalf("Parse(%q): %q re-parses as %T, was %T", sql, st.Text(), again, st)
			}
		}
	})
}

func FuzzSplitUserPool(f *testing.F) {
	for _, s := range []string{
		"CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';",
		"ALTER USER u WITH RESOURCE POOL p2 LOGIN",
		`ALTER USER "Mixed Case" RESOURCE POOL "P1" CONNECTION LIMIT 3`,
		"CREATE USER u PASSWORD $$it's; RESOURCE$$ RESOURCE POOL 'p'",
		"CREATE USER u PASSWORD E'a\\'b' RESOURCE POOL 'p'",
		"CREATE USER u/**/RESOURCE POOL 'p'/**/PASSWORD 'x'",
		"CREATE USER 'U1'@'%' PASSWORD 'x' RESOURCE POOL \"p\"",
		"CREATE OR REPLACE USER u@10.0.0.1 RESOURCE POOL 'p' ENCRYPTED PASSWORD 'x'",
		"CREATE USER u WITH RESOURCE POOL 'p' PASSWORD 'x'",
		"CREATE USER u RESOURCE POOL 'p' /*! , v */",
		"CREATE USER u /* /* */ RESOURCE POOL 'p'", "CREATE USER u RESOURCE POOL $x$p$x",
		"CREATE USER u@", "'", "$", "/*", "E'\\", "CREATE USER ü RESOURCE POOL 'é'",
		"CREATE USER u RESOURCE POOL encrypted PASSWORD 'x'",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, sql string, mysql bool) {
		d := PostgreSQL
		if mysql {
			d = MySQL
		}
		got, ok := SplitUserPool(sql, d)
		if !ok {
			return
		}
		if got.User == "" {
			t.Fatalf("SplitUserPool(%q, %s): empty user", sql, d)
		}
		if got.Pool.Pos < 1 || got.Pool.Pos > utf8.RuneCountInString(sql) {
			t.Fatalf("SplitUserPool(%q, %s): pool position %d outside the text", sql, d, got.Pool.Pos)
		}
		if d == PostgreSQL && len(got.Rest) >= len(sql) {
			t.Fatalf("SplitUserPool(%q, %s): rest %q is not shorter", sql, d, got.Rest)
		}
		// The rest is one user statement without the clause.
		if _, again := SplitUserPool(got.Rest, d); again {
			t.Fatalf("SplitUserPool(%q, %s): rest %q splits again", sql, d, got.Rest)
		}
		if _, ok := scan(got.Rest, d); !ok {
			t.Fatalf("SplitUserPool(%q, %s): rest %q does not lex", sql, d, got.Rest)
		}
	})
}

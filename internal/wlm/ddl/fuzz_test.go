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

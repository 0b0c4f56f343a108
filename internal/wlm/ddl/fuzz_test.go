package ddl

import (
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzParse holds Parse to its contract on any text: an *Error within
// the text, or statements whose own text parses again to the same kind.
// Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
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

// FuzzSplitUserPool holds SplitUserPool to its contract in either
// dialect: a split has a user, a pool inside the text, and a rest that
// lexes and does not split again. Seeds:
// testdata/fuzz/FuzzSplitUserPool.
func FuzzSplitUserPool(f *testing.F) {
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

package ddl

import "testing"

// TestParseReload: RELOAD in any case, with a semicolon or a comment
// after it, is one *Reload with its position and text; RELOAD with
// anything more is a syntax error (TestParseErrors).
func TestParseReload(t *testing.T) {
	for _, sql := range []string{"RELOAD", "reload;", "  Reload  -- again\n"} {
		r, ok := parseOneAs[*Reload](t, sql)
		if !ok {
			continue
		}
		if r.Position() < 1 || r.Text() == "" {
			t.Errorf("%q: position %d, text %q", sql, r.Position(), r.Text())
		}
	}
}

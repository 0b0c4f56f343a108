package ddl

import (
	"errors"
	"testing"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

func TestParseReload(t *testing.T) {
	tests := []struct {
		sql     string
		wantErr bool
	}{
		{"RELOAD", false},
		{"reload;", false},
		{"  Reload  -- again\n", false},
		{"RELOAD now", true},
		{"RELOAD CONFIG", true},
	}
	for _, tt := range tests {
		st, err := ParseOne(tt.sql)
		if tt.wantErr {
			var e *Error
			if !errors.As(err, &e) || e.Code != sqlstate.SyntaxError {
				t.Errorf("%q: got %v, %v; want a 42601 error", tt.sql, st, err)
			}
			continue
		}
		r, ok := st.(*Reload)
		if err != nil || !ok {
			t.Errorf("%q: got %#v, %v; want *Reload", tt.sql, st, err)
			continue
		}
		if r.Position() < 1 || r.Text() == "" {
			t.Errorf("%q: position %d, text %q", tt.sql, r.Position(), r.Text())
		}
	}
}

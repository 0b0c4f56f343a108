package ddl

import (
	"reflect"
	"testing"
)

func TestParseAlterRoute(t *testing.T) {
	tests := []struct {
		sql  string
		name string
		opts []Option
	}{
		{"ALTER ROUTE pg WITH (delay='50ms')", "pg", []Option{{Name: "delay", NamePos: 22, Value: Value{Kind: String, Text: "50ms", Pos: 28}}}},
		{"alter route \"Pg\" (Link = wan, pool = DEFAULT)", "Pg", []Option{
			{Name: "link", NamePos: 19, Value: Value{Kind: Word, Text: "wan", Pos: 26}},
			{Name: "pool", NamePos: 31, Value: Value{Kind: Default, Text: "default", Pos: 38}},
		}},
		{"ALTER ROUTE r RESET (delay, Jitter)", "r", []Option{
			{Name: "delay", NamePos: 22, Value: Value{Kind: Default, Text: "default", Pos: 22}},
			{Name: "jitter", NamePos: 29, Value: Value{Kind: Default, Text: "default", Pos: 29}},
		}},
	}
	for _, tt := range tests {
		a, ok := parseOneAs[*AlterRoute](t, tt.sql)
		if !ok {
			continue
		}
		if a.Name.Name != tt.name || !reflect.DeepEqual(a.Options, tt.opts) {
			t.Errorf("%s: got %q %+v, want %q %+v", tt.sql, a.Name.Name, a.Options, tt.name, tt.opts)
		}
		if a.Text() != tt.sql {
			t.Errorf("%s: text %q", tt.sql, a.Text())
		}
	}
}

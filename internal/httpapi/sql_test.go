package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// FuzzStatement builds the options of a CREATE LINK from an arbitrary
// name, option name and value, as the API does from a request, and checks
// that the statement names that object with that option and value, as a
// string, whatever the text: no text of a request can change the
// statement's meaning. It also checks that every position in it names
// its field.
func FuzzStatement(f *testing.F) {
	f.Add("wan", "delay", "10ms")
	f.Add(`a"b`, "capacity", "1'Gbit")
	f.Add(`x"); DROP LINK "default`, "delay", "'); RESET ALL; --")
	f.Add("ünïcødé", `"quoted"`, "/* comment */")
	f.Add("name;", "a\"\"b", "''")
	f.Fuzz(func(t *testing.T, name, opt, val string) {
		if name == "" || opt == "" || !utf8.ValidString(name) || !utf8.ValidString(opt) || !utf8.ValidString(val) {
			return // JSON text is valid UTF-8; an empty name is refused earlier
		}
		rq := &request{}
		c := &ddl.Create{Kind: ddl.Link, Name: rq.name("name", name)}
		raw, _ := json.Marshal(map[string]string{opt: val})
		var b body
		json.Unmarshal(raw, &b)
		opts, err := rq.options(b, false)
		if err != nil {
			t.Fatal(err)
		}
		c.Options = opts
		if c.Name.Name != name {
			t.Fatalf("name %q, want %q", c.Name.Name, name)
		}
		if len(c.Options) != 1 || c.Options[0].Name != strings.ToLower(opt) || c.Options[0].Value.Text != val || c.Options[0].Value.Kind != ddl.String {
			t.Fatalf("options %#v", c.Options)
		}
		if got := rq.fieldAt(c.Name.Pos); got != "name" {
			t.Fatalf("position %d of the name maps to %q", c.Name.Pos, got)
		}
		if got := rq.fieldAt(c.Options[0].Value.Pos); got != opt {
			t.Fatalf("position %d of the value maps to %q", c.Options[0].Value.Pos, got)
		}
		if got := rq.fieldAt(c.Options[0].NamePos); got != opt {
			t.Fatalf("position %d of the option name maps to %q", c.Options[0].NamePos, got)
		}
		if got := rq.fieldAt(0); got != "" {
			t.Fatalf("position 0 maps to %q", got)
		}
	})
}

// FuzzOptionValue feeds arbitrary JSON values to the conversion of a
// request field: it never panics and fails only with a 400 naming the
// field.
func FuzzOptionValue(f *testing.F) {
	for _, s := range []string{`"10ms"`, `128`, `-1`, `1e3`, `true`, `null`, `["a","b"]`, `[1]`, `{}`, `"`, ``, `0x10`, `NaN`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := optionValue("f", raw)
		if err != nil {
			if err.Status != 400 || err.Field != "f" {
				t.Fatalf("%q: error %+v", raw, err)
			}
			return
		}
		if v.null && v.text != "" {
			t.Fatalf("%q: null with text %q", raw, v.text)
		}
	})
}

// FuzzDecodeBody feeds arbitrary bodies to the request decoder: it never
// panics, fails only with a 400, and accepts only JSON objects.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"name":"x","delay":"1ms"}`, `{}`, `null`, `[]`, `{"a":1} {}`, `{"a":`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := decodeBody(raw)
		if err != nil {
			if err.Status != 400 {
				t.Fatalf("%q: status %d", raw, err.Status)
			}
			return
		}
		if b == nil {
			t.Fatalf("%q: accepted without an object", raw)
		}
		for _, k := range b.keys() {
			optionValue(k, b[k])
		}
	})
}

func TestFromDDLStatus(t *testing.T) {
	cases := map[string]int{"42601": 400, "22023": 400, "0A000": 400, "42704": 404, "42710": 409, "2BP01": 409, "58030": 500}
	for code, want := range cases {
		if got := statusOf(code); got != want {
			t.Errorf("statusOf(%s) = %d, want %d", code, got, want)
		}
	}
}

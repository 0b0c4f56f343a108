package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// request builds the console statement (a ddl AST) a JSON request asks
// for. Every position in the AST is a field number: the 1-based index,
// in fields, of the request field the node came from. An error the
// workload manager returns at a position so names its field.
type request struct {
	fields []string
}

// pos returns the position of a node that comes from field f.
func (r *request) pos(f string) int {
	r.fields = append(r.fields, f)
	return len(r.fields)
}

// fieldAt returns the field of position pos, or "".
func (r *request) fieldAt(pos int) string {
	if pos < 1 || pos > len(r.fields) {
		return ""
	}
	return r.fields[pos-1]
}

// name is an object name from field f.
func (r *request) name(f, name string) ddl.Name { return ddl.Name{Name: name, Pos: r.pos(f)} }

// option is option name = v from field f: a string value as written, or
// DEFAULT for null. Option names are case-insensitive, as the console's.
func (r *request) option(f, name string, v value) ddl.Option {
	p := r.pos(f)
	return ddl.Option{Name: strings.ToLower(name), NamePos: p, Value: v.ddl(p)}
}

// value is one option value from a JSON body.
type value struct {
	null bool
	text string // the value as a console string's content
}

// ddl returns v as the console's value at pos: a string, or DEFAULT.
func (v value) ddl(pos int) ddl.Value {
	if v.null {
		return ddl.Value{Kind: ddl.Default, Text: "default", Pos: pos}
	}
	return ddl.Value{Kind: ddl.String, Text: v.text, Pos: pos}
}

// body is a decoded JSON object: each key's raw value.
type body map[string]json.RawMessage

// decodeBody reads a JSON object.
func decodeBody(b []byte) (body, *Error) {
	var m body
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Message: "bad request body: want a JSON object: " + err.Error()}
	}
	if dec.More() {
		return nil, &Error{Status: http.StatusBadRequest, Message: "bad request body: more than one JSON value"}
	}
	if m == nil {
		return nil, &Error{Status: http.StatusBadRequest, Message: "bad request body: want a JSON object, not null"}
	}
	return m, nil
}

// keys returns the body's keys, sorted, without those in skip.
func (b body) keys(skip ...string) []string {
	out := make([]string, 0, len(b))
	for k := range b {
		if !contains(skip, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// str returns field f as a string; ok is false when it is absent.
func (b body) str(f string) (string, bool, *Error) {
	raw, ok := b[f]
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, badField(f, "field %s: want a string", f)
	}
	return s, true, nil
}

// optionValue converts a JSON value to option text: a string as it is, a
// number as written, a boolean as on or off, an array of strings joined
// by commas (a list such as except_rule); null is DEFAULT.
func optionValue(f string, raw json.RawMessage) (value, *Error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return value{}, badField(f, "field %s: empty value", f)
	}
	switch t[0] {
	case 'n':
		return value{null: true}, nil
	case 't', 'f':
		var v bool
		if err := json.Unmarshal(t, &v); err != nil {
			return value{}, badField(f, "field %s: bad value %s", f, clip(string(t)))
		}
		if v {
			return value{text: "on"}, nil
		}
		return value{text: "off"}, nil
	case '"':
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return value{}, badField(f, "field %s: bad string", f)
		}
		return value{text: s}, nil
	case '[':
		var list []string
		if err := json.Unmarshal(t, &list); err != nil {
			return value{}, badField(f, "field %s: want a string, a number or an array of strings", f)
		}
		return value{text: strings.Join(list, ",")}, nil
	case '{':
		return value{}, badField(f, "field %s: want a string or a number, not an object", f)
	}
	var n json.Number
	if err := json.Unmarshal(t, &n); err != nil {
		return value{}, badField(f, "field %s: bad value %s", f, clip(string(t)))
	}
	if _, err := strconv.ParseFloat(n.String(), 64); err != nil {
		return value{}, badField(f, "field %s: bad number %s", f, clip(n.String()))
	}
	return value{text: n.String()}, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// options returns the option of each of the body's fields other than
// skip, in name order. alter makes null DEFAULT; create leaves null
// fields out. A field the console could not name (an empty key), or one
// named twice when case is ignored, is refused as the console would
// refuse the option.
func (r *request) options(b body, alter bool, skip ...string) ([]ddl.Option, error) {
	var opts []ddl.Option
	for _, k := range b.keys(skip...) {
		v, err := optionValue(k, b[k])
		if err != nil {
			return nil, err
		}
		if v.null && !alter {
			continue
		}
		o := r.option(k, k, v)
		if k == "" {
			return nil, ddl.Errorf(sqlstate.SyntaxError, o.NamePos, "zero-length delimited identifier at or near \"\"\"\"")
		}
		for _, prev := range opts {
			if prev.Name == o.Name {
				return nil, ddl.Errorf(sqlstate.SyntaxError, o.NamePos, "conflicting or redundant options: %s is given twice", o.Name)
			}
		}
		opts = append(opts, o)
	}
	return opts, nil
}

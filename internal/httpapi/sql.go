package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// quoteIdent quotes s as an SQL identifier: "s", with every " doubled.
// Any text is safe inside: the console's lexer ends a quoted identifier
// only at a single ".
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral quotes s as an SQL string: 's', with every ' doubled.
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// statement builds the text of one console statement and remembers
// which request field each part of it came from, so that an error's
// position (1-based, in characters) names the field to blame.
type statement struct {
	b     strings.Builder
	n     int // characters written
	spans []span
}

type span struct {
	field    string
	from, to int // 1-based character positions, to exclusive
}

func (s *statement) raw(text string) *statement {
	s.b.WriteString(text)
	s.n += utf8.RuneCountInString(text)
	return s
}

// field writes text as coming from request field f.
func (s *statement) field(f, text string) *statement {
	from := s.n + 1
	s.raw(text)
	s.spans = append(s.spans, span{f, from, s.n + 1})
	return s
}

// fieldAt returns the field whose text holds character pos, or "".
func (s *statement) fieldAt(pos int) string {
	for _, sp := range s.spans {
		if pos >= sp.from && pos < sp.to {
			return sp.field
		}
	}
	return ""
}

func (s *statement) String() string { return s.b.String() }

// value is one option value from a JSON body.
type value struct {
	null bool
	text string // the value as an SQL literal's content
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

// withOptions appends WITH (name = 'value', ...) for the body's fields
// other than skip, in name order. alter writes null as DEFAULT; create
// leaves null fields out. It reports whether any option was written.
func (s *statement) withOptions(b body, alter bool, skip ...string) (bool, *Error) {
	wrote := false
	for _, k := range b.keys(skip...) {
		v, err := optionValue(k, b[k])
		if err != nil {
			return false, err
		}
		if v.null && !alter {
			continue
		}
		if !wrote {
			s.raw(" WITH (")
		} else {
			s.raw(", ")
		}
		wrote = true
		s.field(k, quoteIdent(k))
		s.raw(" = ")
		if v.null {
			s.field(k, "DEFAULT")
		} else {
			s.field(k, quoteLiteral(v.text))
		}
	}
	if wrote {
		s.raw(")")
	}
	return wrote, nil
}

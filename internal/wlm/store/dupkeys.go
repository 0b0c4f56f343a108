package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// duplicateKey scans JSON data (already known to decode into a value of
// type t) for an object that names one key twice, at any depth, which
// encoding/json would accept with the last value winning. It returns an
// error giving the key's line and column and its path, or nil. Keys of
// an object decoded into a struct are compared as encoding/json matches
// them to fields, without regard to case; keys of a map, exactly.
func duplicateKey(data []byte, t reflect.Type) error {
	type frame struct {
		object  bool
		t       reflect.Type // what the container decodes into; nil: unknown
		fold    bool         // keys name struct fields: compare folded
		keys    map[string]bool
		wantKey bool   // object: the next token is a key
		key     string // object: the key whose value comes next
		index   int    // array: the index of the next element
		path    string
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	// child returns the type and path of the value about to be read.
	child := func() (reflect.Type, string) {
		if len(stack) == 0 {
			return t, ""
		}
		f := stack[len(stack)-1]
		if f.object {
			ft, _ := fieldOf(f.t, f.key)
			return ft, joinPath(f.path, f.key)
		}
		ct := elemOf(f.t)
		p := fmt.Sprintf("%s[%d]", f.path, f.index)
		f.index++
		return ct, p
	}
	// valueDone marks the end of a value in the enclosing container.
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // a syntax error, which decoding reports
		}
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey {
			f := stack[len(stack)-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				valueDone()
				continue
			}
			key, _ := tok.(string)
			id := key
			if _, field := fieldOf(f.t, key); f.fold && field != "" {
				id = field // two spellings of one field are one key
			}
			if f.keys[id] {
				in := ""
				if f.path != "" {
					in = " in " + f.path
				}
				return fmt.Errorf("%sduplicate key %q%s", where(data, keyStart(data, dec.InputOffset())), key, in)
			}
			f.keys[id] = true
			f.key, f.wantKey = key, false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '{', '[':
			ct, p := child()
			ct = deref(ct)
			stack = append(stack, &frame{object: d == '{', t: ct, fold: ct != nil && ct.Kind() == reflect.Struct,
				keys: map[string]bool{}, wantKey: true, path: p})
		case ']':
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			if len(stack) > 0 && !stack[len(stack)-1].object {
				stack[len(stack)-1].index++
			}
			valueDone()
		}
	}
}

// keyStart returns the offset of the opening quote of the string that
// ends just before off.
func keyStart(data []byte, off int64) int64 {
	i := min(off, int64(len(data))) - 2 // the byte before the closing quote
	for ; i >= 0; i-- {
		if data[i] != '"' {
			continue
		}
		slashes := 0
		for j := i - 1; j >= 0 && data[j] == '\\'; j-- {
			slashes++
		}
		if slashes%2 == 0 {
			return i
		}
	}
	return 0
}

// deref strips pointers; nil stays nil.
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldOf returns the type a key of an object of type t decodes into
// (nil when that is not known: an interface, a custom decoder) and, for
// a struct, the name of the field the key sets, matched as encoding/json
// matches it: exactly, else without regard to case.
func fieldOf(t reflect.Type, key string) (reflect.Type, string) {
	switch {
	case t == nil:
		return nil, ""
	case t.Kind() == reflect.Map:
		return t.Elem(), ""
	case t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType):
		return nil, ""
	}
	var folded reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Type, f.Name
		}
		if folded.Name == "" && strings.EqualFold(name, key) {
			folded = f
		}
	}
	return folded.Type, folded.Name
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// elemOf returns the element type of a slice or array type, or nil.
func elemOf(t reflect.Type) reflect.Type {
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return t.Elem()
	}
	return nil
}

// joinPath appends a key to a path of keys.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

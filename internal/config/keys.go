package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownKey walks a YAML node against the Go type it decodes into and
// returns the first mapping key that type has no field for, as an Error
// naming its path (routes[1].tls) and line. A map, or a struct with an
// inline map, takes any key. An alias is not followed: its anchor is
// checked where it is defined. Run it after decoding, which refuses an
// anchor that contains itself.
func unknownKey(file string, n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := unknownKey(file, c, t, path); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil // a type error, which decoding reports
		}
		for i, c := range n.Content {
			if err := unknownKey(file, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				continue // merges an alias
			}
			vt, ok := fieldType(t, k.Value)
			if !ok {
				where := path
				if where != "" {
					where += ": "
				}
				return &Error{File: file, Msg: fmt.Sprintf("%sunknown key %q (line %d)", where, k.Value, k.Line)}
			}
			if err := unknownKey(file, v, vt, joinKey(path, k.Value)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldType returns the type of the value under key in a mapping decoded
// into t, and whether t has a place for key.
func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	switch t.Kind() {
	case reflect.Map:
		return t.Elem(), true
	case reflect.Struct:
		var inline reflect.Type
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if opts == "inline" {
				if f.Type.Kind() == reflect.Map {
					inline = f.Type.Elem()
				}
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if name == key {
				return f.Type, true
			}
		}
		if inline != nil {
			return inline, true
		}
		return nil, false
	}
	return t, true // a scalar where a mapping is: a type error, which decoding reports
}

// joinKey appends a mapping key to a key path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

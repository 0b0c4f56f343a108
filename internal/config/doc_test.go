package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// configDoc is the configuration reference, relative to this package.
const configDoc = "../../doc/config.md"

// fileKeys returns the key paths the configuration file accepts, as
// doc/config.md writes them: admin.listen, routes[].tls.cert. A map is
// one key (its entries are options documented elsewhere); a list adds
// [] to its key; an inline map (a link's options) adds nothing.
func fileKeys(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		key := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			keys = append(keys, fileKeys(ft, key+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, fileKeys(ft.Elem(), key+"[].")...)
		default:
			keys = append(keys, key)
		}
	}
	return keys
}

// TestEveryKeyDocumented fails when a key the configuration file accepts
// is missing from the reference in doc/config.md, where each key is
// written whole, as `routes[].upstream_tls.ca`.
func TestEveryKeyDocumented(t *testing.T) {
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	keys := fileKeys(reflect.TypeFor[file](), "")
	if len(keys) < 30 {
		t.Fatalf("found only %d keys in the file type: %v", len(keys), keys)
	}
	var missing []string
	for _, k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s does not document these configuration keys (write each as `key` in its Keys table):\n  %s",
			configDoc, strings.Join(missing, "\n  "))
	}
}

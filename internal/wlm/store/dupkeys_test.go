package store

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/wlm/catalog"
)

// TestCatalogDuplicateKey: a catalog file that names a key twice in one
// object, at any depth, is refused with the line and column of the
// second one, not loaded with the last value winning.
func TestCatalogDuplicateKey(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{"top level", "{\n  \"format\": \"sluice-catalog/1\",\n  \"format\": \"sluice-catalog/1\"\n}",
			`line 3, column 3 (offset 36): duplicate key "format"`},
		{"link name", "{\"format\": \"sluice-catalog/1\", \"links\": {\n  \"default\": {},\n  \"wan\": {\"capacity\": 1},\n  \"wan\": {\"capacity\": 2}\n}}",
			`line 4, column 3 (offset 87): duplicate key "wan" in links`},
		{"nested emulation", "{\"format\": \"sluice-catalog/1\", \"links\": {\"default\": {\"emulation\": {\"delay\": \"1ms\",\n \"delay\": \"2ms\"}}}}",
			`line 2, column 2 (offset 84): duplicate key "delay" in links.default.emulation`},
		{"field spelt twice", "{\"format\": \"sluice-catalog/1\", \"pools\": {\"p\": {\"weight\": 1, \"network_priority\": \"normal\", \"Weight\": 9}}}",
			`line 1, column 91 (offset 90): duplicate key "Weight" in pools.p`},
		{"escaped key", `{"format": "sluice-catalog/1", "users": {"a\"b": {}, "a\u0022b": {}}}`,
			`line 1, column 54 (offset 53): duplicate key "a\"b" in users`},
		{"setting", `{"format": "sluice-catalog/1", "settings": {"network_control": "on", "network_control": "off"}}`,
			`line 1, column 70 (offset 69): duplicate key "network_control" in settings`},
	}
	for _, tt := range tests {
		_, err := Unmarshal("c.json", []byte(tt.data))
		if err == nil || err.Error() != "catalog c.json: "+tt.want {
			t.Errorf("%s: got %v\nwant catalog c.json: %s", tt.name, err, tt.want)
		}
	}
	// Through the file loader too.
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(tests[1].data), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := NewFile(path).Load(context.Background()); err == nil {
		t.Error("Load accepted a catalog with a duplicate key")
	} else if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tests[1].want) {
		t.Errorf("Load: %v", err)
	}

	// Keys that are distinct stay distinct: map keys differing in case,
	// one key in sibling objects, a key equal to its parent's.
	for _, ok := range []string{
		`{"format": "sluice-catalog/1", "links": {"default": {}, "wan": {"capacity": 1}, "WAN": {"capacity": 2}}}`,
		`{"format": "sluice-catalog/1", "links": {"default": {"emulation": {"delay": "1ms"}}, "wan": {"emulation": {"delay": "1ms"}}}}`,
		`{"format": "sluice-catalog/1", "users": {"users": {}}}`,
	} {
		if _, err := Unmarshal("c.json", []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestDuplicateKeyAnyShape runs the scanner on JSON of no known type:
// objects within arrays within objects.
func TestDuplicateKeyAnyShape(t *testing.T) {
	tests := []struct {
		data, want string
	}{
		{`{"a": [{"x": 1}, {"x": 1, "y": 2, "x": 3}]}`, `line 1, column 35 (offset 34): duplicate key "x" in a[1]`},
		{`[[1, {"k": [], "k": {}}]]`, `line 1, column 16 (offset 15): duplicate key "k" in [0][1]`},
		{`{"a": {"b": {"c": 1, "c": 2}}}`, `duplicate key "c" in a.b`},
		{`{"a": 1, "b": {"a": 1}, "c": [{"a": 1}, {"a": 1}]}`, ``},
		{`{"a": "}", "b": "{\"a\": 1, \"a\": 2}"}`, ``},
		{`{"a": 1, "a"`, `line 1, column 10 (offset 9): duplicate key "a"`},
		{`{"a": 1, ]`, ``}, // a syntax error, which decoding reports
	}
	for _, tt := range tests {
		err := duplicateKey([]byte(tt.data), nil)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tt.want == "" && got != "" || tt.want != "" && !strings.HasSuffix(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.data, got, tt.want)
		}
	}
	if err := duplicateKey([]byte(`{"links": {"default": {"capacity": 1, "CAPACITY": 2}}}`), reflect.TypeFor[fileCatalog]()); err == nil {
		t.Error("two spellings of one struct field accepted")
	}
}

// FuzzUnmarshal holds the catalog loader to three things on any
// input: it does not panic; what it accepts names no key twice in one
// object (json.Unmarshal into a generic map would have lost a value); and
// what it accepts survives Marshal and loading again unchanged.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"format": "sluice-catalog/1"}`))
	if b, err := Marshal(catalog.New()); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"format": "sluice-catalog/1", "format": "sluice-catalog/1"}`))
	f.Add([]byte(`{"format": "sluice-catalog/1", "links": {"default": {}, "wan": {"capacity": 1}, "wan": {}}}`))
	f.Add([]byte(`{"format": "sluice-catalog/1", "pools": {"p": {"weight": 1, "Weight": 2, "network_priority": "low"}}}`))
	f.Add([]byte("{\n  \"format\": \"sluice-catalog/1\",\n  \"links\": {"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Unmarshal("f.json", data)
		if err != nil {
			return
		}
		if err := duplicateKey(data, nil); err != nil {
			t.Fatalf("accepted a catalog with an exact duplicate key: %v", err)
		}
		b, err := Marshal(c)
		if err != nil {
			t.Fatalf("marshal an accepted catalog: %v", err)
		}
		again, err := Unmarshal("f.json", b)
		if err != nil {
			t.Fatalf("reload of a marshalled catalog: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("round trip changed the catalog:\n%+v\n%+v", c, again)
		}
	})
}

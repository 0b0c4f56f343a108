package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Format identifies the layout Marshal writes.
const Format = "sluice-catalog/1"

// fileCatalog is the JSON layout of a stored catalog.
type fileCatalog struct {
	Format   string                      `json:"format"`
	Links    map[string]*catalog.LinkDef `json:"links"`
	Rules    map[string]*catalog.Rule    `json:"rules"`
	Pools    map[string]filePool         `json:"pools"`
	Users    map[string]*catalog.UserDef `json:"users"`
	Settings map[string]string           `json:"settings"`
}

type filePool struct {
	ExceptRules []string          `json:"except_rule,omitempty"`
	Weight      int               `json:"weight"`
	Priority    string            `json:"network_priority"`
	Emulation   catalog.Emulation `json:"emulation"`
	// ActiveStatements is absent when unlimited.
	ActiveStatements int `json:"active_statements,omitempty"`
	// QueueTimeout is absent when there is none.
	QueueTimeout catalog.Duration `json:"queue_timeout,omitempty"`
	// IdleInTransaction is absent when there is none.
	IdleInTransaction catalog.Duration `json:"idle_in_transaction,omitempty"`
}

// Marshal encodes c as JSON, indented, with a trailing newline: the
// catalog file's contents, and a value an etcd key would hold.
func Marshal(c *catalog.Catalog) ([]byte, error) {
	names := catalog.SettingNames()
	f := fileCatalog{
		Format:   Format,
		Links:    c.Links,
		Rules:    c.Rules,
		Pools:    make(map[string]filePool, len(c.Pools)),
		Users:    c.Users,
		Settings: make(map[string]string, len(names)),
	}
	for name, p := range c.Pools {
		f.Pools[name] = filePool{ExceptRules: p.ExceptRules, Weight: p.Weight, Priority: p.Priority.String(), Emulation: p.Emulation,
			ActiveStatements: p.ActiveStatements, QueueTimeout: catalog.Duration(p.QueueTimeout),
			IdleInTransaction: catalog.Duration(p.IdleInTransaction)}
	}
	for _, s := range names {
		f.Settings[s] = c.Settings.Text(s)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	return append(b, '\n'), nil
}

// Unmarshal decodes and validates what Marshal writes. name is used in
// errors, which give the line and column when the JSON itself is
// malformed or an object names a key twice (encoding/json would keep the
// last value silently). It never panics.
func Unmarshal(name string, data []byte) (*catalog.Catalog, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("catalog %s: the file is empty", name)
	}
	var f fileCatalog
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("catalog %s: %s%w", name, jsonWhere(data, err), err)
	}
	if dec.More() {
		off := dec.InputOffset()
		return nil, fmt.Errorf("catalog %s: %sunexpected data after the catalog", name, where(data, off))
	}
	if err := duplicateKey(data, reflect.TypeFor[fileCatalog]()); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", name, err)
	}
	if f.Format != Format {
		return nil, fmt.Errorf("catalog %s: format %q, want %q", name, f.Format, Format)
	}
	c := catalog.New()
	for k, v := range f.Links {
		if v == nil {
			return nil, fmt.Errorf("catalog %s: link %q is null", name, k)
		}
		c.Links[k] = v
	}
	for k, v := range f.Rules {
		if v == nil {
			return nil, fmt.Errorf("catalog %s: except rule %q is null", name, k)
		}
		c.Rules[k] = v
	}
	for k, v := range f.Pools {
		cl, err := link.ParseClass(v.Priority)
		if err != nil {
			return nil, fmt.Errorf("catalog %s: resource pool %q: network_priority: %w", name, k, err)
		}
		c.Pools[k] = &catalog.Pool{ExceptRules: v.ExceptRules, Weight: v.Weight, Priority: cl, Emulation: v.Emulation,
			ActiveStatements: v.ActiveStatements, QueueTimeout: time.Duration(v.QueueTimeout),
			IdleInTransaction: time.Duration(v.IdleInTransaction)}
	}
	for k, v := range f.Users {
		if v == nil {
			return nil, fmt.Errorf("catalog %s: user %q is null", name, k)
		}
		c.Users[k] = v
	}
	for k, v := range f.Settings {
		if _, ok := c.Settings.Show(k); !ok {
			return nil, fmt.Errorf("catalog %s: unknown setting %q", name, k)
		}
		if err := c.Settings.Set(k, ddl.Value{Kind: ddl.String, Text: v}); err != nil {
			return nil, fmt.Errorf("catalog %s: setting %s: %w", name, k, err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", name, err)
	}
	return c, nil
}

// jsonWhere returns "line L, column C (offset O): " for JSON errors that
// carry an offset, or "".
func jsonWhere(data []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read, including the offending one.
		return where(data, max(se.Offset-1, 0))
	case errors.As(err, &te):
		return where(data, te.Offset)
	}
	return ""
}

func where(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col := 1, 1
	for _, b := range data[:off] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d (offset %d): ", line, col, off)
}

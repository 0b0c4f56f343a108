package wlm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// catalogFormat identifies the catalog file layout.
const catalogFormat = "sluice-catalog/1"

// fileCatalog is the JSON layout of the catalog file.
type fileCatalog struct {
	Format   string              `json:"format"`
	Links    map[string]*LinkDef `json:"links"`
	Rules    map[string]*Rule    `json:"rules"`
	Pools    map[string]filePool `json:"pools"`
	Users    map[string]*UserDef `json:"users"`
	Settings map[string]string   `json:"settings"`
}

type filePool struct {
	ExceptRules []string  `json:"except_rule,omitempty"`
	Weight      int       `json:"weight"`
	Priority    string    `json:"network_priority"`
	Emulation   Emulation `json:"emulation"`
}

// settingText writes a setting exactly, for the file.
func settingText(s Settings, name string) string {
	switch name {
	case "except_check_period":
		return s.ExceptCheckPeriod.String()
	case "low_priority_bandwidth":
		return strconv.FormatInt(s.LowPriorityBandwidth, 10)
	case "low_priority_queue_bytes":
		return strconv.FormatInt(s.LowPriorityQueueBytes, 10)
	case "network_control":
		return findSetting(name).def(s)
	}
	return ""
}

// MarshalCatalog encodes c as the catalog file does.
func MarshalCatalog(c *Catalog) ([]byte, error) {
	f := fileCatalog{
		Format:   catalogFormat,
		Links:    c.Links,
		Rules:    c.Rules,
		Pools:    make(map[string]filePool, len(c.Pools)),
		Users:    c.Users,
		Settings: make(map[string]string, len(settings)),
	}
	for name, p := range c.Pools {
		f.Pools[name] = filePool{ExceptRules: p.ExceptRules, Weight: p.Weight, Priority: p.Priority.String(), Emulation: p.Emulation}
	}
	for _, s := range settings {
		f.Settings[s.name] = settingText(c.Settings, s.name)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	return append(b, '\n'), nil
}

// UnmarshalCatalog decodes and validates a catalog file's contents. name
// is used in errors, which give the line and column when the JSON itself
// is malformed or an object names a key twice (encoding/json would keep
// the last value silently).
func UnmarshalCatalog(name string, data []byte) (*Catalog, error) {
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
	if f.Format != catalogFormat {
		return nil, fmt.Errorf("catalog %s: format %q, want %q", name, f.Format, catalogFormat)
	}
	c := NewCatalog()
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
		c.Pools[k] = &Pool{ExceptRules: v.ExceptRules, Weight: v.Weight, Priority: cl, Emulation: v.Emulation}
	}
	for k, v := range f.Users {
		if v == nil {
			return nil, fmt.Errorf("catalog %s: user %q is null", name, k)
		}
		c.Users[k] = v
	}
	for k, v := range f.Settings {
		s := findSetting(k)
		if s == nil {
			return nil, fmt.Errorf("catalog %s: unknown setting %q", name, k)
		}
		if err := s.set(&c.Settings, ddl.Value{Kind: ddl.String, Text: v}); err != nil {
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

// Validate checks the catalog's invariants: the default link exists,
// every pool's rules and every user's pool exist, and every value is in
// range. Statements keep them; Validate guards loaded files.
func (c *Catalog) Validate() error {
	if c.Links[DefaultLink] == nil {
		return fmt.Errorf("link %q is missing", DefaultLink)
	}
	for name, l := range c.Links {
		if name == "" {
			return errors.New("a link has an empty name")
		}
		if l.Capacity < 0 || l.QueueSize < 0 {
			return fmt.Errorf("link %q: negative capacity or queue_size", name)
		}
		if err := l.Emulation.validate(); err != nil {
			return fmt.Errorf("link %q: %w", name, err)
		}
	}
	for name, r := range c.Rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("except rule %q: %w", name, err)
		}
	}
	for name, p := range c.Pools {
		if p.Weight < 1 || p.Weight > link.MaxWeight {
			return fmt.Errorf("resource pool %q: weight %d is outside [1, %d]", name, p.Weight, link.MaxWeight)
		}
		for _, r := range p.ExceptRules {
			if c.Rules[r] == nil {
				return fmt.Errorf("resource pool %q: except rule %q does not exist", name, r)
			}
		}
		if err := p.Emulation.validate(); err != nil {
			return fmt.Errorf("resource pool %q: %w", name, err)
		}
	}
	for name, u := range c.Users {
		if u.Pool != "" && c.Pools[u.Pool] == nil {
			return fmt.Errorf("user %q: resource pool %q does not exist", name, u.Pool)
		}
	}
	s := c.Settings
	if s.ExceptCheckPeriod <= 0 || s.LowPriorityBandwidth < 0 || s.LowPriorityQueueBytes == 0 || s.LowPriorityQueueBytes < -1 {
		return errors.New("settings out of range")
	}
	return nil
}

func (r *Rule) validate() error {
	for _, t := range []struct {
		name string
		v    float64
	}{{"bandwidth", r.Bandwidth}, {"elapsedtime", r.ElapsedTime}} {
		if t.v != Unlimited && !(t.v >= 0) {
			return fmt.Errorf("%s %v: want -1 or a number >= 0", t.name, t.v)
		}
	}
	if r.Bandwidth == Unlimited && r.ElapsedTime == Unlimited {
		return errors.New("no threshold: set bandwidth or elapsedtime")
	}
	if r.Action != Abort && r.Action != Penalty {
		return fmt.Errorf("action %q: want abort or penalty", r.Action)
	}
	return nil
}

func (e Emulation) validate() error {
	return e.Params().Validate()
}

// store persists the catalog to a file. The zero store (no path) keeps
// nothing.
type store struct {
	path string
}

// load reads the catalog file. A missing file returns (nil, nil).
func (s store) load() (*Catalog, error) {
	if s.path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", s.path, err)
	}
	return UnmarshalCatalog(s.path, data)
}

// save replaces the catalog file atomically: the new contents are written
// to a temporary file in the same directory, synced, renamed over the old
// file, and the directory is synced, so a crash leaves either the old or
// the new catalog, never a mix.
func (s store) save(c *Catalog) error {
	if s.path == "" {
		return nil
	}
	data, err := MarshalCatalog(c)
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(s.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save catalog %s: %w", s.path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("save catalog %s: %w", s.path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("save catalog %s: %w", s.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save catalog %s: %w", s.path, err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("save catalog %s: %w", s.path, err)
	}
	done = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("save catalog %s: sync directory: %w", s.path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("save catalog %s: sync directory: %w", s.path, err)
	}
	return nil
}

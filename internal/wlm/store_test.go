package wlm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/store"
)

func TestCatalogRoundTrip(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, reference)
	mustExec(t, m, `CREATE LINK wan WITH (capacity='123456789', delay='1.234567ms', jitter='1ms', distribution=pareto, loss='0.01%', seed=-7);
CREATE EXCEPT RULE r2 WITH (bandwidth=0.125, action=abort);
CREATE EXCEPT RULE queued WITH (blocktime=2.5, action=penalty);
CREATE RESOURCE POOL vip WITH (network_priority=high, weight=9, except_rule='r2,bandwidth_rule1,queued', rate='1GB', active_statements=7, queue_timeout='1.5s', idle_in_transaction='30s');
CREATE LINK gate WITH (max_active_statements=3);
SET low_priority_bandwidth = '123456789'; SET cluster_low_priority_bandwidth = '30MB'; SET except_check_period = '1.5s'; SET low_priority_queue_bytes = -1; SET low_priority_yield = '40%'; SET network_control = off`)
	data, err := store.Marshal(m.Service().Catalog())
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Unmarshal("mem", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !reflect.DeepEqual(got, m.Service().Catalog()) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v\n%s", got, m.Service().Catalog(), data)
	}
	if p := got.Pools["vip"]; p.ActiveStatements != 7 || p.QueueTimeout != 1500*time.Millisecond || p.IdleInTransaction != 30*time.Second || got.Links["gate"].MaxActiveStatements != 3 || got.Rules["queued"].BlockTime != 2.5 {
		t.Errorf("admission options after the round trip: pool %+v, link %+v, rule %+v", p, got.Links["gate"], got.Rules["queued"])
	}
}

// TestCatalogWithoutAdmission reads a pool, a link and a rule written
// before active_statements, max_active_statements and blocktime existed:
// all three are unlimited.
func TestCatalogWithoutAdmission(t *testing.T) {
	data := `{"format": "sluice-catalog/1",
  "links": {"default": {"emulation": {}}, "wan": {"capacity": 1000, "emulation": {}}},
  "rules": {"r": {"bandwidth": -1, "elapsedtime": 5, "action": "abort"}},
  "pools": {"p": {"except_rule": ["r"], "weight": 1, "network_priority": "normal", "emulation": {}}},
  "users": {}, "settings": {}}`
	c, err := store.Unmarshal("old", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pools["p"]; p.ActiveStatements != 0 || p.QueueTimeout != 0 || p.IdleInTransaction != 0 || c.Links["wan"].MaxActiveStatements != 0 || c.Rules["r"].BlockTime != 0 || c.Rules["r"].Queued() {
		t.Errorf("old catalog: pool %+v, link %+v, rule %+v", p, c.Links["wan"], c.Rules["r"])
	}
}

func TestCatalogPersistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	m := newTestManager(t, ManagerOptions{CatalogPath: path})
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("NewManager did not create the catalog file: %v", err)
	}
	mustExec(t, m, reference)
	mustExec(t, m, "ALTER LINK default WITH (capacity='1Gbit', delay='5ms'); SET low_priority_bandwidth = '64MB'")
	want := m.Service().Catalog()
	m.Close()

	m2 := newTestManager(t, ManagerOptions{CatalogPath: path})
	if !reflect.DeepEqual(m2.Service().Catalog(), want) {
		t.Errorf("after restart:\n got %+v\nwant %+v", m2.Service().Catalog(), want)
	}
	if c := m2.Runtime().Link(DefaultLink).Config(); c.Capacity != 125e6 || c.LowPriorityBandwidth != 64e6 {
		t.Errorf("runtime link after restart: %+v", c)
	}
	if b := m2.Runtime().Bind("", "user1"); b.Pool != "rp1" {
		t.Errorf("binding after restart: %+v", b)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v", names)
	}
}

func TestBindUserPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	m := newTestManager(t, ManagerOptions{CatalogPath: path})
	mustExec(t, m, "CREATE RESOURCE POOL p1")
	v := m.Runtime().Version()
	if err := m.Service().BindUser(context.Background(), "u1", ddl.Value{Kind: ddl.String, Text: "p1"}); err != nil {
		t.Fatal(err)
	}
	if m.Runtime().Version() == v {
		t.Fatal("Version did not move")
	}
	v = m.Runtime().Version()
	if err := m.Service().BindUser(context.Background(), "u1", ddl.Value{Kind: ddl.String, Text: "p1"}); err != nil || m.Runtime().Version() != v {
		t.Fatalf("binding again: err %v, version %d -> %d; want no change", err, v, m.Runtime().Version())
	}
	m.Close()
	again := newTestManager(t, ManagerOptions{CatalogPath: path})
	if u := again.Service().Catalog().Users["u1"]; u == nil || u.Pool != "p1" {
		t.Fatalf("reloaded binding = %+v", u)
	}
	if b := again.Runtime().Bind("any", "u1"); b.Pool != "p1" {
		t.Fatalf("Bind = %+v", b)
	}
}

func TestCatalogCorrupt(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{"empty", "", "the file is empty"},
		{"truncated", "{\n  \"format\": \"sluice-catalog/1\",\n  \"links\": {", "unexpected EOF"},
		{"syntax", "{\n  \"format\": \"sluice-catalog/1\",\n  \"links\": {]\n}", "line 3, column 13"},
		{"type", "{\n  \"format\": \"sluice-catalog/1\",\n  \"rules\": {\"r\": {\"bandwidth\": \"fast\"}}\n}", "line 3, column"},
		{"unknown field", `{"format": "sluice-catalog/1", "colour": 1}`, `unknown field "colour"`},
		{"format", `{"format": "other/9"}`, `format "other/9"`},
		{"dangling pool", `{"format": "sluice-catalog/1", "users": {"u": {"resource_pool": "nope"}}}`, `resource pool "nope" does not exist`},
		{"dangling rule", `{"format": "sluice-catalog/1", "pools": {"p": {"weight": 1, "network_priority": "normal", "except_rule": ["nope"]}}}`, `except rule "nope" does not exist`},
		{"bad rule", `{"format": "sluice-catalog/1", "rules": {"r": {"bandwidth": -1, "elapsedtime": -1, "action": "abort"}}}`, "no threshold"},
		{"bad setting", `{"format": "sluice-catalog/1", "settings": {"network_control": "sometimes"}}`, "setting network_control"},
		{"unknown setting", `{"format": "sluice-catalog/1", "settings": {"x": "1"}}`, `unknown setting "x"`},
		{"trailing", `{"format": "sluice-catalog/1"} {}`, "unexpected data after the catalog"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "catalog.json")
		if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := NewManager(ManagerOptions{CatalogPath: path})
		if err == nil {
			m.Close()
			t.Errorf("%s: NewManager succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q does not name the file and %q", tt.name, err, tt.want)
		}
	}
	// A minimal file is valid: missing parts take their defaults.
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(`{"format": "sluice-catalog/1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, ManagerOptions{CatalogPath: path})
	if m.Service().Catalog().Links[DefaultLink] == nil || m.Service().Catalog().Settings != catalog.DefaultSettings() {
		t.Errorf("minimal catalog = %+v", m.Service().Catalog())
	}
}

func TestCatalogSaveFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "catalog.json")
	m := newTestManager(t, ManagerOptions{CatalogPath: path})
	mustExec(t, m, "CREATE RESOURCE POOL p")
	before, v := m.Service().Catalog(), m.Runtime().Version()
	// Make the directory unusable: the next change cannot be saved.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	e := execErr(t, m, "CREATE RESOURCE POOL q")
	if e.Code != sqlstate.IOError || !strings.Contains(e.Detail, path) {
		t.Errorf("got %+v", e)
	}
	if m.Service().Catalog() != before || m.Runtime().Version() != v {
		t.Error("a change that could not be saved was applied")
	}
	// A catalog path in a missing directory fails at start.
	if _, err := NewManager(ManagerOptions{CatalogPath: filepath.Join(dir, "x", "c.json")}); err == nil {
		t.Error("NewManager with an unwritable catalog path succeeded")
	}
	var de *ddl.Error
	if errors.As(error(e), &de) && de.Position != 0 {
		t.Errorf("position %d", de.Position)
	}
}

// racingStore is a store another writer changes: the first Save after
// other is set fails with ErrConflict, and Load then returns other.
type racingStore struct {
	store.Memory
	other *Catalog
	saved int
}

func (s *racingStore) Load(ctx context.Context) (*Catalog, store.Revision, error) {
	if s.other != nil {
		return s.other, 100, nil
	}
	return s.Memory.Load(ctx)
}

func (s *racingStore) Save(ctx context.Context, c *Catalog, expected store.Revision) (store.Revision, error) {
	if s.other != nil && expected != 100 {
		return 0, store.ErrConflict
	}
	s.saved++
	return expected + 1, nil
}

// TestStoreConflict: a change refused because another writer saved first
// is retried on the catalog that writer stored, keeping both changes.
func TestStoreConflict(t *testing.T) {
	st := &racingStore{}
	m := newTestManager(t, ManagerOptions{Store: st})
	other := m.Service().Catalog().Clone()
	other.Links["theirs"] = &LinkDef{}
	st.other = other
	v := m.Runtime().Version()
	mustExec(t, m, "CREATE LINK ours")
	c := m.Service().Catalog()
	if c.Links["theirs"] == nil || c.Links["ours"] == nil || m.Runtime().Link("theirs") == nil {
		t.Fatalf("after the retried change: links %v", catalog.SortedKeys(c.Links))
	}
	if st.saved != 2 || m.Runtime().Version() <= v {
		t.Errorf("saved %d times, version %d -> %d", st.saved, v, m.Runtime().Version())
	}
}

// TestIdleInTransactionOption: idle_in_transaction takes seconds or a
// time with its unit, 0, -1 and DEFAULT unset it, and a negative time is
// refused.
func TestIdleInTransactionOption(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	for _, c := range []struct {
		set  string
		want time.Duration
	}{
		{"30", 30 * time.Second}, {"'500ms'", 500 * time.Millisecond}, {"0", 0}, {"'1.5s'", 1500 * time.Millisecond}, {"-1", 0}, {"DEFAULT", 0},
	} {
		mustExec(t, m, "CREATE RESOURCE POOL IF NOT EXISTS iit WITH (active_statements=1); ALTER RESOURCE POOL iit WITH (idle_in_transaction="+c.set+")")
		if got := m.Service().Catalog().Pools["iit"].IdleInTransaction; got != c.want {
			t.Errorf("idle_in_transaction=%s: %v, want %v", c.set, got, c.want)
		}
	}
	if _, err := m.Service().Exec(context.Background(), "ALTER RESOURCE POOL iit WITH (idle_in_transaction='-5s')"); err == nil {
		t.Error("idle_in_transaction='-5s' accepted")
	}
}

package views

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
)

func gaussCatalog() *catalog.Catalog {
	cat := catalog.New()
	cat.Rules["bw"] = &catalog.Rule{Bandwidth: 128, ElapsedTime: catalog.Unlimited, Action: catalog.Penalty}
	cat.Rules["slow"] = &catalog.Rule{Bandwidth: catalog.Unlimited, ElapsedTime: 60, Action: catalog.Abort}
	cat.Pools["rp1"] = &catalog.Pool{ExceptRules: []string{"bw", "slow"}, Weight: 2}
	cat.Pools["rp0"] = &catalog.Pool{Weight: 1}
	cat.Users["alice"] = &catalog.UserDef{Pool: "rp1"}
	return cat
}

// column returns the values of column name of t.
func column(t *testing.T, tab Table, name string) []string {
	t.Helper()
	i := indexOf(tab.Columns, name)
	if i < 0 {
		t.Fatalf("no column %s in %v", name, tab.Columns)
	}
	var out []string
	for _, r := range tab.Rows {
		out = append(out, r[i])
	}
	return out
}

func TestResourcePool(t *testing.T) {
	tab := ResourcePool(gaussCatalog())
	if len(tab.Types) != len(tab.Columns) || tab.Types[indexOf(tab.Columns, "weight")] != Integer {
		t.Fatalf("types %v of %v", tab.Types, tab.Columns)
	}
	for col, want := range map[string][]string{
		"respool_name": {"rp0", "rp1"}, "except_rule": {"", "bw,slow"}, "weight": {"1", "2"}, "mem_percent": {"", ""},
	} {
		if got := column(t, tab, col); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %q, want %q", col, got, want)
		}
	}
}

func TestRespoolExceptionInfo(t *testing.T) {
	tab := RespoolExceptionInfo(gaussCatalog())
	want := [][]string{
		{"rp1", "bw", "bandwidth", "128"},
		{"rp1", "bw", "action", "penalty"},
		{"rp1", "slow", "elapsedtime", "60"},
		{"rp1", "slow", "action", "abort"},
	}
	if !reflect.DeepEqual(tab.Rows, want) {
		t.Errorf("rows %q, want %q", tab.Rows, want)
	}
}

func TestTotalUserResourceInfo(t *testing.T) {
	reg := session.NewRegistry(session.Options{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var stmts []Statement
	for i, u := range []string{"bob", "bob", "alice"} {
		s := reg.Open(session.Info{Route: "pg"}, now)
		s.SetIdentity(u, "db", "")
		s.AddUp(100 * (i + 1))
		s.AddDown(1000 * (i + 1))
		st := s.Begin("SELECT 1", now)
		stmts = append(stmts, Statement{Session: s, Snapshot: st.Snapshot(), Bandwidth: 1.5e6})
	}
	tab := TotalUserResourceInfo(gaussCatalog(), reg.Sessions(), stmts)
	for col, want := range map[string][]string{
		"username": {"alice", "bob"}, "send_bytes": {"300", "300"}, "recv_bytes": {"3000", "3000"},
		"bandwidth_mbps": {"1.50", "3.00"}, "used_memory": {"", ""},
	} {
		if got := column(t, tab, col); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %q, want %q", col, got, want)
		}
	}
}

func TestNewTable(t *testing.T) {
	tab := newTable("a, b int, c real")
	if !reflect.DeepEqual(tab.Columns, []string{"a", "b", "c"}) || !reflect.DeepEqual(tab.Types, []Type{Text, Integer, Real}) {
		t.Errorf("newTable: %v %v", tab.Columns, tab.Types)
	}
	if (&Table{Columns: []string{"x"}}).TypeOf(0) != Text {
		t.Error("a table without Types is text")
	}
}

package fleet

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/wlm/views"
)

func table(cols []string, types []views.Type, rows ...[]string) views.Table {
	return views.Table{Columns: cols, Types: types, Rows: rows}
}

// TestMerge: rows gain the instance column and come by instance name;
// a part that failed or lacks the view adds nothing; another version's
// columns are matched by name, a missing one left empty.
func TestMerge(t *testing.T) {
	cols := []string{"id", "user"}
	typ := []views.Type{views.Integer, views.Text}
	tests := []struct {
		name  string
		parts []Part
		want  views.Table
		ok    bool
	}{
		{
			name: "by instance name, own order kept",
			parts: []Part{
				{Instance: "b", Tables: map[string]views.Table{"sessions": table(cols, typ, []string{"2", "u"}, []string{"1", "v"})}},
				{Instance: "a", Tables: map[string]views.Table{"sessions": table(cols, typ, []string{"1", "w"})}},
			},
			want: table([]string{"instance", "id", "user"}, []views.Type{views.Text, views.Integer, views.Text},
				[]string{"a", "1", "w"}, []string{"b", "2", "u"}, []string{"b", "1", "v"}),
			ok: true,
		},
		{
			name: "a failed part adds nothing",
			parts: []Part{
				{Instance: "a", Tables: map[string]views.Table{"sessions": table(cols, typ, []string{"1", "w"})}},
				{Instance: "c", Err: errors.New("timeout"), Tables: map[string]views.Table{"sessions": table(cols, typ, []string{"9", "x"})}},
			},
			want: table([]string{"instance", "id", "user"}, []views.Type{views.Text, views.Integer, views.Text}, []string{"a", "1", "w"}),
			ok:   true,
		},
		{
			name: "another version's columns by name",
			parts: []Part{
				{Instance: "a", Tables: map[string]views.Table{"sessions": table(cols, typ)}},
				{Instance: "b", Tables: map[string]views.Table{"sessions": table([]string{"user", "extra"}, nil, []string{"u", "e"})}},
			},
			want: table([]string{"instance", "id", "user"}, []views.Type{views.Text, views.Integer, views.Text}, []string{"b", "", "u"}),
			ok:   true,
		},
		{
			name:  "no part has the view",
			parts: []Part{{Instance: "a", Tables: map[string]views.Table{}}, {Instance: "b", Err: errors.New("down")}},
			ok:    false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Merge("sessions", tt.parts)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Merge = %+v\nwant    %+v", got, tt.want)
			}
		})
	}
}

// TestNotices: one notice per part that failed, naming it, in order.
func TestNotices(t *testing.T) {
	got := Notices([]Part{{Instance: "a"}, {Instance: "d", Err: errors.New("x")}, {Instance: "c", Err: errors.New("y")}})
	if len(got) != 2 || !strings.HasPrefix(got[0], "instance c did not answer (y)") || !strings.HasPrefix(got[1], "instance d did not answer (x)") {
		t.Fatalf("Notices = %q", got)
	}
	if got := Notices([]Part{{Instance: "a"}}); got != nil {
		t.Fatalf("Notices of answering parts = %q, want none", got)
	}
}

// TestWireRoundTrip: a table survives its JSON form, types included.
func TestWireRoundTrip(t *testing.T) {
	in := table([]string{"a", "b", "c"}, []views.Type{views.Integer, views.Real, views.Text}, []string{"1", "", "x"})
	if got := FromWire(ToWire(in)); !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip = %+v, want %+v", got, in)
	}
	if w := ToWire(views.Table{Columns: []string{"a"}}); w.Rows == nil || w.Types[0] != "TEXT" {
		t.Fatalf("ToWire of an empty table = %+v, want [] rows and TEXT", w)
	}
}

// TestInstancesTable: routes joined, NULL lease TTL when unknown, the
// stale time shown only when stale.
func TestInstancesTable(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ttl := 7.0
	in := []Instance{
		{Member: Member{Name: "a", Version: "v1", Routes: []Route{{"pg", "127.0.0.1:1", "postgres"}, {"my", "127.0.0.1:2", "mysql"}}, Revision: 42, StartedAt: at}, Self: true, LastSeen: at},
		{Member: Member{Name: "b", StaleSince: &at, StartedAt: at}, TTLLeft: &ttl, LastSeen: at, Stale: true},
	}
	tab := InstancesTable(in)
	col := func(r int, name string) string {
		for i, c := range tab.Columns {
			if c == name {
				return tab.Rows[r][i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	checks := []struct {
		row       int
		col, want string
	}{
		{0, "routes", "pg postgres 127.0.0.1:1, my mysql 127.0.0.1:2"},
		{0, "self", "yes"},
		{0, "catalog_revision", "42"},
		{0, "lease_ttl_left", ""},
		{0, "catalog_stale", "no"},
		{0, "catalog_stale_since", ""},
		{1, "lease_ttl_left", "7"},
		{1, "catalog_stale", "yes"},
		{1, "catalog_stale_since", "2026-01-02T03:04:05Z"},
	}
	for _, c := range checks {
		if got := col(c.row, c.col); got != c.want {
			t.Errorf("row %d %s = %q, want %q", c.row, c.col, got, c.want)
		}
	}
	if len(tab.Types) != len(tab.Columns) {
		t.Fatalf("%d types for %d columns", len(tab.Types), len(tab.Columns))
	}
}

// TestCheckName: names that cannot be a key part are refused.
func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"a": true, "db-1:6433": true, "": false, "a/b": false, "a\nb": false} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}

// TestClusterViews: every view has a cluster form, and the GaussDB
// session views their pgxc_ names.
func TestClusterViews(t *testing.T) {
	for _, n := range views.Names {
		if ClusterViews["cluster_"+n] != n {
			t.Errorf("no cluster_%s", n)
		}
	}
	if ClusterViews["pgxc_wlm_session_statistics"] != "gs_wlm_session_statistics" {
		t.Error("no pgxc_wlm_session_statistics")
	}
}

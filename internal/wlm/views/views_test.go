package views

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

func TestClass(t *testing.T) {
	cat := catalog.New()
	cat.Pools["vip"] = &catalog.Pool{Priority: link.High}
	tests := []struct {
		pool      string
		penalized bool
		want      link.Class
	}{
		{"vip", false, link.High},
		{"vip", true, link.Low},
		{"", false, link.Normal},
		{"gone", false, link.Normal},
	}
	for _, tt := range tests {
		if got := Class(cat, tt.pool, tt.penalized); got != tt.want {
			t.Errorf("Class(%q, %v) = %v, want %v", tt.pool, tt.penalized, got, tt.want)
		}
	}
}

func TestElapsed(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Second)
	tests := []struct {
		name string
		snap session.Snapshot
		want time.Duration
	}{
		{"running", session.Snapshot{Started: t0}, 10 * time.Second},
		{"ended", session.Snapshot{Started: t0, Ended: t0.Add(3 * time.Second)}, 3 * time.Second},
	}
	for _, tt := range tests {
		if got := Elapsed(&tt.snap, now); got != tt.want {
			t.Errorf("%s: Elapsed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRoutesByLink(t *testing.T) {
	got := RoutesByLink([]Route{{Name: "b", Link: "wan"}, {Name: "a", Link: "wan"}, {Name: "c", Link: "default"}})
	want := map[string][]string{"wan": {"a", "b"}, "default": {"c"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RoutesByLink = %v, want %v", got, want)
	}
}

func TestProject(t *testing.T) {
	tab := Table{Columns: []string{"a", "b"}, Types: []Type{Integer, Text}, Rows: [][]string{{"1", "2"}, {"3", "4"}}}
	tests := []struct {
		sql      string
		want     Table
		wantCode string
	}{
		{"SELECT * FROM v", tab, ""},
		{"SELECT b AS x, a FROM v LIMIT 1", Table{Columns: []string{"x", "a"}, Types: []Type{Text, Integer}, Rows: [][]string{{"2", "1"}}}, ""},
		{"SELECT a FROM v LIMIT 0", Table{Columns: []string{"a"}, Types: []Type{Integer}, Rows: [][]string{}}, ""},
		{"SELECT c FROM v", Table{}, sqlstate.UndefinedColumn},
		{"SELECT version() FROM v", Table{}, sqlstate.FeatureNotSupported},
	}
	for _, tt := range tests {
		st, err := ddl.ParseOne(tt.sql)
		if err != nil {
			t.Fatalf("%s: %v", tt.sql, err)
		}
		got, err := Project(tab, st.(*ddl.Select))
		if tt.wantCode != "" {
			if e, ok := err.(*ddl.Error); !ok || e.Code != tt.wantCode {
				t.Errorf("%s: error %v, want SQLSTATE %s", tt.sql, err, tt.wantCode)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v, %v; want %v", tt.sql, got, err, tt.want)
		}
	}
}

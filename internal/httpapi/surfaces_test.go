package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// samples holds a value for every option of every catalog object, as
// the console takes it. A new option without a sample fails
// TestEveryOptionOnEverySurface.
var samples = map[string]string{
	"capacity": "'50MB'", "queue_size": "'1MB'", "max_active_statements": "3",
	"delay": "'5ms'", "jitter": "'1ms'", "distribution": "'normal'", "correlation": "0.25", "rate": "'10MB'",
	"burst": "'64KiB'", "loss": "'gemodel 1% 25%'", "rto": "'200ms'", "window": "'1MiB'", "seed": "7",
	"except_rule": "'r0'", "weight": "3", "network_priority": "'low'", "active_statements": "2",
	"queue_timeout": "'5s'", "idle_in_transaction": "'30s'",
	"bandwidth": "128", "elapsedtime": "60", "blocktime": "2.5", "action": "'abort'",
}

// TestEveryOptionOnEverySurface sets each option of each catalog
// object (links, resource pools, exception rules) alone and looks for it
// on every surface that shows the object: the console's view, the HTTP
// API's JSON and, for rules and links, the dashboard's lists. An option
// a surface does not show fails the test, naming both.
func TestEveryOptionOnEverySurface(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	if _, err := s.mgr.Service().Exec(ctx, "CREATE EXCEPT RULE r0 WITH (bandwidth=1, action='penalty')"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		kind      ddl.Kind
		create    string // the CREATE statement: %s the name, %s the option
		view, api string
		dashboard bool
	}{
		{ddl.Link, "CREATE LINK %s WITH (%s)", "links", "links", true},
		{ddl.Pool, "CREATE RESOURCE POOL %s WITH (%s)", "pools", "pools", false},
		{ddl.Rule, "CREATE EXCEPT RULE %s WITH (%s, action='penalty')", "rules", "rules", true},
	} {
		for i, opt := range catalog.OptionNames(k.kind) {
			v, ok := samples[opt]
			if !ok {
				t.Errorf("%s option %s has no sample value here", k.view, opt)
				continue
			}
			name := fmt.Sprintf("s_%s_%d", k.view, i)
			stmt := fmt.Sprintf(k.create, name, opt+"="+v)
			if k.kind == ddl.Rule && opt == "action" {
				stmt = fmt.Sprintf("CREATE EXCEPT RULE %s WITH (bandwidth=1, action=%s)", name, v)
			}
			if _, err := s.mgr.Service().Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			tables := s.mgr.Views().ViewTables([]string{k.view})
			if !shows(tableRow(tables[k.view], name), opt) {
				t.Errorf("%s: the console's view %s does not show %s", stmt, k.view, opt)
			}
			code, body := s.do(t, "GET", "/api/"+k.api+"/"+name, nil)
			var obj map[string]any
			if code != 200 || json.Unmarshal(body, &obj) != nil {
				t.Fatalf("GET /api/%s/%s: %d %s", k.api, name, code, body)
			}
			if _, ok := obj[opt]; !ok {
				t.Errorf("%s: GET /api/%s/%s does not show %s: %s", stmt, k.api, name, opt, body)
			}
			if k.dashboard && !shows(dashboardRow(t, s, k.view, name), opt) {
				t.Errorf("%s: the dashboard's %s do not show %s", stmt, k.view, opt)
			}
		}
	}
}

// shows reports whether row, by column, shows option opt: a column of
// its own, or an entry of the emulation column's text.
func shows(row map[string]string, opt string) bool {
	if _, ok := row[opt]; ok {
		return true
	}
	for _, f := range strings.Fields(row["emulation"]) {
		if strings.HasPrefix(f, opt+"=") {
			return true
		}
	}
	return false
}

// tableRow returns the row of t whose first column is name, by column.
func tableRow(t views.Table, name string) map[string]string {
	for _, r := range t.Rows {
		if r[0] == name {
			row := map[string]string{}
			for j, c := range t.Columns {
				row[c] = r[j]
			}
			return row
		}
	}
	return nil
}

// dashboardRow returns the entry named name of the dashboard snapshot's
// list (rules or links), by field.
func dashboardRow(t *testing.T, s *stack, list, name string) map[string]string {
	t.Helper()
	code, body := s.do(t, "GET", "/api/snapshot", nil)
	var snap map[string][]map[string]any
	if code != 200 {
		t.Fatalf("GET /api/snapshot: %d %s", code, body)
	}
	_ = json.Unmarshal(body, &snap)
	for _, e := range snap[list] {
		if e["name"] == name {
			row := map[string]string{}
			for k, v := range e {
				row[k] = fmt.Sprint(v)
			}
			return row
		}
	}
	return nil
}

package wlm

import (
	"testing"

	"github.com/sluicelab/sluice/internal/wlm/views"
)

// TestViewTables: every view SELECT reads is built, each column typed,
// and unknown names are skipped.
func TestViewTables(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "CREATE EXCEPT RULE r WITH (elapsedtime=5); CREATE RESOURCE POOL p WITH (except_rule='r')")
	got := m.Views().ViewTables(append([]string{"nowhere"}, views.Names...))
	if len(got) != len(views.Names) {
		t.Errorf("%d tables for %d views", len(got), len(views.Names))
	}
	for _, n := range views.Names {
		tab, ok := got[n]
		if !ok || len(tab.Columns) == 0 || len(tab.Types) != len(tab.Columns) {
			t.Errorf("%s: %v columns %v types %v", n, ok, tab.Columns, tab.Types)
		}
	}
	if rows := got["gs_respool_exception_info"].Rows; len(rows) != 2 {
		t.Errorf("gs_respool_exception_info: %q, want elapsedtime and action of r", rows)
	}
}

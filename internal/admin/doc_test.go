package admin

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// consoleDoc is the console reference, relative to this package.
const consoleDoc = "../../doc/console.md"

// TestEveryViewDocumented fails when a view, list or setting the console
// exposes is missing from doc/console.md: every view SQL reads (the
// views, GaussDB's, the fleet's cluster_ and pgxc_ views, instances),
// every SHOW list and SHOW of the console's own (CONFIG, INSTANCES),
// every catalog setting and every client parameter SET accepts.
func TestEveryViewDocumented(t *testing.T) {
	doc := testenv.ReadDoc(t, consoleDoc)
	var want []string
	code := func(names ...string) { want = append(want, names...) }
	code(views.Names...)
	code(fleet.InstancesView)
	for name := range fleet.ClusterViews {
		code(name)
	}
	for _, l := range views.Lists {
		code("SHOW " + strings.ToUpper(l))
	}
	code("SHOW CONFIG", "SHOW INSTANCES")
	code(catalog.SettingNames()...)
	for p := range clientParams {
		code(p)
	}
	slices.Sort(want)
	testenv.CheckDocumented(t, consoleDoc, doc, want, "`", "views, lists and settings of the console")
}

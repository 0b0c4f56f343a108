package catalog

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/testenv"
)

// consoleDoc is the console reference, relative to this package.
const consoleDoc = "../../../doc/console.md"

// TestEveryOptionDocumented fails when an option of CREATE/ALTER LINK,
// RESOURCE POOL, EXCEPT RULE or ALTER ROUTE is missing from the Options
// section of doc/console.md, where each is written as `name`.
func TestEveryOptionDocumented(t *testing.T) {
	doc := testenv.ReadDoc(t, consoleDoc)
	if i := strings.Index(doc, "\n## Options\n"); i >= 0 {
		doc = doc[i:]
		if j := strings.Index(doc[1:], "\n## "); j >= 0 {
			doc = doc[:j+1]
		}
	} else {
		t.Fatalf("%s has no section ## Options", consoleDoc)
	}
	var opts []string
	for _, l := range [][]string{emulationOptions, linkOptions, poolOptions, ruleOptions, routeOptions} {
		opts = append(opts, l...)
	}
	slices.Sort(opts)
	opts = slices.Compact(opts)
	testenv.CheckDocumented(t, "the Options section of "+consoleDoc, doc, opts, "`", "options")
}

package catalog

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// consoleDoc is the console reference, relative to this package.
const consoleDoc = "../../../doc/console.md"

// TestEveryOptionDocumented fails when an option of CREATE/ALTER LINK,
// RESOURCE POOL, EXCEPT RULE or ALTER ROUTE is missing from the Options
// section of doc/console.md, where each is written as `name`.
func TestEveryOptionDocumented(t *testing.T) {
	data, err := os.ReadFile(consoleDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
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
	var missing []string
	for _, o := range opts {
		if !strings.Contains(doc, "`"+o+"`") {
			missing = append(missing, o)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the Options section of %s does not document these options:\n  %s",
			consoleDoc, strings.Join(missing, "\n  "))
	}
}

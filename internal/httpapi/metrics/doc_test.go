package metrics_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicelab/sluice/internal/httpapi/metrics"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm/wlmtest"
)

// metricsDoc is the metrics reference, relative to this package.
const metricsDoc = "../../../doc/metrics.md"

// fqName reads a metric's name from its descriptor's String, the only
// place a prometheus.Desc shows it.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// TestEveryMetricDocumented fails when a metric of the registry /metrics
// serves is missing from doc/metrics.md. It builds the registry as
// sluice serve does, with the Go runtime and process collectors, and
// reads every descriptor the registry holds, so metrics that have no
// series yet (a histogram before its first observation, the fleet's
// budget gauges without a fleet) count too. Each sluice_ metric is
// written as code beginning with its name (`sluice_sessions{route,...}`);
// the Go runtime's and process's collectors as `go_*` and `process_*`.
func TestEveryMetricDocumented(t *testing.T) {
	doc := testenv.ReadDoc(t, metricsDoc)
	e := wlmtest.New(t, "")
	m, err := metrics.New(metrics.Options{Catalog: e.Manager.Service(), Runtime: e.Manager.Runtime(), Rules: e.Manager.Rules(), Admission: e.Manager.Admission()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ch := make(chan *prometheus.Desc)
	go func() {
		m.Registry().Describe(ch)
		close(ch)
	}()
	var names []string
	for d := range ch {
		sub := fqName.FindStringSubmatch(d.String())
		if sub == nil {
			t.Fatalf("no name in descriptor %s", d)
		}
		names = append(names, sub[1])
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var missing []string
	sluice := 0
	for _, n := range names {
		want := "`" + n
		for _, p := range []string{"go_", "process_"} {
			if strings.HasPrefix(n, p) {
				want = "`" + p + "*`"
			}
		}
		if strings.HasPrefix(n, "sluice_") {
			sluice++
			// The whole name: followed by its labels or the end of the code.
			if !strings.Contains(doc, want+"{") && !strings.Contains(doc, want+"`") {
				missing = append(missing, n)
			}
			continue
		}
		if !strings.Contains(doc, want) {
			missing = append(missing, n)
		}
	}
	if sluice < 30 {
		t.Fatalf("the registry describes only %d sluice_ metrics: %v", sluice, names)
	}
	if len(missing) > 0 {
		t.Errorf("%s does not document these metrics (write each as `name{labels}` in a table):\n  %s",
			metricsDoc, strings.Join(missing, "\n  "))
	}
}

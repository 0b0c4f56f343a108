package bench

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/testenv"
)

// helpLine is one option line of `sysbench WORKLOAD help`: the spec, the
// column its description starts at, and the default in brackets.
type helpLine struct {
	spec   string
	column int
	def    string
}

var helpLineRE = regexp.MustCompile(`^  (--\S+)( +)(.*?)(?: \[([^\]]*)\])?$`)

// parseWorkloadHelp reads the option lines of a workload's help, by name.
func parseWorkloadHelp(t *testing.T, out string) map[string]helpLine {
	t.Helper()
	lines := map[string]helpLine{}
	for _, l := range strings.Split(out, "\n") {
		m := helpLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(m[1], "--"), "=")
		name = strings.TrimSuffix(name, "[")
		lines[name] = helpLine{spec: m[1], column: 2 + len(m[1]) + len(m[2]), def: m[4]}
	}
	return lines
}

// TestWorkloadHelpMatchesSysbench compares `sluice bench WORKLOAD help`
// with the installed sysbench's: the same options (less pgsql_variant,
// which is not implemented), spelt the same, with the same defaults, in
// the same column, and the header line "WORKLOAD options:".
func TestWorkloadHelpMatchesSysbench(t *testing.T) {
	sysbench := testenv.Program(t, "sysbench")
	for _, wl := range workloadNames() {
		t.Run(wl, func(t *testing.T) {
			real, _ := exec.Command(sysbench, wl, "help").CombinedOutput()
			var ours, errs strings.Builder
			code := Main(t.Context(), []string{wl, "help"}, &ours, &errs)
			if wl == "bulk_insert" {
				want := "'bulk_insert' test does not implement the 'help' command."
				if !strings.Contains(string(real), want) || code != ExitRuntime || strings.TrimSpace(errs.String()) != want {
					t.Fatalf("sysbench says %q; sluice exits %d with %q", real, code, errs.String())
				}
				return
			}
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errs.String())
			}
			header := wl + " options:\n"
			if !strings.Contains(string(real), header) || !strings.Contains(ours.String(), header) {
				t.Fatalf("no %q in both:\nsysbench:\n%s\nsluice:\n%s", header, real, ours.String())
			}
			want := parseWorkloadHelp(t, string(real))
			delete(want, "pgsql_variant")
			got := parseWorkloadHelp(t, ours.String())
			if len(want) == 0 {
				t.Fatalf("no options in sysbench's help:\n%s", real)
			}
			for name, w := range want {
				g, ok := got[name]
				switch {
				case !ok:
					t.Errorf("--%s missing", name)
				case g.spec != w.spec || g.def != w.def || g.column != w.column:
					t.Errorf("--%s: sluice %+v, sysbench %+v", name, g, w)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("--%s is not in sysbench's help", name)
				}
			}
		})
	}
}

// TestVersionLineParsesAsSysbench reads the version from the installed
// sysbench's --version and from VersionLine the way scripts do.
func TestVersionLineParsesAsSysbench(t *testing.T) {
	sysbench := testenv.Program(t, "sysbench")
	out, err := exec.Command(sysbench, "--version").Output()
	if err != nil {
		t.Fatalf("sysbench --version: %v", err)
	}
	re := regexp.MustCompile(`^sysbench ([0-9]+\.[0-9]+\.[0-9]+)`)
	real := re.FindStringSubmatch(string(out))
	ours := re.FindStringSubmatch(VersionLine("v1.2.3"))
	if real == nil || ours == nil || real[1] != ours[1] {
		t.Fatalf("sysbench %q gives %q; VersionLine gives %q", out, real, ours)
	}
	if f := strings.Fields(VersionLine("v1.2.3")); f[0] != "sysbench" || !strings.Contains(VersionLine("v1.2.3"), "sluice v1.2.3") {
		t.Fatalf("VersionLine = %q", VersionLine("v1.2.3"))
	}
}

func TestVersionRequested(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"--threads=2", "oltp_read_write", "--version"}, true},
		{[]string{"oltp_read_write", "run"}, false},
		{[]string{"--", "--version"}, false},
		{[]string{"--versions"}, false},
	}
	for _, tt := range tests {
		if got := VersionRequested(tt.args); got != tt.want {
			t.Errorf("VersionRequested(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SysbenchVersion is the sysbench release whose command line, defaults,
// statements and report the benchmark reproduces.
const SysbenchVersion = "1.0.20"

// VersionLine is what `sluice bench --version` prints, as `sysbench
// --version` prints "sysbench 1.0.20": the same first two words' shape,
// so scripts that read the version with a pattern such as
// `sysbench ([0-9.]+)` still find 1.0.20, and the sluice version after it.
func VersionLine(sluiceVersion string) string {
	return fmt.Sprintf("sysbench %s-compatible (sluice %s)", SysbenchVersion, sluiceVersion)
}

// VersionRequested reports whether args (everything after "bench") ask
// for the version: --version anywhere before a "--", as sysbench takes it.
func VersionRequested(args []string) bool { return flagGiven(args, "--version") }

// flagGiven reports whether args hold flag before a "--".
func flagGiven(args []string, flag string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == flag {
			return true
		}
	}
	return false
}

// workloadOptions returns the options `WORKLOAD help` lists, sorted, as
// sysbench spells them; ok is false for a workload that has no help
// (bulk_insert, as in sysbench, whose only input is --threads).
func workloadOptions(workload string) (names []string, ok bool) {
	// The options of oltp_common.lua, which every OLTP workload and
	// select_random_* script lists in its help (sysbench prints the whole
	// set whatever the workload uses). pgsql_variant is left out: its
	// only value is redshift, which the benchmark does not implement.
	names = []string{
		"auto_inc", "create_secondary", "delete_inserts", "distinct_ranges",
		"index_updates", "mysql_storage_engine", "non_index_updates",
		"order_ranges", "point_selects", "range_selects", "range_size",
		"secondary", "simple_ranges", "skip_trx", "sum_ranges", "table_size",
		"tables",
	}
	switch workload {
	case "bulk_insert":
		return nil, false
	case "select_random_points":
		names = append(names, "random_points")
	case "select_random_ranges":
		names = append(names, "delta", "number_of_ranges")
	}
	slices.Sort(names)
	return names, true
}

// writeHelp answers a help request of the command line args, whose
// workload (possibly "") ParseArgs returned: the workload's options for
// `WORKLOAD help`, the general usage for --help or no workload. It returns
// the exit status: 1, with sysbench's message on stderr, for a workload
// without help. --help with a workload prints the general usage, as
// `sysbench oltp_read_write --help` does.
func writeHelp(stdout, stderr io.Writer, args []string, workload string) int {
	if workload == "" || flagGiven(args, "--help") {
		writeUsage(stdout)
		return ExitOK
	}
	if !writeWorkloadHelp(stdout, workload) {
		fmt.Fprintf(stderr, "'%s' test does not implement the 'help' command.\n", workload)
		return ExitRuntime
	}
	return ExitOK
}

// writeWorkloadHelp prints the options of workload in the layout of
// `sysbench oltp_read_write help`: a header, "NAME options:", then one
// line per option, "--name=N", "--name=STRING" or "--name[=on|off]"
// padded to one column, its description and its default in brackets. It
// reports false (and prints nothing) for a workload without help.
func writeWorkloadHelp(w io.Writer, workload string) bool {
	names, ok := workloadOptions(workload)
	if !ok {
		return false
	}
	o := DefaultOptions()
	byName := make(map[string]optDef)
	for _, d := range optionTable(&o) {
		byName[strings.ReplaceAll(d.name, "-", "_")] = d
	}
	type line struct{ spec, text string }
	lines := make([]line, 0, len(names))
	width := 0
	for _, n := range names {
		d := byName[n]
		spec := "--" + n
		if d.isBool {
			spec += "[=on|off]"
		} else {
			spec += "=" + d.arg
		}
		width = max(width, len(spec))
		lines = append(lines, line{spec, fmt.Sprintf("%s [%s]", capitalize(d.help), d.def)})
	}
	fmt.Fprintf(w, "sluice bench (sysbench %s compatible)\n\n%s options:\n", SysbenchVersion, workload)
	for _, l := range lines {
		fmt.Fprintf(w, "  %-*s %s\n", width, l.spec, l.text)
	}
	fmt.Fprintln(w)
	return true
}

// capitalize upper-cases the first letter of s, as sysbench's option
// descriptions begin.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

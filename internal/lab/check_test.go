package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/testenv"
)

// The helpers here check a written report: its files, that report.md's
// tables carry report.json's figures, and that the charts are what they
// claim to be.

// chart is what checkChart read from an SVG file.
type chart struct {
	root   *testenv.SVGNode
	xLabel string
	yLabel string
	legend []string
	// series maps a series name to its points in pixels.
	series map[string][][2]float64
}

// readChart parses an SVG chart and checks its skeleton: the SVG
// namespace, both axes with a line, ticks and a label, a legend with one
// entry per series, and one polyline per series.
func readChart(t *testing.T, path string) *chart {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var root testenv.SVGNode
	if err := xml.Unmarshal(data, &root); err != nil {
		t.Fatalf("%s: not XML: %v", path, err)
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("%s: root %v, want svg in the SVG namespace", path, root.XMLName)
	}
	c := &chart{root: &root, series: map[string][][2]float64{}}
	for _, axis := range []string{"axis x", "axis y"} {
		g := root.Find(axis)
		if len(g) != 1 {
			t.Fatalf("%s: %d %q groups", path, len(g), axis)
		}
		if len(g[0].Find("line")) != 1 || len(g[0].Find("tick")) < 2 {
			t.Fatalf("%s: %s lacks its line or ticks", path, axis)
		}
		labels := g[0].Find("label")
		if len(labels) != 1 || labels[0].Text == "" {
			t.Fatalf("%s: %s has no label", path, axis)
		}
		if axis == "axis x" {
			c.xLabel = labels[0].Text
		} else {
			c.yLabel = labels[0].Text
		}
	}
	legend := root.Find("legend")
	if len(legend) != 1 {
		t.Fatalf("%s: %d legends", path, len(legend))
	}
	c.legend = legend[0].Texts()
	for _, s := range root.Find("series") {
		var pts [][2]float64
		for _, p := range strings.Fields(s.Find("line")[0].Attr("points")) {
			a, b, _ := strings.Cut(p, ",")
			x, err1 := strconv.ParseFloat(a, 64)
			y, err2 := strconv.ParseFloat(b, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: bad point %q", path, p)
			}
			pts = append(pts, [2]float64{x, y})
		}
		c.series[s.Attr("data-name")] = pts
	}
	if len(c.series) != len(c.legend) {
		t.Fatalf("%s: %d series but legend %q", path, len(c.series), c.legend)
	}
	for _, name := range c.legend {
		if _, ok := c.series[name]; !ok {
			t.Fatalf("%s: legend entry %q has no series", path, name)
		}
	}
	return c
}

// mdTableOf is mdTable, failing the test unless the table has want rows
// below its header.
func mdTableOf(t *testing.T, md, header string, want int) [][]string {
	t.Helper()
	rows := mdTable(t, md, header)
	if len(rows)-1 != want {
		t.Fatalf("table %q has %d rows, want %d", header, len(rows)-1, want)
	}
	return rows
}

// mdTable returns the Markdown table that follows the line starting
// with header, as rows of cells (header row first).
func mdTable(t *testing.T, md, header string) [][]string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(md))
	var rows [][]string
	in := false
	for sc.Scan() {
		line := sc.Text()
		if !in {
			if strings.HasPrefix(line, header) {
				in = true
			} else {
				continue
			}
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("no table with header %q in report.md", header)
	}
	return rows
}

// cellNum reads a table cell as a number, without its unit suffix.
func cellNum(t *testing.T, cell string) float64 {
	t.Helper()
	s := strings.TrimRight(cell, "x%")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cell %q is not a number", cell)
	}
	return v
}

// near reports whether a printed figure matches v to its printed
// precision.
func near(printed, v, precision float64) bool {
	return math.Abs(printed-v) <= precision/2+1e-9
}

// checkReportFiles checks that dir holds a complete, consistent report
// for rep and returns what report.json holds.
func checkReportFiles(t *testing.T, dir string, rep *Report) *Report {
	t.Helper()
	js, md := readReport(t, dir)
	if (js.Latency == nil) != (rep.Latency == nil) || (js.Flow == nil) != (rep.Flow == nil) || (js.Concurrency == nil) != (rep.Concurrency == nil) || (js.WhatIf == nil) != (rep.WhatIf == nil) {
		t.Fatal("report.json lacks an experiment the run made")
	}
	if !strings.Contains(md, "## Targets") || len(js.Targets) != 7 {
		t.Errorf("targets missing: %d in JSON", len(js.Targets))
	}

	if l := js.Latency; l != nil {
		rows := mdTableOf(t, md, "| added RTT (ms) | ping", len(l.Rows))
		for i, r := range l.Rows {
			cells := rows[i+1]
			checks := []struct {
				name      string
				cell      string
				v, prec   float64
				pctOfFrac bool
			}{
				{"rtt", cells[0], r.RTTMs, 0.001, false},
				{"ping", cells[1], r.PingMs, 0.01, false},
				{"tps", cells[2], r.TPS, 0.1, false},
				{"predicted", cells[3], r.PredictedTPS, 0.1, false},
				{"deviation", cells[4], 100 * r.Deviation, 0.1, true},
				{"qps", cells[5], r.QPS, 0.1, false},
				{"avg", cells[6], r.AvgMs, 0.01, false},
				{"p95", cells[7], r.P95Ms, 0.01, false},
				{"round trips", cells[8], r.RoundTrips, 0.1, false},
			}
			for _, c := range checks {
				if got := cellNum(t, c.cell); !near(got, c.v, c.prec) {
					t.Errorf("latency row %d %s: table %s, JSON %v", i, c.name, c.cell, c.v)
				}
			}
			switch {
			case r.Releases == 0 && cells[9] != "-":
				t.Errorf("latency row %d: release lateness %s with no delayed chunk", i, cells[9])
			case r.Releases > 0 && !near(cellNum(t, cells[9]), r.LateUs, 0.1):
				t.Errorf("latency row %d release late: table %s, JSON %v", i, cells[9], r.LateUs)
			}
			if r.PredictedTPS > 0 && !near(r.Deviation, r.TPS/r.PredictedTPS-1, 1e-9) {
				t.Errorf("row %d: deviation %v inconsistent with TPS %v / predicted %v", i, r.Deviation, r.TPS, r.PredictedTPS)
			}
		}
		if len(l.Prepare) > 0 {
			prep := mdTable(t, md, "| added RTT (ms) | prepare")
			for i, r := range l.Prepare {
				if !near(cellNum(t, prep[i+1][1]), r.Seconds, 0.01) {
					t.Errorf("prepare row %d: table %s, JSON %v", i, prep[i+1][1], r.Seconds)
				}
			}
		}
		c := readChart(t, filepath.Join(dir, FileTPSChart))
		if !strings.Contains(c.xLabel, "(ms)") || !strings.Contains(c.yLabel, "transactions/s") {
			t.Errorf("TPS chart axis labels %q, %q", c.xLabel, c.yLabel)
		}
		if len(c.series) != 2 || len(c.series["measured"]) != len(l.Rows) {
			t.Errorf("TPS chart series %v", c.legend)
		}
		if !strings.Contains(md, "("+FileTPSChart+")") {
			t.Error("report.md does not show the TPS chart")
		}
	}

	if f := js.Flow; f != nil {
		checkSweep(t, "flow", dir, md, "| bulk sessions N", FileSlowdown, f.Rows, func(control string, n int, r *FlowRow) {
			if len(r.SamplesMs) != f.Reps {
				t.Errorf("N=%d %s: %d samples, want %d", n, control, len(r.SamplesMs), f.Reps)
			}
		})
	}
	if c := js.Concurrency; c != nil && c.Unsupported == "" {
		checkConcurrencyFiles(t, dir, md, c)
	}
	if w := js.WhatIf; w != nil {
		checkWhatIfFiles(t, dir, md, w)
	}
	return js
}

// checkConcurrencyFiles checks the concurrency experiment's table against
// report.json, and its charts.
func checkConcurrencyFiles(t *testing.T, dir, md string, c *ConcurrencyReport) {
	t.Helper()
	rows := mdTableOf(t, md, "| active_statements", len(c.Rows))
	base := c.row(0)
	if base == nil {
		t.Fatal("no unlimited point in JSON")
	}
	for i, r := range c.Rows {
		cells := rows[i+1]
		if cells[0] != limitName(r.ActiveStatements) {
			t.Errorf("concurrency row %d is %s, want %s", i, cells[0], limitName(r.ActiveStatements))
		}
		for _, ch := range []struct {
			name    string
			cell    string
			v, prec float64
		}{
			{"p50", cells[1], r.P50Ms, 0.1}, {"p99", cells[2], r.P99Ms, 0.1}, {"bound", cells[3], r.BoundMs, 0.1},
			{"p50 ratio", cells[4], r.P50Ratio, 0.01}, {"p99 ratio", cells[5], r.LatencyRatio, 0.01},
			{"MB/s", cells[6], r.MBps, 0.1}, {"stmts/s", cells[7], r.StatementsPerSec, 0.1},
			{"throughput ratio", cells[8], r.ThroughputRatio, 0.01}, {"ordinary ms", cells[9], r.OrdinaryMs, 0.1},
			{"queue mean", cells[12], r.QueueMeanBytes / 1e3, 0.1}, {"queue max", cells[13], float64(r.QueueMaxBytes) / 1e3, 0.1},
		} {
			if got := cellNum(t, ch.cell); !near(got, ch.v, ch.prec) {
				t.Errorf("concurrency row %d %s: table %s, JSON %v", i, ch.name, ch.cell, ch.v)
			}
		}
		if r.ActiveStatements == 0 {
			if cells[10] != "-" || cells[11] != "-" {
				t.Errorf("unlimited row shows admission counts %s, %s", cells[10], cells[11])
			}
		} else if cellNum(t, cells[10]) != float64(r.RunningMax) || !near(cellNum(t, cells[11]), r.WaitingMean, 0.1) {
			t.Errorf("concurrency row %d running/waiting: table %s %s, JSON %v %v", i, cells[10], cells[11], r.RunningMax, r.WaitingMean)
		}
		if !near(r.P50Ratio, r.P50Ms/base.P50Ms, 1e-9) || !near(r.LatencyRatio, r.P99Ms/base.P99Ms, 1e-9) || !near(r.ThroughputRatio, r.MBps/base.MBps, 1e-9) {
			t.Errorf("concurrency row %d: ratios %v %v %v are not to the unlimited point", i, r.P50Ratio, r.LatencyRatio, r.ThroughputRatio)
		}
		if len(r.SamplesMs) != c.Reps {
			t.Errorf("concurrency row %d: %d samples, want %d", i, len(r.SamplesMs), c.Reps)
		}
		if p50, _, lo, hi := summarize(r.SamplesMs); p50 != r.P50Ms || r.P99Ms < p50 || r.P99Ms > hi || lo > p50 || r.MaxMs != hi {
			t.Errorf("concurrency row %d: p50 %v, p99 %v, max %v do not describe samples %v", i, r.P50Ms, r.P99Ms, r.MaxMs, r.SamplesMs)
		}
	}
	lat := readChart(t, filepath.Join(dir, FileConcLatency))
	if len(lat.series["p50"]) != len(c.Rows) || len(lat.series["p99"]) != len(c.Rows) {
		t.Fatalf("latency chart series %v", lat.legend)
	}
	if !strings.Contains(lat.xLabel, "active_statements") || !strings.Contains(lat.yLabel, "(ms)") {
		t.Errorf("latency chart axis labels %q, %q", lat.xLabel, lat.yLabel)
	}
	tp := readChart(t, filepath.Join(dir, FileConcThroughput))
	if len(tp.series["ordinary MB/s"]) != len(c.Rows) || !strings.Contains(tp.yLabel, "MB/s") {
		t.Fatalf("throughput chart series %v, y %q", tp.legend, tp.yLabel)
	}
	// The chart must draw the data: points left to right by limit, the
	// unlimited one rightmost, and a larger p99 higher up (a smaller y).
	sorted := slices.Clone(c.Rows)
	slices.SortStableFunc(sorted, func(a, b ConcurrencyRow) int { return int(c.x(a) - c.x(b)) })
	p99 := lat.series["p99"]
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1], sorted[i]
		if a.P99Ms != b.P99Ms && (a.P99Ms < b.P99Ms) != (p99[i-1][1] > p99[i][1]) {
			t.Errorf("latency chart: points %d and %d at y=%v, %v contradict p99 %v, %v", i-1, i, p99[i-1][1], p99[i][1], a.P99Ms, b.P99Ms)
		}
	}
	if sorted[len(sorted)-1].ActiveStatements != 0 && sorted[len(sorted)-1].ActiveStatements < c.Sessions {
		t.Errorf("latency chart: the rightmost point is active_statements %d, not unlimited", sorted[len(sorted)-1].ActiveStatements)
	}
	for _, f := range []string{FileConcLatency, FileConcThroughput} {
		if !strings.Contains(md, "("+f+")") {
			t.Errorf("report.md does not show %s", f)
		}
	}
}

// checkSweep checks an off/on sweep's table in report.md (the one whose
// header starts with header) against rows: one row per N, each point's
// elapsed time and slowdown as printed, the slowdown over the elapsed
// time at N = 0; then each with every point, for the experiment's own
// checks; and that its slowdown chart, in chart, draws the data.
func checkSweep[R sweepRow](t *testing.T, what, dir, md, header, chart string, rows []R, each func(control string, n int, r *R)) {
	t.Helper()
	ns := sweepNs(rows)
	table := mdTableOf(t, md, header, len(ns))
	at := func(control string, n int) (*R, PointTimes) {
		r := sweepAt(rows, control, n)
		if r == nil {
			t.Fatalf("%s: no %s point for N=%d in JSON", what, control, n)
		}
		_, _, tm, _ := (*r).point()
		return r, tm
	}
	for i, n := range ns {
		cells := table[i+1]
		if cellNum(t, cells[0]) != float64(n) {
			t.Errorf("%s row %d is N=%s, want %d", what, i, cells[0], n)
		}
		for _, c := range []struct {
			control         string
			elapsed, slowdn int
		}{{"off", 1, 3}, {"on", 4, 5}} {
			r, tm := at(c.control, n)
			_, base := at(c.control, 0)
			if !near(cellNum(t, cells[c.elapsed]), tm.ElapsedMs, 0.1) || !near(cellNum(t, cells[c.slowdn]), tm.Slowdown, 0.01) {
				t.Errorf("%s N=%d %s: table %s %s, JSON %v %v", what, n, c.control, cells[c.elapsed], cells[c.slowdn], tm.ElapsedMs, tm.Slowdown)
			}
			if !near(tm.Slowdown, tm.ElapsedMs/base.ElapsedMs, 1e-9) {
				t.Errorf("%s N=%d %s: slowdown %v is not elapsed / elapsed at N=0", what, n, c.control, tm.Slowdown)
			}
			each(c.control, n, r)
		}
	}
	c := readChart(t, filepath.Join(dir, chart))
	off, on := c.series["network_control off"], c.series["network_control on"]
	if len(off) != len(ns) || len(on) != len(ns) {
		t.Fatalf("%s chart series %v", what, c.legend)
	}
	if !strings.Contains(c.xLabel, "N") || !strings.Contains(c.yLabel, "slowdown") {
		t.Errorf("%s chart axis labels %q, %q", what, c.xLabel, c.yLabel)
	}
	// The chart must draw the data: a larger slowdown is higher up (a
	// smaller y).
	last := len(ns) - 1
	_, offT := at("off", ns[last])
	_, onT := at("on", ns[last])
	if (offT.Slowdown > onT.Slowdown) != (off[last][1] < on[last][1]) {
		t.Errorf("%s chart: last points at y=%v (off) and y=%v (on) contradict the data", what, off[last][1], on[last][1])
	}
	if !strings.Contains(md, "("+chart+")") {
		t.Errorf("report.md does not show the %s chart", what)
	}
}

// readReport returns what report.json in dir holds and report.md.
func readReport(t *testing.T, dir string) (*Report, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	var js Report
	if err := json.Unmarshal(data, &js); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	return &js, string(md)
}

// needPostgres skips a slow test under -short (it takes about takes
// here) and reports whether PostgreSQL's programs are installed, with
// their directory; without them the test is marked missing (see
// testenv.Missing).
func needPostgres(t *testing.T, takes string) (bin string, ok bool) {
	t.Helper()
	testenv.SkipShort(t, "takes "+takes+" here")
	bin, err := pgtemp.FindBinaries("")
	if err != nil {
		testenv.Missing(t, "%v", err)
		return "", false
	}
	return bin, true
}

// needFDW is needPostgres for a test that needs postgres_fdw too: it
// reports whether its extension files are installed, and marks the test
// missing when they are not.
func needFDW(t *testing.T, takes string) bool {
	t.Helper()
	if _, ok := needPostgres(t, takes); !ok {
		return false
	}
	if _, err := os.Stat("/usr/share/postgresql"); err != nil {
		testenv.Missing(t, "postgres_fdw: %v", err)
		return false
	}
	return true
}

// runProgress runs o for up to timeout, its progress into a buffer that
// is logged under -v, and fails the test when Run fails; it returns the
// report and the progress.
func runProgress(t *testing.T, timeout time.Duration, o Options) (*Report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var progress testenv.Buffer
	o.Progress = &progress
	rep, err := Run(ctx, o)
	if testing.Verbose() {
		t.Logf("progress:\n%s", progress.String())
	}
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	return rep, progress.String()
}

// cancelRun runs Run with o in the background and cancels it once the
// progress shows until, after calling running (nil: nothing). It fails
// the test when Run ends first or until does not show within wait, or
// when Run takes longer than stop to return after the cancel. It
// returns the progress and Run's error.
func cancelRun(t *testing.T, o Options, until string, wait, stop time.Duration, running func()) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress testenv.Buffer
	o.Progress = &progress
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, o)
		done <- err
	}()
	deadline := time.Now().Add(wait)
	for !strings.Contains(progress.String(), until) {
		select {
		case err := <-done:
			t.Fatalf("Run ended early: %v\n%s", err, progress.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress never showed %q:\n%s", until, progress.String())
		}
	}
	if running != nil {
		running()
	}
	cancel()
	select {
	case err := <-done:
		return progress.String(), err
	case <-time.After(stop):
		t.Fatalf("Run did not stop after cancel\n%s", progress.String())
	}
	return progress.String(), nil
}

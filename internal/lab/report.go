package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/units"
)

// Files Report.WriteFiles writes.
const (
	FileMarkdown = "report.md"
	FileJSON     = "report.json"
	FileTPSChart = "tps_vs_rtt.svg"
	FileSlowdown = "slowdown_vs_n.svg"
	// FileConcLatency and FileConcThroughput are the concurrency
	// experiment's charts.
	FileConcLatency    = "high_latency_vs_active.svg"
	FileConcThroughput = "throughput_vs_active.svg"
	// FileClusterSlowdown is the cluster experiment's chart.
	FileClusterSlowdown = "cluster_slowdown_vs_n.svg"
)

// Report is everything a run measured. Its JSON form is report.json.
type Report struct {
	Plan     string    `json:"plan"`
	Backend  string    `json:"backend"` // embedded, postgres (throwaway) or dsn
	Database string    `json:"database"`
	Protocol string    `json:"protocol"` // postgres or mysql
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`

	Latency     *LatencyReport     `json:"latency,omitempty"`
	Flow        *FlowReport        `json:"flow_control,omitempty"`
	Concurrency *ConcurrencyReport `json:"concurrency,omitempty"`
	WhatIf      *WhatIfReport      `json:"whatif,omitempty"`
	Cluster     *ClusterReport     `json:"cluster,omitempty"`
	BaseBackup  *BaseBackupReport  `json:"basebackup,omitempty"`
	Targets     []Target           `json:"targets"`
}

// Target is one acceptance figure of the reference experiments.
type Target struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Want        string  `json:"want"`
	Value       float64 `json:"value"`
	// Measured is false when the plan lacks the point the target is
	// about; Value and Met are then meaningless.
	Measured bool `json:"measured"`
	Met      bool `json:"met"`
}

// measured formats the target's value, "-" when not measured.
func (t Target) measured() string {
	switch {
	case !t.Measured:
		return "-"
	case t.Name == TargetModel, t.Name == TargetWhatIfTPS, t.Name == TargetWhatIfLoad:
		return fmt.Sprintf("%+.1f%%", 100*t.Value)
	}
	return fmt.Sprintf("%.2fx", t.Value)
}

// verdict is "met", "MISSED" or "not measured".
func (t Target) verdict() string {
	switch {
	case !t.Measured:
		return "not measured"
	case t.Met:
		return "met"
	}
	return "MISSED"
}

// targetTable returns the targets.
func (r *Report) targetTable() table {
	t := table{head: []string{"target", "want", "measured", "verdict"}}
	for _, tg := range r.Targets {
		t.rows = append(t.rows, []string{tg.Description, tg.Want, tg.measured(), tg.verdict()})
	}
	return t
}

// Target names.
const (
	TargetModel       = "tps_at_10ms_vs_model"
	TargetSlowdownOff = "slowdown_n10_control_off"
	TargetSlowdownOn  = "slowdown_n10_control_on"
	TargetConcLatency = "high_p50_active4_vs_unlimited"
	TargetConcTput    = "throughput_active4_vs_unlimited"
)

// concTargetLimit is the active_statements the concurrency targets are
// about.
const concTargetLimit = 4

// evaluate checks the targets against what was measured.
func (r *Report) evaluate() []Target {
	model := Target{Name: TargetModel, Description: "TPS at added RTT 10 ms vs the model's prediction", Want: "within 15%"}
	off := Target{Name: TargetSlowdownOff, Description: "slowdown at N=10 with network_control off", Want: ">= 6x"}
	on := Target{Name: TargetSlowdownOn, Description: "slowdown at N=10 with network_control on", Want: "<= 1.2x"}
	if r.Latency != nil {
		for _, row := range r.Latency.Rows {
			if row.RTTMs == 10 {
				model.Measured, model.Value = true, row.Deviation
				model.Met = math.Abs(row.Deviation) <= 0.15
			}
		}
	}
	if r.Flow != nil {
		for _, row := range r.Flow.Rows {
			if row.N != 10 {
				continue
			}
			switch row.Control {
			case "off":
				off.Measured, off.Value, off.Met = true, row.Slowdown, row.Slowdown >= 6
			case "on":
				on.Measured, on.Value, on.Met = true, row.Slowdown, row.Slowdown <= 1.2
			}
		}
	}
	cl := Target{Name: TargetConcLatency, Description: "high-priority p50 with active_statements=4 vs unlimited", Want: "<= 0.5x"}
	ct := Target{Name: TargetConcTput, Description: "ordinary throughput with active_statements=4 vs unlimited", Want: ">= 0.85x"}
	if c := r.Concurrency; c != nil && c.row(0) != nil {
		if row := c.row(concTargetLimit); row != nil {
			cl.Measured, cl.Value, cl.Met = true, row.P50Ratio, row.P50Ratio <= 0.5
			ct.Measured, ct.Value, ct.Met = true, row.ThroughputRatio, row.ThroughputRatio >= 0.85
		}
	}
	return append([]Target{model, off, on, cl, ct}, r.WhatIf.targets()...)
}

// table is a table of formatted cells, printed as aligned text or as
// Markdown.
type table struct {
	head []string
	rows [][]string
}

// text writes the table with columns aligned: the first left, the rest
// right.
func (t table) text(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = len(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
}

// markdown writes the table in GitHub Markdown, right-aligning the
// columns whose cells all read as numbers.
func (t table) markdown(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.head, " | "))
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
		numeric := len(t.rows) > 0
		for _, r := range t.rows {
			if c := r[i]; c != "-" && (c == "" || !strings.ContainsAny(c[:1], "0123456789+-")) {
				numeric = false
			}
		}
		if numeric && i > 0 {
			sep[i] = "---:"
		}
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(sep, "|"))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

// table returns the latency runs.
func (l *LatencyReport) table() table {
	t := table{head: []string{"added RTT (ms)", "ping (ms)", "TPS", "predicted TPS", "deviation", "QPS", "avg latency (ms)", "95th pct (ms)", "round trips/txn", "release late (µs)"}}
	for _, r := range l.Rows {
		late := "-"
		if r.Releases > 0 {
			late = fmt.Sprintf("%+.1f", r.LateUs)
		}
		t.rows = append(t.rows, []string{
			fmtNum(r.RTTMs), f2(r.PingMs), f1(r.TPS), f1(r.PredictedTPS), fmt.Sprintf("%+.1f%%", 100*r.Deviation),
			f1(r.QPS), f2(r.AvgMs), f2(r.P95Ms), f1(r.RoundTrips), late,
		})
	}
	return t
}

// prepareTable returns the timed loads.
func (l *LatencyReport) prepareTable() table {
	t := table{head: []string{"added RTT (ms)", "prepare (s)", "rows"}}
	for _, r := range l.Prepare {
		t.rows = append(t.rows, []string{fmtNum(r.RTTMs), f2(r.Seconds), fmt.Sprint(r.Rows)})
	}
	return t
}

// table returns the flow-control points, one row per N with both
// settings side by side.
func (f *FlowReport) table() table {
	t := table{head: []string{"bulk sessions N", "off: elapsed (ms)", "off: FIFO model (ms)", "off: slowdown", "on: elapsed (ms)", "on: slowdown", "off: bulk MB/s", "on: bulk MB/s"}}
	for _, n := range f.ns() {
		off, on := f.row("off", n), f.row("on", n)
		cells := []string{fmt.Sprint(n), "-", "-", "-", "-", "-", "-", "-"}
		if off != nil {
			cells[1], cells[2], cells[3], cells[6] = f1(off.ElapsedMs), f1(off.ModelMs), x2(off.Slowdown), f1(off.BulkMBps)
		}
		if on != nil {
			cells[4], cells[5], cells[7] = f1(on.ElapsedMs), x2(on.Slowdown), f1(on.BulkMBps)
		}
		t.rows = append(t.rows, cells)
	}
	return t
}

// ns returns the Ns measured, in order.
func (f *FlowReport) ns() []int {
	var out []int
	seen := map[int]bool{}
	for _, r := range f.Rows {
		if !seen[r.N] {
			seen[r.N] = true
			out = append(out, r.N)
		}
	}
	return out
}

// row returns the point for control and n, or nil.
func (f *FlowReport) row(control string, n int) *FlowRow {
	for i := range f.Rows {
		if f.Rows[i].Control == control && f.Rows[i].N == n {
			return &f.Rows[i]
		}
	}
	return nil
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func x2(v float64) string { return fmt.Sprintf("%.2fx", v) }

// TPSChart is the chart of TPS against added RTT, measured and
// predicted, on a logarithmic TPS axis.
func (l *LatencyReport) TPSChart() *svg.Chart {
	c := &svg.Chart{
		Title:  fmt.Sprintf("%s: TPS vs added RTT (%s)", l.Workload, plural(l.Threads, "thread")),
		XLabel: "added round-trip time (ms)",
		YLabel: "throughput (transactions/s, log scale)",
		ZeroX:  true,
		LogY:   true,
	}
	measured := svg.Series{Name: "measured"}
	model := svg.Series{Name: fmt.Sprintf("model: threads / (%.2f ms + %.1f round trips x RTT)", l.BaseLatencyMs, l.RoundTrips), Dashed: true}
	for _, r := range l.Rows {
		measured.Points = append(measured.Points, svg.Point{X: r.RTTMs, Y: r.TPS})
		model.Points = append(model.Points, svg.Point{X: r.RTTMs, Y: r.PredictedTPS})
	}
	c.Series = []svg.Series{measured, model}
	return c
}

// SlowdownChart is the chart of the normal query's slowdown against the
// number of bulk sessions, with network control off and on.
func (f *FlowReport) SlowdownChart() *svg.Chart {
	c := &svg.Chart{
		Title:  fmt.Sprintf("Slowdown of a %s query under N bulk sessions (link %s)", units.FormatBytes(roundMB(f.NormalBytes)), f.Capacity),
		XLabel: "concurrent bulk sessions N",
		YLabel: "slowdown (elapsed / elapsed at N = 0)",
		ZeroX:  true, ZeroY: true,
		Guides: []svg.Guide{{Y: 6, Label: "target with control off: >= 6x"}, {Y: 1.2, Label: "target with control on: <= 1.2x"}},
	}
	model := svg.Series{Name: "off: FIFO model", Dashed: true}
	for _, control := range []string{"off", "on"} {
		s := svg.Series{Name: "network_control " + control}
		for _, r := range f.Rows {
			if r.Control != control {
				continue
			}
			s.Points = append(s.Points, svg.Point{X: float64(r.N), Y: r.Slowdown})
			if base := f.row("off", 0); control == "off" && base != nil && base.ElapsedMs > 0 && r.ModelMs > 0 {
				model.Points = append(model.Points, svg.Point{X: float64(r.N), Y: r.ModelMs / base.ElapsedMs})
			}
		}
		c.Series = append(c.Series, s)
	}
	if len(model.Points) > 0 {
		c.Series = append(c.Series, model)
	}
	return c
}

// roundMB rounds a byte count to whole MB when it is within 5% of one,
// so a 1,000,000-byte result reads "1MB".
func roundMB(b int64) int64 {
	mb := math.Round(float64(b) / 1e6)
	if mb >= 1 && math.Abs(float64(b)-mb*1e6) <= 0.05*mb*1e6 {
		return int64(mb * 1e6)
	}
	return b
}

// WriteFiles writes report.md, report.json and the charts into dir,
// creating it if missing, and returns the paths written.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	files := map[string][]byte{}
	var md bytes.Buffer
	r.WriteMarkdown(&md)
	files[FileMarkdown] = md.Bytes()
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	files[FileJSON] = append(js, '\n')
	if r.Latency != nil {
		files[FileTPSChart] = []byte(r.Latency.TPSChart().String())
	}
	if r.Flow != nil {
		files[FileSlowdown] = []byte(r.Flow.SlowdownChart().String())
	}
	if c := r.Concurrency; c != nil && len(c.Rows) > 0 {
		files[FileConcLatency] = []byte(c.LatencyChart().String())
		files[FileConcThroughput] = []byte(c.ThroughputChart().String())
	}
	if r.WhatIf != nil {
		files[FileWhatIf] = []byte(r.WhatIf.Chart().String())
	}
	if c := r.Cluster; c != nil && len(c.Rows) > 0 {
		files[FileClusterSlowdown] = []byte(c.SlowdownChart().String())
	}
	if b := r.BaseBackup; b != nil && len(b.Conditions) > 0 {
		files[FileBBLatency] = []byte(b.LatencyChart().String())
		files[FileBBDuration] = []byte(b.DurationChart().String())
	}
	var written []string
	for _, name := range []string{FileMarkdown, FileJSON, FileTPSChart, FileSlowdown, FileConcLatency, FileConcThroughput, FileWhatIf, FileClusterSlowdown, FileBBLatency, FileBBDuration} {
		data, ok := files[name]
		if !ok {
			continue
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return written, fmt.Errorf("report: %w", err)
		}
		written = append(written, path)
	}
	return written, nil
}

func joinFiles(files []string) string { return strings.Join(files, ", ") }

// WriteMarkdown writes the report as Markdown: the targets, then each
// experiment with what it does, its tables, its chart and what the
// numbers show.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# sluice lab report\n\n")
	fmt.Fprintf(w, "- Plan: %s\n- Database: %s\n- Started: %s, took %.0f s\n\n",
		r.Plan, r.Database, r.Started.Format(time.RFC3339), r.Seconds)
	fmt.Fprintf(w, "Every byte measured here went through sluice, running in the same process, on a route in front of the database. "+
		"Delay and capacity are sluice's path emulation and link scheduler, not the kernel's.\n\n")

	fmt.Fprintf(w, "## Targets\n\n")
	r.targetTable().markdown(w)
	fmt.Fprintln(w)

	if l := r.Latency; l != nil {
		l.writeMarkdown(w)
	}
	if f := r.Flow; f != nil {
		f.writeMarkdown(w)
	}
	if c := r.Concurrency; c != nil {
		c.writeMarkdown(w)
	}
	if wi := r.WhatIf; wi != nil {
		wi.writeMarkdown(w)
	}
	if c := r.Cluster; c != nil {
		c.writeMarkdown(w)
	}
	if b := r.BaseBackup; b != nil {
		b.writeMarkdown(w)
	}
}

func (l *LatencyReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Experiment 1: latency\n\n")
	fmt.Fprintf(w, "An OLTP transaction is a chain of round trips: the client sends a statement and waits for the answer before it sends the next. "+
		"`%s` (sysbench's statements, %s, %s of %d rows, %.0f s per run after %.0f s of warm-up) "+
		"made %.1f round trips per transaction, counted by the benchmark. "+
		"sluice adds a round-trip time to the route with path emulation on its link (`ALTER LINK default WITH (delay='RTT/2')`: the delay is one-way and applies to each direction), "+
		"so every round trip costs that much more.\n\n",
		l.Workload, plural(l.Threads, "thread"), plural(l.Tables, "table"), l.TableSize, l.RunSeconds, l.WarmupSeconds, l.RoundTrips)
	fmt.Fprintf(w, "The model: **predicted TPS = threads / (base latency + round trips x RTT)**, with base latency = %.2f ms "+
		"(the average transaction latency at added RTT 0) and %.1f round trips per transaction. "+
		"The ping column is the median of %d minimal round trips through the route at each setting: what a round trip really cost, emulation included.\n\n",
		l.BaseLatencyMs, l.RoundTrips, pings)
	l.table().markdown(w)
	fmt.Fprintf(w, "\nEach run: `%s`\n\n", l.Command)
	fmt.Fprintf(w, "![TPS vs added RTT](%s)\n\n", FileTPSChart)
	var base, at10 *LatencyRow
	for i := range l.Rows {
		switch l.Rows[i].RTTMs {
		case 0:
			base = &l.Rows[i]
		case 10:
			at10 = &l.Rows[i]
		}
	}
	if base != nil && at10 != nil && at10.TPS > 0 {
		fmt.Fprintf(w, "What the numbers show: 10 ms of RTT took the benchmark from %.1f to %.1f TPS (%.0fx fewer), "+
			"because each transaction now waits %.1f x 10 ms = %.0f ms on the network against %.2f ms of work. "+
			"The model predicted %.1f TPS (%+.1f%%). Throughput at a given RTT is bounded by threads / (round trips x RTT): "+
			"more round trips per transaction or more distance cost the same way, and only fewer round trips "+
			"(batching, stored procedures) or more concurrency buy it back.\n\n",
			base.TPS, at10.TPS, base.TPS/at10.TPS, l.RoundTrips, l.RoundTrips*10, l.BaseLatencyMs, at10.PredictedTPS, 100*at10.Deviation)
		if at10.Deviation < -0.05 {
			modelMs := l.BaseLatencyMs + l.RoundTrips*10
			fmt.Fprintf(w, "Where TPS falls short of the model, the difference is time per round trip that the model does not count. "+
				"Part is the emulation itself: a round trip took %.2f ms at 10 ms (ping). "+
				"The rest is waiting to run: after each delayed message the client, sluice and the server must be scheduled again, "+
				"which costs more on a busy machine; the fastest transaction at 10 ms took %.1f ms against the model's %.1f ms, the average %.1f ms.\n\n",
				at10.PingMs, at10.MinMs, modelMs, at10.AvgMs)
		}
	}
	if len(l.Prepare) > 0 {
		fmt.Fprintf(w, "Loading the tables (`prepare`) at each RTT:\n\n")
		l.prepareTable().markdown(w)
		fmt.Fprintf(w, "\nA bulk load streams large messages (COPY or multi-row INSERTs) over a handful of round trips, "+
			"so added RTT barely moves it; it is the chatty, row-at-a-time path that latency punishes.\n\n")
	}
}

func (f *FlowReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Experiment 2: flow control\n\n")
	drain := func(b int64) float64 { return float64(b) / float64(f.CapacityBytes) * 1000 }
	fmt.Fprintf(w, "The route's link has a capacity of %s and a device FIFO of %s, the NIC ring plus kernel socket buffers of a busy host "+
		"(%.1f ms to drain at that capacity). ", f.Capacity, units.FormatBytes(f.QueueBytes), drain(f.QueueBytes))
	if f.Calibrated {
		fmt.Fprintf(w, "The capacity was chosen so that one bulk session saturates it many times over: one session streamed %.0f MB/s through an unlimited link. "+
			"The margin matters when the database, sluice and every client share one machine: bulk bytes cost processor time that the normal query "+
			"would otherwise wait for, and a link well below what the machine can move keeps the link, not the processor, the bottleneck. ", f.StreamMBps)
	}
	fmt.Fprintf(w, "N bulk sessions pull a large result in a loop:\n\n```sql\n%s\n```\n\n"+
		"while one normal-priority session runs a query returning about %s, measured %d times per point "+
		"(elapsed is the median):\n\n```sql\n%s\n```\n\n",
		f.BulkSQL, units.FormatBytes(roundMB(f.NormalBytes)), f.Reps, f.NormalSQL)
	fmt.Fprintf(w, "The bulk sessions are %s, with the exception rule that demotes them:\n\n```sql\n%s;\n```\n\n",
		f.Binding, strings.Join(f.Setup, ";\n"))
	fmt.Fprintf(w, "Each point waits until every bulk statement has been penalised (SHOW STATEMENTS shows `penalised = yes`, class `low`) before it measures. "+
		"Slowdown is the elapsed time over the elapsed time at N = 0 with the same setting.\n\n")
	f.table().markdown(w)
	fmt.Fprintf(w, "\n![slowdown vs N](%s)\n\n", FileSlowdown)
	off, on := f.row("off", f.maxN()), f.row("on", f.maxN())
	fmt.Fprintf(w, "What the numbers show:\n\n")
	offText := ""
	if off != nil {
		offText = fmt.Sprintf(" At N = %d the query took %.1f ms, %.2fx its time on an idle link.", off.N, off.ElapsedMs, off.Slowdown)
	}
	fmt.Fprintf(w, "- **network_control = off**: the link is one FIFO, as an unmanaged network is. The slowdown comes from the shared %s device FIFO: "+
		"the normal query's bytes get about one admission in N+1 as space frees (N+1 flows share the capacity), and each of its chunks "+
		"queues behind whatever the bulk flows already put in the FIFO (%s is %.1f ms at %s). Its time grows roughly as (N+1) times its unloaded transfer time plus that queueing; "+
		"the FIFO model column is that arithmetic, elapsed at N = 0 plus (N x %s + %s) / capacity.%s\n",
		units.FormatBytes(f.QueueBytes), units.FormatBytes(f.QueueBytes), drain(f.QueueBytes), f.Capacity,
		units.FormatBytes(roundMB(f.NormalBytes)), units.FormatBytes(f.QueueBytes), offText)
	onText := ""
	if on != nil {
		onText = fmt.Sprintf(" At N = %d the query took %.1f ms, %.2fx.", on.N, on.ElapsedMs, on.Slowdown)
	}
	fmt.Fprintf(w, "- **network_control = on**: the penalised bulk statements are in the low class. Their bytes are sent only when no normal-priority bytes wait, "+
		"and the low-priority bytes inside the FIFO are bounded by low_priority_queue_bytes (%s, %.2f ms at %s), so a normal byte waits behind at most that much bulk data "+
		"and while the normal query runs (and for %v after) the low class enters at most at low_priority_yield (%d%%) of the capacity, so its bytes do not take the processors "+
		"the query's server, proxy and client need between round trips: the normal query runs at nearly its unloaded speed, and the bulk sessions have the whole link whenever it does not run.%s\n\n",
		units.FormatBytes(f.LowQueueBytes), drain(f.LowQueueBytes), f.Capacity, link.YieldHold, link.DefaultLowYieldPercent, onText)
}

// maxN returns the largest N measured.
func (f *FlowReport) maxN() int {
	n := 0
	for _, r := range f.Rows {
		n = max(n, r.N)
	}
	return n
}

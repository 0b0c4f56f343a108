package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/netlab"
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
	Plan     string `json:"plan"`
	Backend  string `json:"backend"` // embedded, postgres (throwaway) or dsn
	Database string `json:"database"`
	Protocol string `json:"protocol"` // postgres or mysql
	// Network is NetworkEmulated or NetworkKernel.
	Network string `json:"network"`
	// NotOnKernel names the experiments of the plan the kernel network
	// has no form of, with why.
	NotOnKernel []string  `json:"not_on_kernel_network,omitempty"`
	Started     time.Time `json:"started"`
	Seconds     float64   `json:"seconds"`

	Latency       *LatencyReport       `json:"latency,omitempty"`
	Flow          *FlowReport          `json:"flow_control,omitempty"`
	KernelFlow    *KernelFlowReport    `json:"flow_control_kernel,omitempty"`
	Concurrency   *ConcurrencyReport   `json:"concurrency,omitempty"`
	WhatIf        *WhatIfReport        `json:"whatif,omitempty"`
	Cluster       *ClusterReport       `json:"cluster,omitempty"`
	KernelCluster *KernelClusterReport `json:"cluster_kernel,omitempty"`
	BaseBackup    *BaseBackupReport    `json:"basebackup,omitempty"`
	Targets       []Target             `json:"targets"`
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

// evaluate checks the targets against what was measured; an experiment
// not run leaves its targets unmeasured.
func (r *Report) evaluate() []Target {
	if r.Network == NetworkKernel {
		return slices.Concat(r.KernelFlow.targets(), r.KernelCluster.targets())
	}
	return slices.Concat(r.Latency.targets(), r.Flow.targets(), r.Concurrency.targets(), r.WhatIf.targets())
}

// heading writes the heading of experiment n's section, titled title,
// and when why is set says why it was not measured. It reports whether
// the experiment was measured (why is "").
func heading(w io.Writer, n int, title, why string) bool {
	fmt.Fprintf(w, "## Experiment %d: %s\n\n", n, title)
	if why != "" {
		fmt.Fprintf(w, "Not measured: %s.\n\n", why)
	}
	return why == ""
}

// drainMs is how long a queue of b bytes takes to drain at capacity
// bytes/s, in ms.
func drainMs(b, capacity int64) float64 { return float64(b) / float64(capacity) * 1000 }

// section is one experiment's part of the report.
type section interface {
	// tables prints the experiment's tables as the run goes.
	tables(p *printer)
	// writeMarkdown writes the experiment's section of report.md.
	writeMarkdown(w io.Writer)
	// charts returns the experiment's charts, in order; none when it
	// measured nothing.
	charts() []chartFile
}

// chartFile is a chart and the name of its file.
type chartFile struct {
	name  string
	chart func() *svg.Chart
}

// chartsIf returns charts when the experiment measured something, else
// none.
func chartsIf(measured bool, charts ...chartFile) []chartFile {
	if !measured {
		return nil
	}
	return charts
}

// sections returns the experiments the report holds, in order.
func (r *Report) sections() []section {
	var out []section
	add := func(run bool, s section) {
		if run {
			out = append(out, s)
		}
	}
	add(r.Latency != nil, r.Latency)
	add(r.Flow != nil, r.Flow)
	add(r.KernelFlow != nil, r.KernelFlow)
	add(r.Concurrency != nil, r.Concurrency)
	add(r.WhatIf != nil, r.WhatIf)
	add(r.Cluster != nil, r.Cluster)
	add(r.KernelCluster != nil, r.KernelCluster)
	add(r.BaseBackup != nil, r.BaseBackup)
	return out
}

// WriteFiles writes report.md, report.json and the charts into dir,
// creating it if missing, and returns the paths written.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var md bytes.Buffer
	r.WriteMarkdown(&md)
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	files := []struct {
		name string
		data []byte
	}{{FileMarkdown, md.Bytes()}, {FileJSON, append(js, '\n')}}
	for _, s := range r.sections() {
		for _, c := range s.charts() {
			files = append(files, struct {
				name string
				data []byte
			}{c.name, []byte(c.chart().String())})
		}
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
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
	if r.Network == NetworkKernel {
		fmt.Fprintf(w, "- Network: kernel (network namespaces, veth pairs and tbf queues on this host, addresses in %s)\n\n", netlab.Range)
		fmt.Fprintf(w, "Every byte measured here went through sluice, running in the same process, on a route in front of the database, "+
			"and crossed a real kernel bottleneck between sluice and the clients.\n\n")
		for _, why := range r.NotOnKernel {
			fmt.Fprintf(w, "- Not run on the kernel network: %s.\n", why)
		}
		if len(r.NotOnKernel) > 0 {
			fmt.Fprintln(w)
		}
	} else {
		fmt.Fprintf(w, "Every byte measured here went through sluice, running in the same process, on a route in front of the database. "+
			"Delay and capacity are sluice's path emulation and link scheduler, not the kernel's.\n\n")
	}

	fmt.Fprintf(w, "## Targets\n\n")
	r.targetTable().markdown(w)
	fmt.Fprintln(w)

	for _, s := range r.sections() {
		s.writeMarkdown(w)
	}
}

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

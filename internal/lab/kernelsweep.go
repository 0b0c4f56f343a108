package lab

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicelab/sluice/internal/lab/svg"
)

// The points of an experiment over the kernel network (flow control,
// cluster): a measured job at N background jobs with each setting.

// Settings of the experiments over the kernel network, as KernelRow
// names them.
const (
	// SettingOff is network_control off: the link is one FIFO.
	SettingOff = "off"
	// SettingOn is network_control on with nothing configured about the
	// link: the network controller finds the bottleneck itself.
	SettingOn = "on"
	// SettingCapacity is network_control on with the link's capacity at
	// CapacityPercent of the bottleneck's rate.
	SettingCapacity = "capacity"
)

// CapacityPercent is the link capacity of SettingCapacity, in percent of
// the kernel bottleneck's rate: a little below it, as real-network.md
// advises.
const CapacityPercent = 95

// kernelSettings are the settings in the order they are measured.
func kernelSettings() []string { return []string{SettingOff, SettingOn, SettingCapacity} }

// KernelRow is one point of an experiment over the kernel network: the
// measured job (the flow experiment's normal query, the cluster's
// high-priority join) under N background jobs (bulk sessions,
// low-priority joins) with one setting.
type KernelRow struct {
	Setting string `json:"setting"` // SettingOff, SettingOn or SettingCapacity
	N       int    `json:"background_jobs"`
	// PointTimes are the measured job's elapsed times; the slowdown is
	// against N = 0 with the same setting.
	PointTimes
	// BulkMBps is what the background jobs received together while the
	// job was measured.
	BulkMBps float64 `json:"background_mb_per_s"`
	// QdiscBytes and QdiscDrops are what the tbf queue sent and dropped
	// while the job was measured; LinkUse is QdiscBytes per second over
	// the queue's rate.
	QdiscBytes int64   `json:"qdisc_bytes"`
	QdiscDrops int64   `json:"qdisc_drops"`
	LinkUse    float64 `json:"link_use"`
	// PenaltySeconds is how long after the background jobs started all
	// their statements were penalised (flow control).
	PenaltySeconds float64 `json:"penalty_seconds,omitempty"`
	// Controller is the network controller's estimate, server to client,
	// at the end of the point (SHOW NETWORK); nil when it had none.
	Controller *ControllerEstimate `json:"controller,omitempty"`
	SamplesMs  []float64           `json:"samples_ms"`
}

// ControllerEstimate is a row of the network view.
type ControllerEstimate struct {
	State           string  `json:"state"`
	BottleneckBytes int64   `json:"bottleneck_bytes_per_second"`
	QueueDelayMs    float64 `json:"queue_delay_ms"`
	LowRateBytes    int64   `json:"low_rate_bytes_per_second"`
}

// kernelRow returns the point of set and n, or nil.
func kernelRow(rows []KernelRow, set string, n int) *KernelRow {
	for i := range rows {
		if rows[i].Setting == set && rows[i].N == n {
			return &rows[i]
		}
	}
	return nil
}

// kernelNs returns the Ns of the points, in order of first appearance.
func kernelNs(rows []KernelRow) []int {
	var out []int
	for _, r := range rows {
		if !slices.Contains(out, r.N) {
			out = append(out, r.N)
		}
	}
	return out
}

// kernelMaxN is the largest N measured; 0 for none.
func kernelMaxN(rows []KernelRow) int {
	m := 0
	for _, r := range rows {
		m = max(m, r.N)
	}
	return m
}

// kernelTable returns one row per N (its column named nHead), the
// three settings side by side: the job's median and slowdown, and the
// tbf queue's use.
func kernelTable(rows []KernelRow, nHead string) table {
	t := table{head: []string{nHead}}
	for _, set := range kernelSettings() {
		t.head = append(t.head, set+": elapsed (ms)", set+": slowdown", set+": link use")
	}
	for _, n := range kernelNs(rows) {
		cells := []string{strconv.Itoa(n)}
		for _, set := range kernelSettings() {
			if r := kernelRow(rows, set, n); r != nil {
				cells = append(cells, f1(r.ElapsedMs), x2(r.Slowdown), fmt.Sprintf("%.0f%%", 100*r.LinkUse))
			} else {
				cells = append(cells, "-", "-", "-")
			}
		}
		t.rows = append(t.rows, cells)
	}
	return t
}

// kernelChart charts a kernel experiment's rows against N, one series
// per setting: the slowdown, or (use) the bottleneck's use.
func kernelChart(title, xlabel string, rows []KernelRow, use bool) *svg.Chart {
	ylabel, y := "slowdown (elapsed / elapsed at N = 0)", func(r *KernelRow) float64 { return r.Slowdown }
	if use {
		ylabel, y = "link use (% of the rate)", func(r *KernelRow) float64 { return 100 * r.LinkUse }
	}
	return &svg.Chart{Title: title, XLabel: xlabel, YLabel: ylabel, ZeroX: true, ZeroY: true, Series: kernelSeries(rows, y)}
}

// kernelSeries returns one series per setting of y against N.
func kernelSeries(rows []KernelRow, y func(*KernelRow) float64) []svg.Series {
	var out []svg.Series
	for _, set := range kernelSettings() {
		var of []*KernelRow
		for i := range rows {
			if rows[i].Setting == set {
				of = append(of, &rows[i])
			}
		}
		out = append(out, seriesOf(settingName(set), false, of, func(r *KernelRow) float64 { return float64(r.N) }, y))
	}
	return out
}

// kernelCharts are an experiment's two charts over the kernel network,
// the slowdown and the link use against N, when it has rows.
func kernelCharts(rows []KernelRow, slowdownFile string, slowdown func() *svg.Chart, linkUseFile string, linkUse func() *svg.Chart) []chartFile {
	return chartsIf(len(rows) > 0, chartFile{slowdownFile, slowdown}, chartFile{linkUseFile, linkUse})
}

// kernelSweep measures, with one setting, point at each N of ns, sets
// each row's slowdown and appends it to rows. job names the measured
// job and load the background jobs in progress lines; background names
// one background job in errors.
func kernelSweep(p *printer, rows *[]KernelRow, set string, ns []int, job, load, background string, point func(n int) (KernelRow, error)) error {
	var base float64
	for _, n := range ns {
		row, err := point(n)
		if err != nil {
			return fmt.Errorf("%s: %w", plural(n, background), err)
		}
		base = row.slowdownAgainst(base)
		*rows = append(*rows, row)
		p.step("%s, N=%d: %s %.1f ms (median; mean %.1f, min %.1f, max %.1f) = %.2fx; %s %.1f MB/s; link use %.0f%%, %d drops%s",
			set, n, job, row.ElapsedMs, row.MeanMs, row.MinMs, row.MaxMs, row.Slowdown, load, row.BulkMBps, 100*row.LinkUse, row.QdiscDrops, row.controllerText())
	}
	return nil
}

// kernelSummary writes a line per setting about the rows at the largest
// N: how long job took, and how busy the bottleneck, named by link, was.
func kernelSummary(w io.Writer, rows []KernelRow, job, link string) {
	n := kernelMaxN(rows)
	for _, set := range kernelSettings() {
		if r := kernelRow(rows, set, n); r != nil {
			fmt.Fprintf(w, "- **%s**: at N = %d %s took %.1f ms, %.2fx; %s ran at %.0f%% of its rate (%d drops)%s.\n",
				settingName(set), n, job, r.ElapsedMs, r.Slowdown, link, 100*r.LinkUse, r.QdiscDrops, strings.Replace(r.controllerText(), ";", ",", 1))
		}
	}
}

// slowdownAgainst sets r's slowdown against base, the median at N = 0
// with the same setting (r's own at N = 0), and returns the base for
// the next point.
func (r *KernelRow) slowdownAgainst(base float64) float64 {
	if r.N == 0 {
		base = r.ElapsedMs
	}
	if base > 0 {
		r.Slowdown = r.ElapsedMs / base
	}
	return base
}

// settingName says what a setting is, for legends and the report.
func settingName(set string) string {
	switch set {
	case SettingOff:
		return "network_control off"
	case SettingOn:
		return "on, nothing configured"
	}
	return fmt.Sprintf("on, capacity %d%% of the rate", CapacityPercent)
}

// kernelTargets returns the targets of an experiment over the kernel
// network, named prefix_slowdown_SETTING_vs_off and described by what:
// at the largest N, the slowdown with
// control on (nothing configured, and with the capacity) below the
// slowdown with it off, as ratios of the two.
func kernelTargets(rows []KernelRow, prefix, what string) []Target {
	n := kernelMaxN(rows)
	off := kernelRow(rows, SettingOff, n)
	var out []Target
	for _, set := range []string{SettingOn, SettingCapacity} {
		t := Target{Name: fmt.Sprintf("%s_slowdown_%s_vs_off", prefix, set), Description: fmt.Sprintf("%s: slowdown at N=%d, %s over off", what, n, settingName(set)), Want: "< 1x"}
		if on := kernelRow(rows, set, n); on != nil && off != nil && off.Slowdown > 0 && n > 0 {
			t.Measured, t.Value = true, on.Slowdown/off.Slowdown
			t.Met = t.Value < 1
		}
		out = append(out, t)
	}
	return out
}

package lab

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/netlab"
	"github.com/sluicelab/sluice/internal/testenv"
)

// kernelPlan is the flow-control experiment over the kernel network at
// a reduced size: N = 0 and 3, three measurements each.
func kernelPlan() Plan {
	return Plan{Name: "tiny", Flow: FlowPlan{
		PenaltyRule: PenaltyRule{RuleBandwidth: 0.05, RuleElapsed: 0.5, CheckPeriod: 100 * time.Millisecond, PenaltyTimeout: 10 * time.Second},
		Kernel:      KernelFlowPlan{Ns: []int{0, 3}, Reps: 3, Settle: 500 * time.Millisecond},
	}}
}

// kernelOptions are the options of a kernel run at kernelPlan's size: a
// 50 Mbit/s bottleneck with a 100 ms queue, slow enough that the
// processor time the bulk bytes cost (under the race detector too)
// stays small beside the link's.
func kernelOptions(t *testing.T) Options {
	return Options{Plan: kernelPlan(), Out: t.TempDir(), Logger: testLogger(),
		Network: NetworkKernel, NetRate: 50e6 / 8, NetQueue: 100 * time.Millisecond}
}

// needTestbed fails the test under CI, and skips it elsewhere, when
// this host cannot make network namespaces (not root, no iproute2).
func needTestbed(t *testing.T) {
	t.Helper()
	tb, err := netlab.New(context.Background())
	if err != nil {
		testenv.Missing(t, "a real-network testbed: %v", err)
		return
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkNoNamespaces fails when a namespace of this process is left.
func checkNoNamespaces(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	if mine := fmt.Sprintf("slb%d-", os.Getpid()); strings.Contains(string(out), mine) {
		t.Errorf("namespaces left behind:\n%s", out)
	}
}

// TestRunKernelNetwork is `sluice lab --network kernel --experiment
// flow` at a reduced size on the embedded backend: every point's bytes
// crossed the tbf queue, the three settings are reported side by side,
// and the network is removed at the end.
func TestRunKernelNetwork(t *testing.T) {
	needTestbed(t)
	o := kernelOptions(t)
	rep, progress := runProgress(t, 2*time.Minute, o)
	checkNoNamespaces(t)
	k := rep.KernelFlow
	if k == nil || rep.Flow != nil || rep.Network != NetworkKernel {
		t.Fatalf("report: network %q, kernel flow %v, emulated flow %v", rep.Network, k != nil, rep.Flow != nil)
	}
	if k.NormalBytes < 990_000 || k.NormalBytes > 1_010_000 {
		t.Errorf("normal query returned %d bytes, want about 1 MB", k.NormalBytes)
	}
	for _, set := range kernelSettings() {
		for _, n := range []int{0, 3} {
			r := kernelRow(k.Rows, set, n)
			if r == nil {
				t.Fatalf("no point for %s at N=%d: %+v", set, n, k.Rows)
			}
			// The queue counted at least the normal query's bytes of
			// every measurement: they crossed it.
			if r.QdiscBytes < int64(k.Reps)*k.NormalBytes {
				t.Errorf("%s, N=%d: the tbf queue sent %d bytes while %d queries of %d bytes were measured", set, n, r.QdiscBytes, k.Reps, k.NormalBytes)
			}
			if r.LinkUse <= 0 || r.ElapsedMs <= 0 {
				t.Errorf("%s, N=%d: link use %.2f, elapsed %.1f ms", set, n, r.LinkUse, r.ElapsedMs)
			}
		}
		// Bulk sessions kept the bottleneck busy while the query ran.
		if r := kernelRow(k.Rows, set, 3); r.BulkMBps <= 0 || r.PenaltySeconds <= 0 {
			t.Errorf("%s, N=3: bulk %.1f MB/s, penalised after %.1f s", set, r.BulkMBps, r.PenaltySeconds)
		}
	}
	// With the capacity a little under the bottleneck's rate the queue
	// forms inside sluice, where the normal query goes first: it slows
	// down less than with control off.
	off, capa, on := kernelRow(k.Rows, SettingOff, 3), kernelRow(k.Rows, SettingCapacity, 3), kernelRow(k.Rows, SettingOn, 3)
	t.Logf("slowdown at N=3: off %.2fx, on %.2fx, capacity %.2fx", off.Slowdown, on.Slowdown, capa.Slowdown)
	if off.Slowdown <= capa.Slowdown {
		t.Errorf("slowdown at N=3: off %.2fx, with capacity %.2fx; want off > capacity", off.Slowdown, capa.Slowdown)
	}
	if off.QdiscBytes <= 0 || off.LinkUse < 0.5 {
		t.Errorf("with control off and 3 bulk sessions the bottleneck ran at %.0f%% of its rate", 100*off.LinkUse)
	}

	js, md := readReport(t, o.Out)
	if js.KernelFlow == nil || len(js.KernelFlow.Rows) != len(k.Rows) {
		t.Fatal("report.json lacks the kernel flow-control points")
	}
	rows := mdTableOf(t, md, "| bulk sessions N | off: elapsed (ms)", 2)
	if got := strings.Join(rows[0], "|"); !strings.Contains(got, "on: slowdown") || !strings.Contains(got, "capacity: link use") {
		t.Errorf("table header %q lacks a setting", got)
	}
	for _, f := range []string{FileKernelSlowdown, FileKernelLinkUse} {
		b, err := os.ReadFile(filepath.Join(o.Out, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range kernelSettings() {
			if !strings.Contains(string(b), settingName(set)) {
				t.Errorf("%s lacks the series %q", f, settingName(set))
			}
		}
	}
	for _, want := range []string{"== Experiment 2: flow control, kernel network ==", "waiting until their statements are penalised", "network removed",
		"off, N=3: normal query", "on, N=3: normal query", "capacity, N=3: normal query", "kernel network: slowdown at N=3"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
}

// TestRunKernelNetworkCancelled: an interrupted kernel run removes its
// network.
func TestRunKernelNetworkCancelled(t *testing.T) {
	needTestbed(t)
	o := kernelOptions(t)
	progress, err := cancelRun(t, o, "off, N=3: started", time.Minute, 30*time.Second, func() {
		out, err := exec.Command("ip", "netns", "list").CombinedOutput()
		if err != nil || !strings.Contains(string(out), fmt.Sprintf("slb%d-cli", os.Getpid())) {
			t.Errorf("no client namespace while running (%v):\n%s", err, out)
		}
	})
	if err == nil {
		t.Fatal("cancelled Run returned no error")
	}
	if !strings.Contains(progress, "network removed") {
		t.Errorf("no removal after cancel:\n%s", progress)
	}
	checkNoNamespaces(t)
}

func TestParseNetRate(t *testing.T) {
	for in, want := range map[string]int64{"200mbit": 25_000_000, "1gbit": 125_000_000, "1Gbit": 125_000_000, "500kbit": 62_500, "25MB": 25_000_000, "100Mbit/s": 12_500_000} {
		if got, err := ParseNetRate(in); err != nil || got != want {
			t.Errorf("ParseNetRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "0mbit", "-5MB", "10 parsecs"} {
		if got, err := ParseNetRate(in); err == nil {
			t.Errorf("ParseNetRate(%q) = %d, want an error", in, got)
		}
	}
}

// TestKernelReportFiles: the kernel experiments' sections, tables,
// charts and targets agree with their points, without a network.
func TestKernelReportFiles(t *testing.T) {
	rows := func(offN, onN, capN float64) []KernelRow {
		var out []KernelRow
		for _, set := range kernelSettings() {
			n2 := map[string]float64{SettingOff: offN, SettingOn: onN, SettingCapacity: capN}[set]
			for _, p := range []struct {
				n  int
				ms float64
			}{{0, 40}, {2, 40 * n2}} {
				r := KernelRow{Setting: set, N: p.n, PointTimes: PointTimes{ElapsedMs: p.ms}, QdiscBytes: 1e6, LinkUse: 0.5 + float64(p.n)/4}
				r.slowdownAgainst(40)
				out = append(out, r)
			}
		}
		return out
	}
	rep := &Report{Plan: "tiny", Network: NetworkKernel, NotOnKernel: []string{"latency: it measures sluice's own link emulation (delay)"},
		KernelFlow:    &KernelFlowReport{Rate: "200 Mbit/s", RateBytes: 25e6, QueueMs: 100, FlowWorkload: FlowWorkload{NormalBytes: 1e6, Reps: 3}, Rows: rows(4, 2, 1.1)},
		KernelCluster: &KernelClusterReport{Rate: "200 Mbit/s", RateBytes: 25e6, QueueMs: 100, Nodes: []string{"coord", "dn1", "dn2", "dn3"}, Reps: 3, Rows: rows(3, 1.05, 1.2)}}
	rep.Targets = rep.evaluate()
	if len(rep.Targets) != 4 {
		t.Fatalf("%d targets, want 2 per kernel experiment: %+v", len(rep.Targets), rep.Targets)
	}
	for i, want := range []float64{0.5, 1.1 / 4, 1.05 / 3, 1.2 / 3} {
		if tg := rep.Targets[i]; !tg.Measured || !tg.Met || math.Abs(tg.Value-want) > 1e-9 {
			t.Errorf("target %s = %+v, want %.3f met", tg.Name, tg, want)
		}
	}
	// Control on no better than off misses.
	if tg := kernelTargets(rows(2, 2, 3), "kernel", "kernel network"); tg[0].Met || tg[1].Met || !tg[0].Measured {
		t.Errorf("targets with on no better than off: %+v", tg)
	}
	dir := t.TempDir()
	if _, err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	js, md := readReport(t, dir)
	if js.KernelFlow == nil || js.KernelCluster == nil || js.Network != NetworkKernel || len(js.NotOnKernel) != 1 {
		t.Fatalf("report.json: %+v", js)
	}
	for _, tc := range []struct {
		header string
		rows   []KernelRow
	}{{"| bulk sessions N | off: elapsed (ms)", rep.KernelFlow.Rows}, {"| low-priority joins N | off: elapsed (ms)", rep.KernelCluster.Rows}} {
		table := mdTableOf(t, md, tc.header, 2)
		for i, n := range []int{0, 2} {
			cells := table[i+1]
			for j, set := range kernelSettings() {
				r := kernelRow(tc.rows, set, n)
				if !near(cellNum(t, cells[1+3*j]), r.ElapsedMs, 0.1) || !near(cellNum(t, cells[2+3*j]), r.Slowdown, 0.01) || !near(cellNum(t, cells[3+3*j]), 100*r.LinkUse, 1) {
					t.Errorf("%s N=%d %s: cells %v, point %+v", tc.header, n, set, cells, r)
				}
			}
		}
	}
	for _, f := range []string{FileKernelSlowdown, FileKernelLinkUse, FileKernelClusterSlowdown, FileKernelClusterLinkUse} {
		if !strings.Contains(md, "]("+f+")") {
			t.Errorf("report.md does not show %s", f)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(md, "Not run on the kernel network: latency") {
		t.Error("report.md does not say which experiments did not run")
	}
}

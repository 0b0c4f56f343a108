package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

// tinyBaseBackupPlan is the base-backup experiment at a few seconds a
// condition: a 270 MB cluster, 4 s pgbench runs, a link of at most
// 20 MB/s. Beside the unmanaged backup an answer waits behind a full
// 2 MiB FIFO, 100 ms at 20 MB/s: the runs are long enough for the
// tpcb-like one (several round trips a transaction) to complete some.
func tinyBaseBackupPlan() Plan {
	return Plan{Name: "tiny", BaseBackup: BaseBackupPlan{DatabaseBytes: 270_000_000, Scale: 1, Clients: 4, Threads: 2,
		Time: 4 * time.Second, Lead: time.Second, MaxCapacity: 20_000_000}}
}

// TestRunBaseBackup is `sluice lab --backend postgres --experiment
// basebackup` at a small scale, against the real server, pgbench and
// pg_basebackup: every backup completes, the low-class one verifies,
// --max-rate is the low-class backup's rate and the backup keeps to it,
// the backup alone saturates the link, the unmanaged backup slows
// pgbench and the low class much less, and the report's files agree
// with its figures. Everything the run made is gone afterwards.
func TestRunBaseBackup(t *testing.T) {
	bin, ok := needPostgres(t, "72s")
	if !ok {
		return
	}
	for _, p := range []string{"pgbench", "pg_basebackup", "pg_verifybackup"} {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			testenv.Missing(t, "%s not in %s", p, bin)
			return
		}
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-basebackup-*"))
	out := t.TempDir()
	rep, progress := runProgress(t, 5*time.Minute, Options{Backend: BackendPostgres, Plan: tinyBaseBackupPlan(), Out: out, Logger: testLogger()})
	b := rep.BaseBackup
	if b == nil || b.Skipped != "" {
		t.Fatalf("base-backup experiment not run: %+v", b)
	}
	if rep.Latency != nil || rep.Flow != nil || rep.Concurrency != nil {
		t.Error("other experiments ran")
	}
	checkBaseBackupShape(t, b)
	checkBaseBackupFiles(t, out, b)
	for _, want := range []string{"== Experiment 6: base backup ==", "filling:", "database filled", "calibration: one bulk session streams",
		"progress: ", "backup ", "pg_verifybackup", "backup successfully verified", "avg vs no backup", "dropped bb_fill"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-basebackup-*"))
	if len(after) > len(before) {
		t.Errorf("temporary directories left: %v (before: %v)", after, before)
	}
	dir := strings.TrimSuffix(strings.SplitAfter(rep.Database, "initdb in ")[1], ", removed at the end)")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("throwaway server directory %s still there: %v", dir, err)
	}
}

// checkBaseBackupShape checks what the conditions must show, loosely
// enough for a busy machine.
func checkBaseBackupShape(t *testing.T, b *BaseBackupReport) {
	t.Helper()
	var names []string
	for _, c := range b.Conditions {
		names = append(names, c.Name)
	}
	if fmt.Sprint(names) != fmt.Sprint([]string{CondNoBackup, CondUnmanaged, CondLowPool, CondMaxRate}) {
		t.Fatalf("conditions %q", names)
	}
	if b.DatabaseBytes < 270_000_000 || !b.Calibrated || b.CapacityBytes < 1e6 {
		t.Errorf("database %d bytes, capacity %d (calibrated %v)", b.DatabaseBytes, b.CapacityBytes, b.Calibrated)
	}
	for _, c := range b.Conditions {
		if len(c.Runs) != 2 || c.Runs[0].Workload != WorkloadSelectOnly || c.Runs[1].Workload != WorkloadTPCB {
			t.Fatalf("%s: runs %+v", c.Name, c.Runs)
		}
		for _, r := range c.Runs {
			if r.Transactions == 0 || r.TPS <= 0 || r.AvgMs <= 0 || r.P99Ms < r.P50Ms || r.MaxMs < r.P99Ms {
				t.Errorf("%s, %s: %d transactions, %.1f TPS, avg %.2f, p50 %.2f, p99 %.2f, max %.2f ms", c.Name, r.Workload, r.Transactions, r.TPS, r.AvgMs, r.P50Ms, r.P99Ms, r.MaxMs)
			}
			// The link cannot carry more than its capacity (a little
			// slack for the counters' snapshots), and idle is what is
			// left of it.
			if r.LinkBytesPerSec <= 0 || r.LinkBytesPerSec > 1.05*float64(b.CapacityBytes) || !near(r.IdleBytesPerSec, float64(b.CapacityBytes)-r.LinkBytesPerSec, 1) {
				t.Errorf("%s, %s: link %.0f B/s, idle %.0f B/s, capacity %d", c.Name, r.Workload, r.LinkBytesPerSec, r.IdleBytesPerSec, b.CapacityBytes)
			}
		}
		k := c.Backup
		if c.Name == CondNoBackup {
			if k != nil {
				t.Errorf("a backup in condition %s", c.Name)
			}
			continue
		}
		if k == nil || !k.Completed || k.Seconds <= 0 {
			t.Fatalf("%s: backup %+v", c.Name, k)
		}
		// The backup holds the cluster (pg_database_size counts what
		// the backup copies, give or take the WAL and a few files).
		if k.DataBytes < b.DatabaseBytes*9/10 || k.DataBytes > b.DatabaseBytes*3/2 {
			t.Errorf("%s: backup data %d bytes, cluster %d", c.Name, k.DataBytes, b.DatabaseBytes)
		}
		if k.QuietSeconds <= 0 {
			t.Errorf("%s: the backup did not outlast the pgbench runs", c.Name)
		}
		for _, r := range c.Runs {
			if r.Coverage < 0.99 {
				t.Errorf("%s, %s: the backup covered %.2f of the run", c.Name, r.Workload, r.Coverage)
			}
		}
	}
	base, un, low, mr := b.Conditions[0], b.Conditions[1], b.Conditions[2], b.Conditions[3]
	if !low.Backup.Verified || !strings.Contains(low.Backup.Verify, "verified") {
		t.Errorf("low-class backup not verified: %q", low.Backup.Verify)
	}
	// Without a backup pgbench's own summary and the log agree.
	for _, r := range base.Runs {
		if r.PgbenchTPS <= 0 || r.TPS < 0.8*r.PgbenchTPS || r.TPS > 1.2*r.PgbenchTPS {
			t.Errorf("%s: %.1f TPS from the log, %.1f by pgbench", r.Workload, r.TPS, r.PgbenchTPS)
		}
	}
	// --max-rate is the low-class backup's data rate, and the backup
	// kept near it (never much above; a little below for its start).
	if want := int64(low.Backup.DataBytesPerSec/1024 + 0.5); mr.MaxRateKBps != want || b.MaxRateKBps != want {
		t.Errorf("--max-rate %dk (report %dk), want the low-class backup's %dk", mr.MaxRateKBps, b.MaxRateKBps, want)
	}
	if got, set := mr.Backup.DataBytesPerSec, float64(mr.MaxRateKBps*1024); got > 1.1*set || got < 0.6*set {
		t.Errorf("--max-rate backup averaged %.0f B/s against its setting of %.0f", got, set)
	}
	// The backup alone saturates the link, unmanaged and in the low
	// class.
	for _, c := range []BaseBackupCondition{un, low} {
		if q := c.Backup.QuietLinkBytesPerSec; q < 0.75*float64(b.CapacityBytes) {
			t.Errorf("%s: the backup alone moved %.0f B/s on a %d B/s link", c.Name, q, b.CapacityBytes)
		}
	}
	// The unmanaged backup slows pgbench; the low class much less.
	for _, w := range []string{WorkloadSelectOnly, WorkloadTPCB} {
		a0, a2, a3 := base.run(w).AvgMs, un.run(w).AvgMs, low.run(w).AvgMs
		if a2 < 2*a0 || a3 > a2/2 {
			t.Errorf("%s: average latency %.2f ms alone, %.2f unmanaged, %.2f low class", w, a0, a2, a3)
		}
	}
}

// checkBaseBackupFiles checks report.md and report.json against b.
func checkBaseBackupFiles(t *testing.T, dir string, b *BaseBackupReport) {
	t.Helper()
	js, md := readReport(t, dir)
	if js.BaseBackup == nil || len(js.BaseBackup.Conditions) != len(b.Conditions) {
		t.Fatalf("report.json base backup %+v", js.BaseBackup)
	}
	rows := mdTable(t, md, "| condition | workload |")
	i := 1
	for _, c := range js.BaseBackup.Conditions {
		for _, r := range c.Runs {
			if i >= len(rows) {
				t.Fatalf("OLTP table has %d rows", len(rows)-1)
			}
			cells := rows[i]
			i++
			if !strings.HasSuffix(cells[0], c.Name) || cells[1] != r.Workload {
				t.Errorf("OLTP row %d: %q, want %s %s", i-1, cells[:2], c.Name, r.Workload)
			}
			for _, ch := range []struct {
				cell    string
				v, prec float64
			}{{cells[2], r.TPS, 0.1}, {cells[3], r.AvgMs, 0.01}, {cells[4], r.P99Ms, 0.01}, {cells[6], r.LinkBytesPerSec / 1e6, 0.1}, {cells[8], max(0, r.IdleBytesPerSec) / 1e6, 0.1}} {
				if got := cellNum(t, ch.cell); !near(got, ch.v, ch.prec) {
					t.Errorf("OLTP row %d: %s, JSON %v", i-1, ch.cell, ch.v)
				}
			}
		}
	}
	if i != len(rows) {
		t.Errorf("OLTP table has %d rows, JSON %d runs", len(rows)-1, i-1)
	}
	brows := mdTable(t, md, "| condition | --max-rate |")
	j := 1
	for _, c := range js.BaseBackup.Conditions {
		if c.Backup == nil {
			continue
		}
		if j >= len(brows) {
			t.Fatalf("backup table has %d rows", len(brows)-1)
		}
		cells := brows[j]
		j++
		if !near(cellNum(t, cells[2]), c.Backup.Seconds, 0.1) || !near(cellNum(t, cells[4]), c.Backup.DataBytesPerSec/1e6, 0.1) {
			t.Errorf("backup row %q, JSON %+v", cells, c.Backup)
		}
		if (c.MaxRateKBps > 0) != (cells[1] != "-") || (cells[8] == "yes") != c.Backup.Verified {
			t.Errorf("backup row %q: max-rate %d, verified %v", cells, c.MaxRateKBps, c.Backup.Verified)
		}
	}
	if j != len(brows) {
		t.Errorf("backup table has %d rows, JSON %d backups", len(brows)-1, j-1)
	}
	lat := readChart(t, filepath.Join(dir, FileBBLatency))
	if len(lat.series) != 4 {
		t.Fatalf("latency chart series %v", lat.series)
	}
	dur := readChart(t, filepath.Join(dir, FileBBDuration))
	if pts, ok := dur.series["backup duration"]; len(dur.series) != 3 || !ok || len(pts) != 3 {
		t.Errorf("duration chart %+v, want 3 backups", dur.series)
	}
	if pts := dur.series[fmt.Sprintf("pgbench runs (2 x %.0f s)", b.RunSeconds)]; len(pts) != 4 {
		t.Errorf("duration chart: pgbench runs %v, want one a condition", pts)
	}
	// Each backup is longer than its time alone: higher on the chart.
	if d, a := dur.series["backup duration"], dur.series["backup alone after pgbench"]; len(a) == len(d) {
		for i := range d {
			if d[i][1] >= a[i][1] {
				t.Errorf("duration chart: backup %d at y=%v, alone at y=%v", i, d[i][1], a[i][1])
			}
		}
	} else {
		t.Errorf("duration chart: %d durations, %d times alone", len(d), len(a))
	}
}

// TestRunBaseBackupSkipped: on the embedded backend the experiment is
// skipped with its reason, in the progress and the report.
func TestRunBaseBackupSkipped(t *testing.T) {
	var progress testenv.Buffer
	out := t.TempDir()
	rep, err := Run(context.Background(), Options{Plan: tinyBaseBackupPlan(), Out: out, Progress: &progress, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BaseBackup == nil || !strings.Contains(rep.BaseBackup.Skipped, "--backend postgres") {
		t.Fatalf("report %+v", rep.BaseBackup)
	}
	if !strings.Contains(progress.String(), "skipped: it needs") {
		t.Errorf("progress:\n%s", progress.String())
	}
	md, _ := os.ReadFile(filepath.Join(out, FileMarkdown))
	if !strings.Contains(string(md), "## Experiment 6: base backup\n\nNot measured: it needs") {
		t.Errorf("report.md:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(out, FileBBLatency)); !os.IsNotExist(err) {
		t.Errorf("chart written without measurements: %v", err)
	}
}

func TestParsePgbenchLog(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want []pgbenchTxn
		err  string
	}{
		{"pgbench 15", "0 1 1234 0 1700000000 5\n1 1 987 0 1700000000 999999\n",
			[]pgbenchTxn{{endUs: 1700000000_000005, latencyUs: 1234}, {endUs: 1700000000_999999, latencyUs: 987}}, ""},
		{"lag and retries, blank lines", "\n3 7 250 0 1 0 12 0\n\n",
			[]pgbenchTxn{{endUs: 1_000_000, latencyUs: 250}}, ""},
		{"failed and skipped", "0 2 failed 0 10 20\n0 3 skipped 0 10 30\n",
			[]pgbenchTxn{{endUs: 10_000_020, failed: true}, {endUs: 10_000_030, failed: true}}, ""},
		{"empty", "", nil, ""},
		{"short line", "0 1 1234 0 1700000000\n", nil, "5 fields"},
		{"bad latency", "0 1 12.5 0 1 2\n", nil, "bad latency"},
		{"negative latency", "0 1 -3 0 1 2\n", nil, "bad latency"},
		{"microseconds out of range", "0 1 3 0 1 1000000\n", nil, "bad time"},
		{"bad epoch", "0 1 3 0 x 1\n", nil, "bad time"},
		{"before the epoch", "0 1 3000001 0 3 0\n", nil, "before the epoch"},
	} {
		got, err := parsePgbenchLog([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

func TestParsePgbenchOutput(t *testing.T) {
	out := `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: select only>
scaling factor: 1
number of clients: 4
number of threads: 2
duration: 4 s
number of transactions actually processed: 18983
latency average = 0.842 ms
latency stddev = 1.1 ms
initial connection time = 12.345 ms
tps = 4745.812345 (without initial connection time)
`
	if tps, avg := parsePgbenchOutput(out); tps != 4745.812345 || avg != 0.842 {
		t.Errorf("tps %v, latency average %v", tps, avg)
	}
	if tps, avg := parsePgbenchOutput("tps = x\nlatency average = 3 s\n"); tps != 0 || avg != 0 {
		t.Errorf("from garbage: tps %v, latency average %v", tps, avg)
	}
}

// TestPgbenchWindow: figures over the part of a run before the backup
// ended, from the first transaction's start.
func TestPgbenchWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int64) int64 { return t0.UnixMicro() + ms*1000 }
	var r PgbenchRun
	// Ten transactions of 10 ms ... 100 ms ending at 100, 200, ... 1000
	// ms, the first starting at 90 ms; one failed at 550 ms.
	for i := int64(1); i <= 10; i++ {
		r.txns = append(r.txns, pgbenchTxn{endUs: at(100 * i), latencyUs: 10_000 * i})
	}
	r.txns = append(r.txns, pgbenchTxn{endUs: at(550), failed: true})
	r.window(t0.Add(time.Hour))
	if r.Transactions != 10 || r.Failed != 1 || !near(r.WindowSeconds, 0.91, 1e-9) || r.Coverage != 1 || !near(r.AvgMs, 55, 1e-9) || r.MaxMs != 100 || r.P50Ms != 50 || r.P99Ms != 100 {
		t.Errorf("whole run: %+v", r)
	}
	if !near(r.TPS, 10/0.91, 1e-9) {
		t.Errorf("TPS %v", r.TPS)
	}
	r.window(t0.Add(500 * time.Millisecond))
	if r.Transactions != 5 || r.Failed != 0 || !near(r.WindowSeconds, 0.41, 1e-9) || !near(r.Coverage, 0.41/0.91, 1e-9) || !near(r.AvgMs, 30, 1e-9) || r.MaxMs != 50 {
		t.Errorf("backup ended at 500 ms: %+v", r)
	}
	var empty PgbenchRun
	empty.window(t0)
	if empty.Transactions != 0 || empty.TPS != 0 || empty.Coverage != 0 {
		t.Errorf("no log: %+v", empty)
	}
}

// sampleBaseBackup is a base-backup report with plausible figures.
func sampleBaseBackup() *BaseBackupReport {
	b := &BaseBackupReport{DatabaseBytes: 1150e6, Scale: 10, Clients: 4, Threads: 2, RunSeconds: 15, LeadSeconds: 2,
		CapacityBytes: 20e6, Capacity: "20MB/s", Calibrated: true, StreamMBps: 230, LinkQueue: LinkQueue{QueueBytes: 2 << 20, LowQueueBytes: 64 << 10},
		MaxRateKBps: 18500, Setup: []string{"CREATE RESOURCE POOL bb_low WITH (network_priority='low')", "SET network_control = on"}}
	for i, name := range []string{CondNoBackup, CondUnmanaged, CondLowPool, CondMaxRate} {
		c := BaseBackupCondition{Name: name}
		slow := []float64{1, 100, 4, 20}[i]
		for j, w := range []string{WorkloadSelectOnly, WorkloadTPCB} {
			avg := slow * []float64{0.8, 9}[j]
			link := []float64{1.5e6, 19.9e6, 19.9e6, 19e6}[i]
			c.Runs = append(c.Runs, PgbenchRun{Workload: w, Transactions: 1000, WindowSeconds: 15, Coverage: 1, TPS: 4 / avg * 1000,
				AvgMs: avg, P50Ms: avg * 0.9, P99Ms: avg * 3, MaxMs: avg * 5, LinkBytesPerSec: link, IdleBytesPerSec: 20e6 - link})
		}
		if i > 0 {
			secs := []float64{0, 58, 63, 64}[i]
			c.Backup = &BackupResult{Completed: true, Seconds: secs, Bytes: 1200e6, WALBytes: 50e6, DataBytes: 1150e6,
				BytesPerSec: 1200e6 / secs, DataBytesPerSec: 1150e6 / secs, QuietSeconds: secs - 32,
				QuietLinkBytesPerSec: []float64{0, 19.9e6, 19.9e6, 18.9e6}[i]}
			c.Backup.QuietIdleBytesPerSec = 20e6 - c.Backup.QuietLinkBytesPerSec
		}
		if name == CondLowPool {
			c.Backup.Verified, c.Backup.Verify = true, "backup successfully verified"
		}
		if name == CondMaxRate {
			c.MaxRateKBps = b.MaxRateKBps
		}
		b.Conditions = append(b.Conditions, c)
	}
	return b
}

// TestBaseBackupReportFiles: report.md's tables, the findings and the
// charts carry the report's figures.
func TestBaseBackupReportFiles(t *testing.T) {
	rep := &Report{Plan: "full", Backend: BackendPostgres, Database: "throwaway", Protocol: protoPostgres, BaseBackup: sampleBaseBackup()}
	rep.Targets = rep.evaluate()
	dir, files := writeFiles(t, rep)
	for _, f := range []string{FileMarkdown, FileJSON, FileBBLatency, FileBBDuration} {
		if !slices.Contains(files, filepath.Join(dir, f)) {
			t.Errorf("%s not written: %v", f, files)
		}
	}
	checkBaseBackupFiles(t, dir, rep.BaseBackup)
	md, _ := os.ReadFile(filepath.Join(dir, FileMarkdown))
	for _, want := range []string{
		"## Experiment 6: base backup", "`pg_basebackup --max-rate=18500k`", "CREATE USER bb_backup RESOURCE POOL 'bb_low'",
		"- select-only: average latency 0.80 ms alone, 80.00 ms (100.0x) beside the unmanaged backup, 3.20 ms (4.0x)",
		"the `--max-rate` backup moved 18.9 MB/s and left 1.1 MB/s idle", "The backup took 58.0 s unmanaged, 63.0 s in the low class and 64.0 s",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Four conditions on the latency chart, left to right.
	lat := readChart(t, filepath.Join(dir, FileBBLatency))
	for name, pts := range lat.series {
		if len(pts) != 4 {
			t.Errorf("latency chart %s: %d points", name, len(pts))
		}
		for i := 1; i < len(pts); i++ {
			if pts[i][0] <= pts[i-1][0] {
				t.Errorf("latency chart %s: x not increasing: %v", name, pts)
			}
		}
	}
	// Higher on the chart (smaller y in pixels) where slower: the
	// unmanaged condition's average above the low class's.
	if avg := lat.series["select-only: average"]; len(avg) == 4 && avg[1][1] >= avg[2][1] {
		t.Errorf("select-only average: unmanaged at y=%v, low class at y=%v", avg[1][1], avg[2][1])
	}
}

func TestPlanOnlyBaseBackup(t *testing.T) {
	p, err := FullPlan().Only(ExperimentBaseBackup)
	if err != nil {
		t.Fatal(err)
	}
	if p.BaseBackup.DatabaseBytes < 1e9 || len(p.Latency.RTTs)+len(p.Flow.Ns)+len(p.Concurrency.Limits) != 0 {
		t.Errorf("Only(basebackup) = %+v", p)
	}
	if q, _ := FullPlan().Only(ExperimentFlow); q.BaseBackup.DatabaseBytes != 0 {
		t.Errorf("Only(flow) keeps the base-backup experiment")
	}
	if QuickPlan().BaseBackup.DatabaseBytes != 0 {
		t.Error("the quick plan has the base-backup experiment")
	}
	var ue *UsageError
	if _, err := QuickPlan().Only(ExperimentBaseBackup); !errors.As(err, &ue) {
		t.Errorf("quick Only(basebackup) = %v, want a UsageError", err)
	}
	for _, tt := range []struct {
		b   BaseBackupPlan
		err string
	}{
		{BaseBackupPlan{DatabaseBytes: 1 << 20}, "out of range"},
		{BaseBackupPlan{DatabaseBytes: 64 << 20, Time: 500 * time.Millisecond}, "at least 1 s"},
	} {
		o := Options{Plan: Plan{BaseBackup: tt.b}}
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &ue) {
			t.Errorf("validate(%+v) = %v, want %q", tt.b, err, tt.err)
		}
	}
	o := Options{Plan: Plan{BaseBackup: BaseBackupPlan{DatabaseBytes: 64 << 20, Clients: 1}}}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if b := o.Plan.BaseBackup; b.Scale != 10 || b.Threads != 1 || b.Time != 15*time.Second || b.Lead != 2*time.Second || b.MaxCapacity != 100e6 {
		t.Errorf("defaults not applied: %+v", b)
	}
}

func FuzzParsePgbenchLog(f *testing.F) {
	for _, s := range []string{
		"0 1 1234 0 1700000000 5\n1 1 987 0 1700000000 999999\n", "3 7 250 0 1 0 12 0\n", "0 2 failed 0 10 20\n",
		"0 1 1 0 9223372036854 775807\n", "0 1 1 0 1 2", "\n\n", "a b c d e f",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		txns, err := parsePgbenchLog(data)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, x := range txns {
			if x.endUs < 0 || x.latencyUs < 0 || (x.failed && x.latencyUs != 0) {
				t.Fatalf("parsed %+v from %q", x, data)
			}
			lat := fmt.Sprint(x.latencyUs)
			if x.failed {
				lat = "failed"
			}
			fmt.Fprintf(&b, "0 0 %s 0 %d %d\n", lat, x.endUs/1e6, x.endUs%1e6)
		}
		again, err := parsePgbenchLog([]byte(b.String()))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(txns) {
			t.Fatalf("round trip of %q: %v, %v; want %v", data, again, err, txns)
		}
		var r PgbenchRun
		r.txns = txns
		r.window(time.UnixMicro(math.MaxInt64))
		if r.Transactions+r.Failed != len(txns) || r.Coverage < 0 || r.Coverage > 1 || r.TPS < 0 || math.IsNaN(r.AvgMs) {
			t.Fatalf("window of %q: %+v", data, r)
		}
	})
}

func FuzzParsePgbenchOutput(f *testing.F) {
	for _, s := range []string{
		"latency average = 0.842 ms\ntps = 4745.812345 (without initial connection time)\n", "tps = 1e400\n",
		"latency average = -1 ms\n", "tps = NaN\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		tps, avg := parsePgbenchOutput(out)
		if tps < 0 || avg < 0 || math.IsNaN(tps) || math.IsNaN(avg) || math.IsInf(tps, 0) || math.IsInf(avg, 0) {
			t.Fatalf("parsePgbenchOutput(%q) = %v, %v", out, tps, avg)
		}
	})
}

// TestRunBaseBackupCancelled: cancelled while a backup streams, Run
// returns the cancellation and leaves nothing behind: no backup or log
// directory, no server directory.
func TestRunBaseBackupCancelled(t *testing.T) {
	if _, ok := needPostgres(t, "30s"); !ok {
		return
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-basebackup-*"))
	o := Options{Backend: BackendPostgres, Plan: tinyBaseBackupPlan(), Logger: testLogger()}
	out, err := cancelRun(t, o, "unmanaged, select-only:", 3*time.Minute, 2*time.Minute, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want the cancellation\n%s", err, out)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-basebackup-*"))
	if len(after) > len(before) {
		t.Errorf("temporary directories left: %v (before: %v)", after, before)
	}
	i := strings.Index(out, "initdb in ")
	if i < 0 {
		t.Fatalf("progress names no server directory:\n%s", out)
	}
	dir, _, _ := strings.Cut(out[i+len("initdb in "):], ",")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("throwaway server directory %s still there: %v", dir, err)
	}
}

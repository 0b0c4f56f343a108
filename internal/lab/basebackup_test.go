package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/testenv"
)

// tinyBaseBackupPlan is the base-backup experiment at a few seconds a
// condition: a 256 MiB cluster, 4 s pgbench runs, a link of at most
// 20 MB/s. Beside the unmanaged backup an answer waits behind a full
// 2 MiB FIFO, 100 ms at 20 MB/s: the runs are long enough for the
// tpcb-like one (several round trips a transaction) to complete some.
func tinyBaseBackupPlan() Plan {
	return Plan{Name: "tiny", BaseBackup: BaseBackupPlan{DatabaseBytes: 256 << 20, Scale: 1, Clients: 4, Threads: 2,
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
	bin, err := pgtemp.FindBinaries("")
	if err != nil {
		testenv.Missing(t, "%v", err)
		return
	}
	for _, p := range []string{"pgbench", "pg_basebackup", "pg_verifybackup"} {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			testenv.Missing(t, "%s not in %s", p, bin)
			return
		}
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-basebackup-*"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress testenv.Buffer
	out := t.TempDir()
	rep, err := Run(ctx, Options{Backend: BackendPostgres, Plan: tinyBaseBackupPlan(), Out: out, Progress: &progress, Logger: testLogger()})
	if testing.Verbose() {
		t.Logf("progress:\n%s", progress.String())
	}
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	b := rep.BaseBackup
	if b == nil || b.Skipped != "" {
		t.Fatalf("base-backup experiment not run: %+v", b)
	}
	if rep.Latency != nil || rep.Flow != nil || rep.Concurrency != nil {
		t.Error("other experiments ran")
	}
	checkBaseBackupShape(t, b)
	checkBaseBackupFiles(t, out, b)
	for _, want := range []string{"== Experiment 4: base backup ==", "filling:", "database filled", "calibration: one bulk session streams",
		"progress: ", "backup ", "pg_verifybackup", "backup successfully verified", "avg vs no backup", "dropped bb_fill"} {
		if !strings.Contains(progress.String(), want) {
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
	if b.DatabaseBytes < 256<<20 || !b.Calibrated || b.CapacityBytes < 1e6 {
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
	data, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	var js Report
	if err := json.Unmarshal(data, &js); err != nil {
		t.Fatal(err)
	}
	if js.BaseBackup == nil || len(js.BaseBackup.Conditions) != len(b.Conditions) {
		t.Fatalf("report.json base backup %+v", js.BaseBackup)
	}
	md, err := os.ReadFile(filepath.Join(dir, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	rows := mdTable(t, string(md), "| condition | workload |")
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
	brows := mdTable(t, string(md), "| condition | --max-rate |")
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
	if pts, ok := dur.series["backup duration"]; len(dur.series) != 1 || !ok || len(pts) != 3 {
		t.Errorf("duration chart %+v, want 3 backups", dur.series)
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
	if !strings.Contains(string(md), "## Experiment 4: base backup\n\nNot measured: it needs") {
		t.Errorf("report.md:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(out, FileBBLatency)); !os.IsNotExist(err) {
		t.Errorf("chart written without measurements: %v", err)
	}
}

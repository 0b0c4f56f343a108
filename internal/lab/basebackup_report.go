package lab

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/units"
)

// The base-backup experiment's charts.
const (
	FileBBLatency  = "basebackup_latency.svg"
	FileBBDuration = "basebackup_duration.svg"
)

// BaseBackupReport is the base-backup experiment's outcome.
type BaseBackupReport struct {
	// Skipped, when set, says why nothing was measured; the other fields
	// are then empty.
	Skipped string `json:"skipped,omitempty"`
	// DatabaseBytes is the size of the cluster the backups copied.
	DatabaseBytes int64 `json:"database_bytes,omitempty"`
	// Scale, Clients and Threads are pgbench's -s, -c and -j;
	// RunSeconds each run's -T; LeadSeconds how long each backup ran
	// before the first run started.
	Scale       int     `json:"pgbench_scale,omitempty"`
	Clients     int     `json:"pgbench_clients,omitempty"`
	Threads     int     `json:"pgbench_threads,omitempty"`
	RunSeconds  float64 `json:"pgbench_seconds,omitempty"`
	LeadSeconds float64 `json:"lead_seconds,omitempty"`
	// CapacityBytes is the link capacity in bytes/s; Capacity spells it.
	CapacityBytes int64  `json:"capacity_bytes_per_second,omitempty"`
	Capacity      string `json:"capacity,omitempty"`
	// Calibrated is set when the capacity came from StreamMBps, what one
	// COPY session streamed through an unlimited link.
	Calibrated bool    `json:"calibrated,omitempty"`
	StreamMBps float64 `json:"one_session_stream_mb_per_s,omitempty"`
	// QueueBytes is the link's device FIFO; LowQueueBytes the bound on
	// low-class bytes in it.
	QueueBytes    int64 `json:"device_queue_bytes,omitempty"`
	LowQueueBytes int64 `json:"low_priority_queue_bytes,omitempty"`
	// MaxRateKBps is the --max-rate of the last condition, in kB/s
	// (1024 bytes): the low-priority pool's backup's data rate.
	MaxRateKBps int64 `json:"max_rate_kb_per_s,omitempty"`
	// Setup are the console statements made before the conditions;
	// the low-priority condition also binds the role to the pool.
	Setup      []string              `json:"setup,omitempty"`
	Conditions []BaseBackupCondition `json:"conditions,omitempty"`
}

// BaseBackupCondition is one condition: the pgbench runs and the backup
// beside them.
type BaseBackupCondition struct {
	Name string `json:"name"`
	// MaxRateKBps is pg_basebackup's --max-rate, kB/s; 0 for none.
	MaxRateKBps int64        `json:"max_rate_kb_per_s,omitempty"`
	Runs        []PgbenchRun `json:"pgbench"`
	// Backup is nil for the condition without one.
	Backup *BackupResult `json:"backup,omitempty"`
}

// PgbenchRun is one pgbench run's figures, from its per-transaction log,
// over the part of the run the backup was running (all of it without a
// backup).
type PgbenchRun struct {
	Workload string `json:"workload"`
	Command  string `json:"command"`
	// Transactions completed in the window and failed ones.
	Transactions int `json:"transactions"`
	Failed       int `json:"failed,omitempty"`
	// WindowSeconds is the window's length, from the first transaction's
	// start to the last one's end or the backup's end if sooner;
	// Coverage is that over the whole run's (1 when the backup outlasted
	// the run).
	WindowSeconds float64 `json:"window_seconds"`
	Coverage      float64 `json:"backup_coverage"`
	TPS           float64 `json:"tps"`
	AvgMs         float64 `json:"latency_avg_ms"`
	P50Ms         float64 `json:"latency_p50_ms"`
	P99Ms         float64 `json:"latency_p99_ms"`
	MaxMs         float64 `json:"latency_max_ms"`
	// PgbenchTPS and PgbenchAvgMs are pgbench's own summary of the whole
	// run (tps without the initial connection time, latency average).
	PgbenchTPS   float64 `json:"pgbench_tps"`
	PgbenchAvgMs float64 `json:"pgbench_latency_avg_ms"`
	// LinkBytesPerSec is what left the link, server to client, during
	// the run, all classes; LowBytesPerSec the low class's part;
	// IdleBytesPerSec the capacity minus LinkBytesPerSec.
	LinkBytesPerSec float64 `json:"link_bytes_per_second"`
	LowBytesPerSec  float64 `json:"low_class_bytes_per_second"`
	IdleBytesPerSec float64 `json:"idle_bytes_per_second"`

	start time.Time    // when the process started
	txns  []pgbenchTxn // the log, all threads
}

// BackupResult is what one pg_basebackup did.
type BackupResult struct {
	Completed bool `json:"completed"`
	// Seconds is from the start of pg_basebackup to its exit.
	Seconds float64 `json:"seconds"`
	// Bytes is the backup's size on disk, WALBytes its pg_wal (streamed
	// beside the data, -X stream), DataBytes the rest: what --max-rate
	// paces.
	Bytes     int64 `json:"bytes"`
	WALBytes  int64 `json:"wal_bytes"`
	DataBytes int64 `json:"data_bytes"`
	// BytesPerSec and DataBytesPerSec are Bytes and DataBytes over
	// Seconds.
	BytesPerSec     float64 `json:"bytes_per_second"`
	DataBytesPerSec float64 `json:"data_bytes_per_second"`
	// QuietSeconds is how long the backup ran on after the pgbench runs
	// (0: it ended before them); QuietLinkBytesPerSec what left the link
	// then, QuietIdleBytesPerSec the capacity minus that.
	QuietSeconds         float64 `json:"quiet_seconds"`
	QuietLinkBytesPerSec float64 `json:"quiet_link_bytes_per_second"`
	QuietIdleBytesPerSec float64 `json:"quiet_idle_bytes_per_second"`
	// Verified is set when pg_verifybackup accepted the backup; Verify
	// is what it said.
	Verified bool   `json:"verified,omitempty"`
	Verify   string `json:"verify,omitempty"`
}

// pgbenchTxn is one line of pgbench's per-transaction log.
type pgbenchTxn struct {
	// endUs is the completion time, µs since the Unix epoch.
	endUs int64
	// latencyUs is the transaction's time, µs; 0 when failed.
	latencyUs int64
	failed    bool
}

// parsePgbenchLog reads pgbench's per-transaction log (-l):
// "client_id transaction_no time script_no time_epoch time_us
// [schedule_lag] [retries]" a line, time in µs or a word ("failed",
// "skipped", "serialization", "deadlock") for a transaction that did not
// complete. Blank lines are skipped; any other line is an error, as is a
// transaction that would have begun before the epoch.
func parsePgbenchLog(data []byte) ([]pgbenchTxn, error) {
	var out []pgbenchTxn
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 6 {
			return nil, fmt.Errorf("pgbench log line %d: %d fields, want at least 6", n, len(f))
		}
		var t pgbenchTxn
		sec, err1 := strconv.ParseInt(f[4], 10, 64)
		us, err2 := strconv.ParseInt(f[5], 10, 64)
		if err1 != nil || err2 != nil || sec < 0 || us < 0 || us >= 1e6 || sec > math.MaxInt64/1_000_000-1 {
			return nil, fmt.Errorf("pgbench log line %d: bad time %q %q", n, f[4], f[5])
		}
		t.endUs = sec*1e6 + us
		if lat, err := strconv.ParseInt(f[2], 10, 64); err == nil && lat >= 0 {
			if lat > t.endUs {
				return nil, fmt.Errorf("pgbench log line %d: latency %d µs began before the epoch", n, lat)
			}
			t.latencyUs = lat
		} else if isWord(f[2]) {
			t.failed = true
		} else {
			return nil, fmt.Errorf("pgbench log line %d: bad latency %q", n, f[2])
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// isWord reports whether s is lower-case letters only.
func isWord(s string) bool {
	for _, c := range s {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}

// parsePgbenchOutput reads pgbench's summary: "tps = 1234.5 (without
// initial connection time)" and "latency average = 3.2 ms"; 0 for what
// is missing.
func parsePgbenchOutput(out string) (tps, avgMs float64) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "tps = "); ok {
			if f := strings.Fields(v); len(f) > 0 {
				if x, err := strconv.ParseFloat(f[0], 64); err == nil && x >= 0 && !math.IsInf(x, 0) {
					tps = x
				}
			}
		}
		if v, ok := strings.CutPrefix(line, "latency average = "); ok {
			if f := strings.Fields(v); len(f) == 2 && f[1] == "ms" {
				if x, err := strconv.ParseFloat(f[0], 64); err == nil && x >= 0 && !math.IsInf(x, 0) {
					avgMs = x
				}
			}
		}
	}
	return tps, avgMs
}

// window fills r's figures from its log, counting the transactions that
// completed by end (the backup's end, or after the run), from the first
// transaction's start.
func (r *PgbenchRun) window(end time.Time) {
	if len(r.txns) == 0 {
		return
	}
	first, last := int64(math.MaxInt64), int64(0)
	for _, t := range r.txns {
		first = min(first, t.endUs-t.latencyUs)
		last = max(last, t.endUs)
	}
	endUs := min(last, end.UnixMicro())
	var lat []float64
	var sum float64
	r.Transactions, r.Failed = 0, 0
	for _, t := range r.txns {
		if t.endUs > endUs {
			continue
		}
		if t.failed {
			r.Failed++
			continue
		}
		ms := float64(t.latencyUs) / 1000
		lat = append(lat, ms)
		sum += ms
	}
	r.Transactions = len(lat)
	if whole := last - first; whole > 0 {
		r.WindowSeconds = float64(endUs-first) / 1e6
		r.Coverage = min(1, max(0, float64(endUs-first)/float64(whole)))
	}
	if r.WindowSeconds > 0 {
		r.TPS = float64(r.Transactions) / r.WindowSeconds
	}
	if len(lat) > 0 {
		r.AvgMs = sum / float64(len(lat))
		r.P50Ms = percentile(lat, 0.5)
		r.P99Ms = percentile(lat, 0.99)
		_, _, _, r.MaxMs = summarize(lat)
	}
}

// condition returns the named condition, or nil.
func (b *BaseBackupReport) condition(name string) *BaseBackupCondition {
	for i := range b.Conditions {
		if b.Conditions[i].Name == name {
			return &b.Conditions[i]
		}
	}
	return nil
}

// run returns the condition's run of workload, or nil.
func (c *BaseBackupCondition) run(workload string) *PgbenchRun {
	for i := range c.Runs {
		if c.Runs[i].Workload == workload {
			return &c.Runs[i]
		}
	}
	return nil
}

// mbps spells bytes/s as MB/s with one decimal.
func mbps(v float64) string { return f1(v / 1e6) }

// oltpTable returns the pgbench runs, one row per condition and
// workload.
func (b *BaseBackupReport) oltpTable() table {
	t := table{head: []string{"condition", "workload", "TPS", "avg latency (ms)", "p99 (ms)", "avg vs no backup", "link MB/s", "low class MB/s", "idle MB/s"}}
	for i, c := range b.Conditions {
		for _, r := range c.Runs {
			vs := "-"
			if base := b.Conditions[0].run(r.Workload); base != nil && base.AvgMs > 0 {
				vs = x2(r.AvgMs / base.AvgMs)
			}
			t.rows = append(t.rows, []string{fmt.Sprintf("%d. %s", i+1, c.Name), r.Workload, f1(r.TPS), f2(r.AvgMs), f2(r.P99Ms), vs,
				mbps(r.LinkBytesPerSec), mbps(r.LowBytesPerSec), mbps(max(0, r.IdleBytesPerSec))})
		}
	}
	return t
}

// backupTable returns the backups, one row per condition with one.
func (b *BaseBackupReport) backupTable() table {
	t := table{head: []string{"condition", "--max-rate", "duration (s)", "size (MB)", "data MB/s", "alone: link MB/s", "alone: idle MB/s", "alone (s)", "verified"}}
	for i, c := range b.Conditions {
		k := c.Backup
		if k == nil {
			continue
		}
		rateCell := "-"
		if c.MaxRateKBps > 0 {
			rateCell = fmt.Sprintf("%dk", c.MaxRateKBps)
		}
		link, idle := "-", "-"
		if k.QuietSeconds > 0 {
			link, idle = mbps(k.QuietLinkBytesPerSec), mbps(max(0, k.QuietIdleBytesPerSec))
		}
		verified := "-"
		if k.Verified {
			verified = "yes"
		}
		t.rows = append(t.rows, []string{fmt.Sprintf("%d. %s", i+1, c.Name), rateCell, f1(k.Seconds), f1(float64(k.Bytes) / 1e6),
			mbps(k.DataBytesPerSec), link, idle, f1(k.QuietSeconds), verified})
	}
	return t
}

// tables prints the experiment's tables on p.
func (b *BaseBackupReport) tables(p *printer) {
	if b.Skipped != "" || len(b.Conditions) == 0 {
		return
	}
	p.table(b.oltpTable())
	p.table(b.backupTable())
}

// LatencyChart is pgbench's average and p99 latency per condition, on a
// logarithmic axis.
func (b *BaseBackupReport) LatencyChart() *svg.Chart {
	c := &svg.Chart{
		Title:  fmt.Sprintf("pgbench latency beside pg_basebackup (link %s)", b.Capacity),
		XLabel: "condition: " + b.conditionLegend(),
		YLabel: "latency (ms, log scale)",
		LogY:   true,
	}
	for _, w := range []string{WorkloadSelectOnly, WorkloadTPCB} {
		avg := svg.Series{Name: w + ": average"}
		p99 := svg.Series{Name: w + ": p99", Dashed: true}
		for i, cond := range b.Conditions {
			if r := cond.run(w); r != nil && r.Transactions > 0 {
				avg.Points = append(avg.Points, svg.Point{X: float64(i + 1), Y: r.AvgMs})
				p99.Points = append(p99.Points, svg.Point{X: float64(i + 1), Y: r.P99Ms})
			}
		}
		c.Series = append(c.Series, avg, p99)
	}
	return c
}

// DurationChart is the backup's duration per condition, and how long it
// ran on alone after pgbench, beside the pgbench runs' own time and a
// guide at the time a backup at the link's full capacity would take.
func (b *BaseBackupReport) DurationChart() *svg.Chart {
	c := &svg.Chart{
		Title:  fmt.Sprintf("pg_basebackup of %s beside pgbench (link %s)", units.FormatBytes(b.DatabaseBytes), b.Capacity),
		XLabel: "condition: " + b.conditionLegend(),
		YLabel: "time (s)",
		ZeroY:  true,
	}
	if b.CapacityBytes > 0 {
		c.Guides = []svg.Guide{{Y: float64(b.DatabaseBytes) / float64(b.CapacityBytes), Label: "the cluster at the link's capacity"}}
	}
	dur := svg.Series{Name: "backup duration"}
	alone := svg.Series{Name: "backup alone after pgbench"}
	runs := svg.Series{Name: fmt.Sprintf("pgbench runs (2 x %.0f s)", b.RunSeconds), Dashed: true}
	for i, cond := range b.Conditions {
		x := float64(i + 1)
		runs.Points = append(runs.Points, svg.Point{X: x, Y: 2 * b.RunSeconds})
		if k := cond.Backup; k != nil && k.Completed {
			dur.Points = append(dur.Points, svg.Point{X: x, Y: k.Seconds})
			alone.Points = append(alone.Points, svg.Point{X: x, Y: k.QuietSeconds})
		}
	}
	c.Series = []svg.Series{dur, alone, runs}
	return c
}

// conditionLegend numbers the conditions: "1 no backup, 2 unmanaged, ...".
func (b *BaseBackupReport) conditionLegend() string {
	var parts []string
	for i, c := range b.Conditions {
		parts = append(parts, fmt.Sprintf("%d %s", i+1, c.Name))
	}
	return strings.Join(parts, ", ")
}

func (b *BaseBackupReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Experiment 6: base backup\n\n")
	if b.Skipped != "" {
		fmt.Fprintf(w, "Not measured: %s.\n\n", b.Skipped)
		return
	}
	drain := func(n int64) float64 { return float64(n) / float64(max(1, b.CapacityBytes)) * 1000 }
	fmt.Fprintf(w, "A `pg_basebackup` (or a replica rebuild) streams the whole cluster as fast as the path allows, and OLTP on the same link waits behind it. "+
		"The primary here holds %s (pgbench's tables at scale %d and a logged table of wide rows). "+
		"pgbench (%d clients, %d threads; select-only, then tpcb-like, %.0f s each) runs through one sluice route and pg_basebackup "+
		"(`-X stream -c fast`, as a replication role of its own) through another; both routes share one link of %s, with a device FIFO of %s (%.0f ms to drain). ",
		units.FormatBytes(b.DatabaseBytes), b.Scale, b.Clients, b.Threads, b.RunSeconds, b.Capacity, units.FormatBytes(b.QueueBytes), drain(b.QueueBytes))
	if b.Calibrated {
		fmt.Fprintf(w, "The capacity is the largest of 100, 50, 20, 10, 5, 2 or 1 MB/s at most a tenth of what one COPY session streamed through an unlimited link (%.0f MB/s), "+
			"and low enough that a backup at full capacity outlasts both pgbench runs, so the backup alone saturates it. ", b.StreamMBps)
	}
	fmt.Fprintf(w, "Each backup starts %.0f s before the first pgbench run and runs on alone after the second until it ends. The conditions:\n\n", b.LeadSeconds)
	fmt.Fprintf(w, "1. **%s**: pgbench alone.\n", CondNoBackup)
	fmt.Fprintf(w, "2. **%s**: the backup's role has no pool binding, so its bytes are in the normal class with pgbench's.\n", CondUnmanaged)
	fmt.Fprintf(w, "3. **%s**: the role is bound to a pool with `network_priority='low'` (`network_control` on):\n\n```sql\n%s;\nCREATE USER %s RESOURCE POOL '%s';\n```\n\n",
		CondLowPool, strings.Join(b.Setup, ";\n"), bbRole, bbPool)
	fmt.Fprintf(w, "4. **%s**: what operators do today, `pg_basebackup --max-rate=%dk` (the data rate the low-priority backup averaged), unbound again.\n\n", CondMaxRate, b.MaxRateKBps)
	fmt.Fprintf(w, "pgbench's figures come from its per-transaction log (`-l`), over the part of each run the backup was running; "+
		"link MB/s is what left the link from the server towards the clients during the run (sluice's link counters, SHOW LINKS), idle the capacity minus that.\n\n")
	b.oltpTable().markdown(w)
	fmt.Fprintf(w, "\n")
	b.backupTable().markdown(w)
	fmt.Fprintf(w, "\nData MB/s is the backup's data files over its duration (`--max-rate` paces those, not the WAL streamed beside them); "+
		"*alone* is the backup's tail after the pgbench runs, OLTP quiet.\n\n")
	fmt.Fprintf(w, "![pgbench latency per condition](%s)\n\n![backup duration per condition](%s)\n\n", FileBBLatency, FileBBDuration)
	b.writeFindings(w)
}

// writeFindings says what the figures show, from the figures.
func (b *BaseBackupReport) writeFindings(w io.Writer) {
	base, un, low, mr := b.condition(CondNoBackup), b.condition(CondUnmanaged), b.condition(CondLowPool), b.condition(CondMaxRate)
	if base == nil || un == nil || low == nil || mr == nil || un.Backup == nil || low.Backup == nil || mr.Backup == nil {
		return
	}
	fmt.Fprintf(w, "What the numbers show:\n\n")
	for _, wl := range []string{WorkloadSelectOnly, WorkloadTPCB} {
		b0, b2, b3, b4 := base.run(wl), un.run(wl), low.run(wl), mr.run(wl)
		if b0 == nil || b2 == nil || b3 == nil || b4 == nil || b0.AvgMs <= 0 {
			continue
		}
		fmt.Fprintf(w, "- %s: average latency %.2f ms alone, %.2f ms (%.1fx) beside the unmanaged backup, %.2f ms (%.1fx) with the backup in the low class, %.2f ms (%.1fx) beside the `--max-rate` backup; p99 %.2f, %.2f, %.2f and %.2f ms.\n",
			wl, b0.AvgMs, b2.AvgMs, b2.AvgMs/b0.AvgMs, b3.AvgMs, b3.AvgMs/b0.AvgMs, b4.AvgMs, b4.AvgMs/b0.AvgMs, b0.P99Ms, b2.P99Ms, b3.P99Ms, b4.P99Ms)
	}
	drain := func(n int64) float64 { return float64(n) / float64(max(1, b.CapacityBytes)) * 1000 }
	fmt.Fprintf(w, "- Unmanaged, the backup keeps the %s FIFO full, and every answer pgbench waits for queues behind up to %.0f ms of backup bytes. "+
		"In the low class, backup bytes enter only when no normal byte waits, and at most %s of them sit in the FIFO (%.1f ms at %s), "+
		"so an answer waits behind that much instead, once per round trip.",
		units.FormatBytes(b.QueueBytes), drain(b.QueueBytes), units.FormatBytes(b.LowQueueBytes), drain(b.LowQueueBytes), b.Capacity)
	if r3 := low.run(WorkloadSelectOnly); r3 != nil {
		fmt.Fprintf(w, " During select-only pgbench the link still carried %s MB/s, %s MB/s of it the backup's low class, and left %s MB/s idle.",
			mbps(r3.LinkBytesPerSec), mbps(r3.LowBytesPerSec), mbps(max(0, r3.IdleBytesPerSec)))
	}
	fmt.Fprintf(w, "\n")
	if r4 := mr.run(WorkloadSelectOnly); r4 != nil {
		fmt.Fprintf(w, "- `--max-rate` is a rate, not a bound on what waits in the FIFO: the server sends at full speed and sleeps when it is ahead of its rate, "+
			"so the FIFO still fills in bursts. Beside it select-only pgbench's p99 was %.2f ms (a full FIFO drains in %.0f ms) and its average %.1fx its latency alone.\n",
			r4.P99Ms, drain(b.QueueBytes), r4.AvgMs/max(1e-9, base.run(WorkloadSelectOnly).AvgMs))
	}
	fmt.Fprintf(w, "- The backup took %.1f s unmanaged, %.1f s in the low class and %.1f s with `--max-rate` (the cluster at the link's capacity: %.1f s).",
		un.Backup.Seconds, low.Backup.Seconds, mr.Backup.Seconds, float64(b.DatabaseBytes)/float64(max(1, b.CapacityBytes)))
	if low.Backup.QuietSeconds > 0 && mr.Backup.QuietSeconds > 0 {
		fmt.Fprintf(w, " Once pgbench stopped, the low-class backup moved %s MB/s and left %s MB/s of the link idle; the `--max-rate` backup moved %s MB/s and left %s MB/s idle: "+
			"a rate fixed in advance cannot take what OLTP leaves.",
			mbps(low.Backup.QuietLinkBytesPerSec), mbps(max(0, low.Backup.QuietIdleBytesPerSec)), mbps(mr.Backup.QuietLinkBytesPerSec), mbps(max(0, mr.Backup.QuietIdleBytesPerSec)))
	}
	verdict := "accepted"
	if !low.Backup.Verified {
		verdict = "did not check"
	}
	fmt.Fprintf(w, "\n- pg_verifybackup %s the low-class backup.\n\n", verdict)
}

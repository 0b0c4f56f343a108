package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/units"
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
	// LinkQueue is its device FIFO.
	LinkQueue
	// MaxRateKBps is the --max-rate of the last condition, in kB/s
	// (1024 bytes): the low-priority pool's backup's data rate.
	MaxRateKBps int64 `json:"max_rate_kb_per_s,omitempty"`
	// Setup are the console statements made before the conditions;
	// the low-priority condition also binds the role to the pool.
	Setup      []string              `json:"setup,omitempty"`
	Conditions []BaseBackupCondition `json:"conditions,omitempty"`
}

// BaseBackupPlan is the scale of the base-backup experiment: pgbench
// through one route and pg_basebackup through another, on one capped
// link, in four conditions (see doc.go).
type BaseBackupPlan struct {
	// DatabaseBytes is the size the lab fills the database to before the
	// backups, in bytes: pgbench's tables plus a logged table of wide
	// rows. 0 skips the experiment.
	DatabaseBytes int64
	// Scale is pgbench -i's scale factor; 0 means 10.
	Scale int
	// Clients and Threads are pgbench's -c and -j; 0 means 4 and 2.
	Clients, Threads int
	// Time is the length of each pgbench run (-T), select-only then
	// tpcb-like in each condition; 0 means 15 s.
	Time time.Duration
	// Lead is how long a backup streams (from its first MiB written)
	// before the first pgbench run starts; 0 means 2 s.
	Lead time.Duration
	// Capacity is the link capacity in bytes/s; 0 calibrates it: the
	// largest of 100, 50, 20, 10, 5, 2 or 1 MB/s that is at most
	// MaxCapacity, at most a tenth of what one COPY session streams
	// through an unlimited link (as the flow-control experiment
	// calibrates), and at most the database size over Lead + 3 x Time,
	// so that a backup at the full capacity outlasts both pgbench runs
	// and streams on alone for about one more Time.
	Capacity int64
	// MaxCapacity caps the calibrated capacity; 0 means 100 MB/s.
	MaxCapacity int64
}

// validate checks b and fills in its defaults; a plan with no database
// size is left alone (skipped).
func (b *BaseBackupPlan) validate() error {
	if b.DatabaseBytes <= 0 {
		return nil
	}
	if b.DatabaseBytes < 8<<20 || b.DatabaseBytes > 1<<40 {
		return &UsageError{Msg: fmt.Sprintf("base-backup database size %d bytes out of range (8 MiB to 1 TiB)", b.DatabaseBytes)}
	}
	orDefault(&b.Scale, 10)
	orDefault(&b.Clients, 4)
	orDefault(&b.Threads, 2)
	orDefault(&b.Time, 15*time.Second)
	orDefault(&b.Lead, 2*time.Second)
	orDefault(&b.MaxCapacity, 100_000_000)
	if b.Threads > b.Clients {
		b.Threads = b.Clients
	}
	if b.Time < time.Second {
		return &UsageError{Msg: fmt.Sprintf("base-backup pgbench time %s out of range (at least 1 s)", b.Time)}
	}
	return nil
}

// fullBaseBackupPlan is the full lab's scale: a database of 1.2 GB,
// pgbench at scale 10 with 4 clients on 2 threads, 15 s per run.
func fullBaseBackupPlan() BaseBackupPlan {
	return BaseBackupPlan{DatabaseBytes: 1_200_000_000, Scale: 10, Clients: 4, Threads: 2, Time: 15 * time.Second, Lead: 2 * time.Second}
}

// Names the base-backup experiment creates: in the database (a table and
// a replication role), and in sluice (routes, a pool).
const (
	bbTable       = "bb_fill"
	bbRole        = "bb_backup"
	bbPool        = "bb_low"
	bbOLTPRoute   = "bb_oltp"
	bbBackupRoute = "bb_backup"
)

// Conditions of the base-backup experiment, in the order they run.
const (
	CondNoBackup  = "no backup"
	CondUnmanaged = "unmanaged"
	CondLowPool   = "low-priority pool"
	CondMaxRate   = "--max-rate"
)

// pgbench workloads.
const (
	WorkloadSelectOnly = "select-only"
	WorkloadTPCB       = "tpcb-like"
)

// bbRun is the state of one base-backup experiment.
type bbRun struct {
	*env
	plan BaseBackupPlan
	bin  string // the server's bin directory: pgbench, pg_basebackup, pg_verifybackup
	// oltp and backup are the routes' addresses.
	oltp, backup string
	// rolePassword is the replication role's.
	rolePassword string
	// tmp holds the backups and pgbench's logs; removed at the end.
	tmp      string
	capacity int64
	// dbBytes is the cluster's size once filled.
	dbBytes int64
}

// baseBackup runs the experiment on db through s, or says in one line
// why it cannot and returns a report that says so.
func baseBackup(ctx context.Context, e *env) (*BaseBackupReport, error) {
	p := e.p
	bin, why := baseBackupSkip(e.db, e.pgBin)
	if why != "" {
		p.printf("\n== Experiment 6: base backup ==\n")
		p.step("skipped: %s", why)
		return &BaseBackupReport{Skipped: why}, nil
	}
	return runBaseBackup(ctx, &bbRun{env: e, plan: e.plan.BaseBackup, bin: bin})
}

// runBaseBackup runs the four conditions. Whatever it makes it removes
// before it returns, on error too: the backups and logs, the table, the
// pgbench tables and the role in the database, its catalog objects and
// the link's capacity in sluice.
func runBaseBackup(ctx context.Context, r *bbRun) (rep *BaseBackupReport, err error) {
	p := r.p
	pl := r.plan
	p.printf("\n== Experiment 6: base backup ==\n")
	p.printf("pgbench (select-only, then tpcb-like, %s each, -c %d -j %d) through route %s while pg_basebackup runs through route %s; both on one capped link\n",
		units.FormatDuration(pl.Time), pl.Clients, pl.Threads, bbOLTPRoute, bbBackupRoute)
	rep = &BaseBackupReport{Scale: pl.Scale, Clients: pl.Clients, Threads: pl.Threads, RunSeconds: pl.Time.Seconds(), LeadSeconds: pl.Lead.Seconds(),
		LinkQueue: defaultQueue()}

	if r.tmp, err = os.MkdirTemp("", "sluice-basebackup-*"); err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(r.tmp)
	if r.oltp, err = r.s.addRoute(bbOLTPRoute, ""); err != nil {
		return nil, err
	}
	if r.backup, err = r.s.addRoute(bbBackupRoute, ""); err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		r.s.exec(cctx, "DROP USER IF EXISTS "+bbRole, "DROP RESOURCE POOL IF EXISTS "+bbPool,
			"ALTER LINK default WITH (capacity=DEFAULT)", "RESET network_control")
		if derr := r.dropDatabaseObjects(cctx); derr != nil {
			p.step("could not drop the experiment's tables and role: %v", derr)
		} else {
			p.step("dropped %s, the pgbench tables and the role %s", bbTable, bbRole)
		}
	}()
	if err := r.fill(ctx); err != nil {
		return nil, err
	}
	rep.DatabaseBytes = r.dbBytes
	rep.Setup = []string{
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (network_priority='low')", bbPool),
		"SET network_control = on",
	}
	if err := r.s.exec(ctx, rep.Setup...); err != nil {
		return nil, err
	}

	planned := pl.Capacity
	maxCap := min(pl.MaxCapacity, int64(float64(r.dbBytes)/(pl.Lead+3*pl.Time).Seconds()))
	lc, err := r.linkCapacity(ctx, planned, maxCap, r.oltp)
	if err != nil {
		return nil, err
	}
	rep.CapacityBytes, rep.Capacity, rep.Calibrated, rep.StreamMBps = lc.CapacityBytes, lc.Capacity, lc.Calibrated, lc.StreamMBps
	capacity := lc.CapacityBytes
	r.capacity = capacity
	if err := r.s.setCapacity(ctx, capacity); err != nil {
		return nil, err
	}
	p.step("link: capacity %s (device queue %s, low-class bound %s); a backup at that rate takes about %.0f s",
		rep.Capacity, units.FormatBytes(rep.QueueBytes), units.FormatBytes(rep.LowQueueBytes), float64(r.dbBytes)/float64(capacity))

	for _, cond := range []string{CondNoBackup, CondUnmanaged, CondLowPool, CondMaxRate} {
		var maxRate int64
		switch cond {
		case CondLowPool:
			if err := r.s.exec(ctx, fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", bbRole, bbPool)); err != nil {
				return nil, err
			}
		case CondMaxRate:
			low := rep.condition(CondLowPool)
			// pg_basebackup takes kB/s (1024 bytes), 32 kB/s at least.
			maxRate = max(32, int64(low.Backup.DataBytesPerSec/1024+0.5))
			rep.MaxRateKBps = maxRate
		}
		c, err := r.condition(ctx, cond, maxRate)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cond, err)
		}
		if cond == CondLowPool {
			if err := r.s.exec(ctx, "DROP USER "+bbRole); err != nil {
				return nil, err
			}
		}
		rep.Conditions = append(rep.Conditions, c)
	}
	return rep, nil
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

// condition runs one condition: the backup (none for CondNoBackup;
// with --max-rate=maxRate kB/s when maxRate > 0) started Lead before
// the two pgbench runs, and, after them, the backup on its own until it
// ends.
func (r *bbRun) condition(ctx context.Context, cond string, maxRate int64) (BaseBackupCondition, error) {
	c := BaseBackupCondition{Name: cond, MaxRateKBps: maxRate}
	p, pl := r.p, r.plan
	switch cond {
	case CondNoBackup:
		p.step("%s: pgbench alone", cond)
	case CondUnmanaged:
		p.step("%s: pg_basebackup as %s, in the same class as pgbench (normal)", cond, bbRole)
	case CondLowPool:
		p.step("%s: pg_basebackup as %s, bound to pool %s (network_priority low)", cond, bbRole, bbPool)
	case CondMaxRate:
		p.step("%s: pg_basebackup --max-rate=%dk (what the low-priority pool's backup averaged), in the normal class", cond, maxRate)
	}
	var bk *backupProc
	if cond != CondNoBackup {
		c.Backup = &BackupResult{}
		var err error
		if bk, err = r.startBackup(ctx, cond, maxRate); err != nil {
			return c, err
		}
		defer bk.stop()
		defer p.every(ctx, 5*time.Second, func() string {
			if done, _ := bk.ended(); done {
				return ""
			}
			return fmt.Sprintf("%s: backup at %.0f s: %s written (the cluster holds %s, plus the WAL streamed beside it)", cond,
				r.clk.Now().Sub(bk.start).Seconds(), units.FormatBytes(dirBytes(bk.dir)), units.FormatBytes(r.dbBytes))
		})()
		if err := bk.streaming(ctx); err != nil {
			return c, err
		}
		if err := clock.Sleep(ctx, r.clk, pl.Lead); err != nil {
			return c, err
		}
	}
	for _, w := range []string{WorkloadSelectOnly, WorkloadTPCB} {
		l0, t0 := r.s.linkBytes(), r.clk.Now()
		run, err := r.pgbench(ctx, cond, w)
		if err != nil {
			return c, err
		}
		l1, t1 := r.s.linkBytes(), r.clk.Now()
		run.LinkBytesPerSec = rate(l1.total-l0.total, t1.Sub(t0))
		run.LowBytesPerSec = rate(l1.low-l0.low, t1.Sub(t0))
		run.IdleBytesPerSec = float64(r.capacity) - run.LinkBytesPerSec
		if bk != nil {
			end := t1
			if done, at := bk.ended(); done {
				end = at
			}
			run.window(end)
		} else {
			run.window(t1)
		}
		p.step("%s, %s: %d transactions, %.1f TPS, latency avg %.2f ms, p99 %.2f ms; link %s MB/s (idle %s MB/s)", cond, w, run.Transactions, run.TPS, run.AvgMs, run.P99Ms,
			mbps(run.LinkBytesPerSec), mbps(max(0, run.IdleBytesPerSec)))
		c.Runs = append(c.Runs, run)
	}
	if bk == nil {
		return c, nil
	}
	// The backup on its own, OLTP quiet.
	l0, t0 := r.s.linkBytes(), r.clk.Now()
	res, err := bk.wait(ctx)
	if err != nil {
		return c, err
	}
	l1, t1 := r.s.linkBytes(), r.clk.Now()
	*c.Backup = res
	if q := t1.Sub(t0); bk.endedAfter(t0) && q >= 200*time.Millisecond {
		c.Backup.QuietSeconds = q.Seconds()
		c.Backup.QuietLinkBytesPerSec = rate(l1.total-l0.total, q)
		c.Backup.QuietIdleBytesPerSec = float64(r.capacity) - c.Backup.QuietLinkBytesPerSec
	}
	p.step("%s: backup of %s in %.1f s (%s of data files: %s MB/s on average); alone after pgbench %.1f s at %s MB/s", cond, units.FormatBytes(res.Bytes), res.Seconds,
		units.FormatBytes(res.DataBytes), mbps(res.DataBytesPerSec), c.Backup.QuietSeconds, mbps(c.Backup.QuietLinkBytesPerSec))
	if cond == CondLowPool {
		p.step("%s: pg_verifybackup", cond)
		out, err := r.command(ctx, "pg_verifybackup", nil, bk.dir).CombinedOutput()
		if err != nil {
			return c, processErr(ctx, "pg_verifybackup", err, pgtemp.Tail(out, 2000))
		}
		c.Backup.Verified = true
		c.Backup.Verify = strings.TrimSpace(string(out))
		p.step("%s: %s", cond, c.Backup.Verify)
	}
	if err := os.RemoveAll(bk.dir); err != nil {
		return c, fmt.Errorf("remove the backup: %w", err)
	}
	return c, nil
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

// tables prints the experiment's tables on p.
func (b *BaseBackupReport) tables(p *printer) {
	if b.Skipped != "" || len(b.Conditions) == 0 {
		return
	}
	p.table(b.oltpTable())
	p.table(b.backupTable())
}

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

// charts returns the latency and duration charts.
func (b *BaseBackupReport) charts() []chartFile {
	return chartsIf(len(b.Conditions) > 0, chartFile{FileBBLatency, b.LatencyChart}, chartFile{FileBBDuration, b.DurationChart})
}

// The base-backup experiment's charts.
const (
	FileBBLatency  = "basebackup_latency.svg"
	FileBBDuration = "basebackup_duration.svg"
)

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
	if !heading(w, 6, "base backup", b.Skipped) {
		return
	}
	drain := func(n int64) float64 { return drainMs(n, max(1, b.CapacityBytes)) }
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
	drain := func(n int64) float64 { return drainMs(n, max(1, b.CapacityBytes)) }
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

package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/units"
)

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

// validate fills in b's defaults; b is in use (DatabaseBytes > 0).
func (b *BaseBackupPlan) validate() error {
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
	plan BaseBackupPlan
	db   *database
	s    *sluice
	bin  string // the server's bin directory: pgbench, pg_basebackup, pg_verifybackup
	clk  clock.Clock
	p    *printer
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

// baseBackupSkip returns why the experiment cannot run against db with
// the binaries of binDir, "" when it can.
func baseBackupSkip(db *database, binDir string) (bin, reason string) {
	if db.kind != BackendPostgres {
		return "", "it needs a primary of its own to fill and back up: run with --backend postgres"
	}
	bin, err := pgtemp.FindBinaries(binDir)
	if err != nil {
		return "", err.Error()
	}
	for _, p := range []string{"pgbench", "pg_basebackup", "pg_verifybackup"} {
		if fi, err := os.Stat(filepath.Join(bin, p)); err != nil || fi.IsDir() {
			return "", fmt.Sprintf("%s not in %s (install the PostgreSQL client programs)", p, bin)
		}
	}
	return bin, ""
}

// baseBackup runs the experiment on db through s, or says in one line
// why it cannot and returns a report that says so.
func baseBackup(ctx context.Context, o *Options, db *database, s *sluice, clk clock.Clock, p *printer) (*BaseBackupReport, error) {
	bin, why := baseBackupSkip(db, o.PostgresBin)
	if why != "" {
		p.printf("\n== Experiment 6: base backup ==\n")
		p.step("skipped: %s", why)
		return &BaseBackupReport{Skipped: why}, nil
	}
	rep, err := runBaseBackup(ctx, &bbRun{plan: o.Plan.BaseBackup, db: db, s: s, bin: bin, clk: clk, p: p})
	if err != nil {
		return nil, err
	}
	rep.tables(p)
	return rep, nil
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
		QueueBytes: link.DefaultQueueSize, LowQueueBytes: link.DefaultLowPriorityQueueBytes}

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
	capacity, mbps, err := linkCapacity(planned, maxCap, func() (float64, error) {
		return streamRate(ctx, r.s, r.db, r.oltp, r.clk, p)
	}, p)
	if err != nil {
		return nil, err
	}
	rep.Calibrated, rep.StreamMBps = planned <= 0, mbps
	rep.CapacityBytes, rep.Capacity = capacity, units.FormatRate(capacity)
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

// fill creates the replication role, pgbench's tables and the wide
// table, until the cluster holds plan.DatabaseBytes, then checkpoints.
func (r *bbRun) fill(ctx context.Context) error {
	p, pl := r.p, r.plan
	pw, err := randomPassword()
	if err != nil {
		return err
	}
	r.rolePassword = pw
	c, err := pgconn.Connect(ctx, r.db.directURL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", r.db.upstream, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION PASSWORD '%s'", bbRole, pw)).ReadAll(); err != nil {
		return fmt.Errorf("create role %s: %w", bbRole, err)
	}
	p.step("pgbench -i -s %d (directly, not through sluice)", pl.Scale)
	t0 := r.clk.Now()
	if out, err := r.command(ctx, "pgbench", r.superEnv(), append(r.directArgs(), "-i", "-q", "-s", fmt.Sprint(pl.Scale), r.db.dbname)...).CombinedOutput(); err != nil {
		return processErr(ctx, "pgbench -i", err, tailText(out, 2000))
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint, pad text) WITH (autovacuum_enabled = off)", bbTable)).ReadAll(); err != nil {
		return fmt.Errorf("create table %s: %w", bbTable, err)
	}
	// About 1,170 bytes a row on disk: seven 960-byte rows to an 8 kB
	// page, not compressed (TOAST compresses values over 2 kB only).
	const rowBytes, batch = 1170, 50_000
	next := int64(1)
	for {
		size, err := clusterBytes(ctx, c)
		if err != nil {
			return err
		}
		if size >= pl.DatabaseBytes {
			r.dbBytes = size
			break
		}
		n := min(batch, max(5000, (pl.DatabaseBytes-size)/rowBytes+1))
		q := fmt.Sprintf("INSERT INTO %s SELECT g, repeat(md5(g::text), 30) FROM generate_series(%d, %d) g", bbTable, next, next+n-1)
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("fill %s: %w", bbTable, err)
		}
		next += n
		p.step("filling: %s of %s", units.FormatBytes(size), units.FormatBytes(pl.DatabaseBytes))
	}
	if _, err := c.Exec(ctx, "CHECKPOINT").ReadAll(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	p.step("database filled: %s in %.0f s (%d rows of %s, pgbench scale %d)", units.FormatBytes(r.dbBytes), r.clk.Now().Sub(t0).Seconds(), next-1, bbTable, pl.Scale)
	return nil
}

// randomPassword is 24 random hex digits.
func randomPassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// clusterBytes is the size of every database of the cluster.
func clusterBytes(ctx context.Context, c *pgconn.PgConn) (int64, error) {
	res, err := c.Exec(ctx, "SELECT sum(pg_database_size(oid))::bigint FROM pg_database").ReadAll()
	if err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	if len(res) == 0 || len(res[0].Rows) == 0 {
		return 0, errors.New("database size: no row")
	}
	var n int64
	if _, err := fmt.Sscan(string(res[0].Rows[0][0]), &n); err != nil {
		return 0, fmt.Errorf("database size %q: %w", res[0].Rows[0][0], err)
	}
	return n, nil
}

// dropDatabaseObjects drops what fill created.
func (r *bbRun) dropDatabaseObjects(ctx context.Context) error {
	c, err := pgconn.Connect(ctx, r.db.directURL())
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var errs []error
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + bbTable + ", pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers",
		"DROP ROLE IF EXISTS " + bbRole,
	} {
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", q, err))
		}
	}
	return errors.Join(errs...)
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
		l0, t0 := r.linkBytes(), r.clk.Now()
		run, err := r.pgbench(ctx, cond, w)
		if err != nil {
			return c, err
		}
		l1, t1 := r.linkBytes(), r.clk.Now()
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
	l0, t0 := r.linkBytes(), r.clk.Now()
	res, err := bk.wait(ctx)
	if err != nil {
		return c, err
	}
	l1, t1 := r.linkBytes(), r.clk.Now()
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
			return c, processErr(ctx, "pg_verifybackup", err, tailText(out, 2000))
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

// linkCounts are bytes that left the default link, server to client.
type linkCounts struct{ total, low int64 }

// linkBytes returns the bytes that have left the default link's device
// queue, server to client (admitted minus still queued), in all and in
// the low class.
func (r *bbRun) linkBytes() linkCounts {
	d := r.s.linkStats().Directions[link.Down]
	var in int64
	for _, c := range d.Classes {
		in += c.Bytes
	}
	return linkCounts{total: in - d.QueueBytes(), low: d.Classes[link.Low].Bytes - d.Queue[link.Low]}
}

// rate is n bytes over d in bytes/s; 0 for no time.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// directArgs are the connection arguments of the lab's database, direct.
func (r *bbRun) directArgs() []string {
	host, port, _ := net.SplitHostPort(r.db.upstream)
	return []string{"-h", host, "-p", port, "-U", r.db.user}
}

// superEnv is the environment that gives the superuser's password.
func (r *bbRun) superEnv() []string {
	return []string{"PGPASSWORD=" + r.db.password}
}

// routeArgs are the connection arguments of a route as user.
func routeArgs(addr, user string) []string {
	host, port, _ := net.SplitHostPort(addr)
	return []string{"-h", host, "-p", port, "-U", user}
}

// command prepares one of the server's client programs with env added
// to the process's (passwords go there, never on the command line) and
// TLS off (sluice's client side is plain TCP on loopback).
func (r *bbRun) command(ctx context.Context, name string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(r.bin, name), args...)
	cmd.Env = append(append(os.Environ(), "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=30"), env...)
	cmd.Dir = r.tmp
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// pgbench runs one pgbench workload through the OLTP route for the
// plan's Time, with a per-transaction log, and returns its figures over
// the whole run (window narrows them later).
func (r *bbRun) pgbench(ctx context.Context, cond, workload string) (PgbenchRun, error) {
	pl := r.plan
	run := PgbenchRun{Workload: workload}
	prefix := filepath.Join(r.tmp, "pgbench_"+strings.NewReplacer(" ", "_", "-", "").Replace(cond+"_"+workload))
	args := append(routeArgs(r.oltp, r.db.user), "-n", "-c", fmt.Sprint(pl.Clients), "-j", fmt.Sprint(pl.Threads),
		"-T", fmt.Sprint(int(pl.Time.Seconds()+0.5)), "-P", fmt.Sprint(max(1, int(pl.Time.Seconds()/3))),
		"-l", "--log-prefix="+prefix)
	if workload == WorkloadSelectOnly {
		args = append(args, "-S")
	}
	args = append(args, r.db.dbname)
	run.Command = "pgbench " + strings.Join(args, " ")
	cctx, cancel := context.WithTimeout(ctx, pl.Time*4+2*time.Minute)
	defer cancel()
	cmd := r.command(cctx, "pgbench", r.superEnv(), args...)
	var out strings.Builder
	cmd.Stdout = &out
	var errOut tailWriter
	cmd.Stderr = io.MultiWriter(&errOut, &lineFilter{out: r.p, prefix: "progress:", indent: "    "})
	start := r.clk.Now()
	if err := cmd.Run(); err != nil {
		return run, processErr(ctx, "pgbench "+workload, err, out.String()+errOut.String())
	}
	run.start = start
	run.PgbenchTPS, run.PgbenchAvgMs = parsePgbenchOutput(out.String())
	logs, err := filepath.Glob(prefix + ".*")
	if err != nil || len(logs) == 0 {
		return run, fmt.Errorf("pgbench %s wrote no transaction log (%v)", workload, err)
	}
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			return run, err
		}
		txns, err := parsePgbenchLog(data)
		if err != nil {
			return run, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		run.txns = append(run.txns, txns...)
		os.Remove(f)
	}
	return run, nil
}

// backupProc is a running pg_basebackup.
type backupProc struct {
	cmd   *exec.Cmd
	dir   string
	start time.Time
	clk   clock.Clock
	out   *tailWriter
	done  chan struct{} // closed when it has exited
	err   error         // set before done is closed
	end   time.Time     // set before done is closed
	stop  func()        // kills it (if running) and waits; safe to call twice
}

// startBackup starts pg_basebackup through the backup route as the
// replication role, into a new directory under tmp.
func (r *bbRun) startBackup(ctx context.Context, cond string, maxRate int64) (*backupProc, error) {
	dir := filepath.Join(r.tmp, "backup_"+strings.NewReplacer(" ", "_", "-", "").Replace(cond))
	args := append(routeArgs(r.backup, bbRole), "-D", dir, "-X", "stream", "-c", "fast", "--no-sync")
	if maxRate > 0 {
		args = append(args, fmt.Sprintf("--max-rate=%dk", maxRate))
	}
	bctx, cancel := context.WithCancel(ctx)
	cmd := r.command(bctx, "pg_basebackup", []string{"PGPASSWORD=" + r.rolePassword}, args...)
	b := &backupProc{cmd: cmd, dir: dir, clk: r.clk, out: &tailWriter{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	b.start = r.clk.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("pg_basebackup: %w", err)
	}
	go func() {
		b.err = cmd.Wait()
		b.end = r.clk.Now()
		close(b.done)
	}()
	b.stop = func() { cancel(); <-b.done }
	return b, nil
}

// streaming waits until the backup has written its first MiB: the
// checkpoint and the start are over and the data streams. It fails if
// the backup ends first or has not begun within 2 minutes.
func (b *backupProc) streaming(ctx context.Context) error {
	deadline := b.clk.Now().Add(2 * time.Minute)
	for dirBytes(b.dir) < 1<<20 {
		if done, _ := b.ended(); done {
			return processErr(ctx, "pg_basebackup ended before it streamed", b.err, b.out.String())
		}
		if b.clk.Now().After(deadline) {
			return fmt.Errorf("pg_basebackup streamed nothing in 2 minutes\n%s", b.out.String())
		}
		if err := clock.Sleep(ctx, b.clk, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// ended reports whether the backup has exited, and when.
func (b *backupProc) ended() (bool, time.Time) {
	select {
	case <-b.done:
		return true, b.end
	default:
		return false, time.Time{}
	}
}

// endedAfter reports whether the backup was still running at t.
func (b *backupProc) endedAfter(t time.Time) bool {
	done, at := b.ended()
	return !done || at.After(t)
}

// wait waits for the backup to end and returns what it did.
func (b *backupProc) wait(ctx context.Context) (BackupResult, error) {
	var res BackupResult
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-b.done:
	}
	if b.err != nil {
		return res, processErr(ctx, "pg_basebackup", b.err, b.out.String())
	}
	res.Completed = true
	res.Seconds = b.end.Sub(b.start).Seconds()
	res.Bytes = dirBytes(b.dir)
	res.WALBytes = dirBytes(filepath.Join(b.dir, "pg_wal"))
	res.DataBytes = res.Bytes - res.WALBytes
	if res.Seconds > 0 {
		res.BytesPerSec = float64(res.Bytes) / res.Seconds
		res.DataBytesPerSec = float64(res.DataBytes) / res.Seconds
	}
	return res, nil
}

// processErr is the error of a program that failed with err, saying
// what it printed (out); when ctx has ended, which stopped the program,
// it is ctx's error instead. A nil err (a program that ended too soon)
// reads as such.
func processErr(ctx context.Context, what string, err error, out string) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	if err == nil {
		return fmt.Errorf("%s\n%s", what, out)
	}
	return fmt.Errorf("%s: %w\n%s", what, err, out)
}

// tailWriter keeps the last 8 kB written to it. It is safe for
// concurrent use.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte // guarded by mu
}

func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if over := len(w.buf) - 8<<10; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(b), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// tailText is the last n bytes of b, as text.
func tailText(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// dirBytes is the size of the regular files under dir; 0 if none.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

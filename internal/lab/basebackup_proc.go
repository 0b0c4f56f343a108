package lab

import (
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
)

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

// backupProc is a running pg_basebackup.
type backupProc struct {
	cmd   *exec.Cmd
	dir   string
	start time.Time
	clk   clock.Clock
	out   *pgtemp.TailBuffer
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
	b := &backupProc{cmd: cmd, dir: dir, clk: r.clk, out: &pgtemp.TailBuffer{Max: 8 << 10}, done: make(chan struct{})}
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

package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicelab/sluice/internal/lab/pgtemp"
)

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
	errOut := pgtemp.TailBuffer{Max: 8 << 10}
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

// Command emulation measures sluice's path emulation against the real
// PostgreSQL (and MariaDB), side by side with direct connections in one
// run:
//
//   - precision: pgbench -S -c 1 through sluice with delay 0.5, 1, 5 and
//     10 ms each way vs direct; the added round trip per query against
//     2 x delay (target: within max(2%, 0.1 ms)), each the SELECT's own
//     mean latency from pgbench -r. A second baseline runs direct again
//     with the client sleeping 2 x delay after each query: behind a delay
//     the server idles that long between queries and answers the next
//     one more slowly, which the paced run shows without sluice. The
//     three columns run in rotating rounds (-rounds), so the host's drift
//     lands on all of them alike. The last column is sluice's own share,
//     read from its metrics: how late its delay lines handed the query
//     and the answer to the sockets.
//   - throughput: one COPY ... TO STDOUT of 200 MB through rate='50MB'
//     (target 4.0 s +-5%), and through delay='25ms' with a 1 MiB window
//     (target 1 MiB / 50 ms +-10%).
//   - sysbench: real sysbench oltp_read_write --threads=10 at added RTT 0
//     and 10 ms; the 10 ms run's minimum latency (>= 200 ms) and its TPS
//     against threads / (avg latency at 0 + 20 x 10 ms) (target +-15%).
//
// Every experiment runs, direct and through sluice alike, under a PM QoS
// CPU latency request of 0 (-cpu-latency; see internal/cpulatency) when
// the process may hold one: idle CPUs then poll instead of halting, and a
// query that comes after a pause is not charged the exit from a deep idle
// state, which on a virtual machine costs more than the 0.1 ms target. In
// the precision experiment sluice is pinned to one CPU (-cpus; see
// internal/cpuset), so its wake-ups do not land where pgbench and the
// server are about to run.
//
// Run with the test servers up (scripts/testdb start):
//
//	go -C measure run ./emulation [-exp precision,throughput,sysbench] [-db pgsql,mysql] [-cpu-latency 0s|off] [-cpus last|off|LIST]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/cpulatency"
	"github.com/sluicelab/sluice/internal/cpuset"
	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	exps := flag.String("exp", "precision,throughput,sysbench", "experiments to run")
	dbs := flag.String("db", "pgsql", "databases for the sysbench experiment: pgsql, mysql")
	dur := flag.Int("time", 10, "seconds of pgbench per column and delay in the precision experiment")
	rounds := flag.Int("rounds", 5, "rounds the precision experiment splits each column's time into, the columns' order rotating")
	sbtime := flag.Int("sbtime", 30, "seconds per sysbench run")
	cpus := flag.String("cpus", "last", "CPUs sluice is pinned to in the precision experiment (sluice serve --cpus): a CPU list, \"last\" (the last CPU this process may use) or \"off\"")
	cpuLat := flag.String("cpu-latency", "0s", "hold a PM QoS CPU latency request of this bound for the whole run, for direct and sluice alike (needs root; \"off\": none)")
	flag.Parse()
	ctx := context.Background()
	if *cpuLat != "off" {
		bound, err := cpulatency.ParseBound(*cpuLat)
		if err != nil {
			log.Fatalf("-cpu-latency: %v (or off)", err)
		}
		req, err := cpulatency.Hold(cpulatency.Device, bound)
		if err != nil {
			fmt.Printf("CPU latency request: not held (%v); idle CPUs may sleep deeply\n", err)
		} else {
			defer req.Close()
			fmt.Printf("CPU latency request: held at %v for the whole run (idle CPUs leave idle within it)\n", bound)
		}
	} else {
		fmt.Printf("CPU latency request: none (-cpu-latency off); idle CPUs may sleep deeply\n")
	}
	if *rounds < 1 {
		log.Fatalf("-rounds: bad value %d (want 1 or more)", *rounds)
	}
	pinTo, err := pinFlag(*cpus)
	if err != nil {
		log.Fatalf("-cpus: %v", err)
	}
	pgURL := harness.Env("SLUICE_TEST_PG", "postgres://sluice:sluice@127.0.0.1:15432/sluice?sslmode=disable")
	for _, e := range strings.Split(*exps, ",") {
		switch e {
		case "precision":
			err = precision(ctx, pgURL, *dur, *rounds, pinTo)
		case "throughput":
			err = throughput(ctx, pgURL)
		case "sysbench":
			for _, db := range strings.Split(*dbs, ",") {
				if err = sysbenchRTT(ctx, db, *sbtime); err != nil {
					break
				}
			}
		default:
			err = fmt.Errorf("unknown experiment %q", e)
		}
		if err != nil {
			log.Fatalf("%s: %v", e, err)
		}
	}
}

// selectLine is the statement pgbench -S runs, as a custom script; the
// pgbench database is initialised at scale 10 (1,000,000 accounts).
const selectLine = "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"

// selectLatencyRE finds the SELECT's own mean latency in pgbench -r's
// per-statement report.
var selectLatencyRE = regexp.MustCompile(`(?m)^\s*([0-9.]+)\s+(?:[0-9]+\s+)?` + regexp.QuoteMeta(selectLine))

// pgbench runs pgbench -S's transaction (one random point select) with
// one client against host:port for the given seconds and returns the
// SELECT's mean latency in ms, from pgbench's per-statement report. idle
// > 0 makes the client sleep that long after each query (\sleep), so
// the server idles between queries as it does behind a delay; the
// sleep itself is not in the latency.
func pgbench(host, port string, seconds int, idle time.Duration) (latency float64, err error) {
	script := "\\set aid random(1, 1000000)\n" + selectLine + "\n"
	if idle > 0 {
		script += fmt.Sprintf("\\sleep %d us\n", idle.Microseconds())
	}
	f, err := os.CreateTemp("", "precision-*.sql")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	args := []string{"-h", host, "-p", port, "-U", "sluice", "-n", "-r", "-c", "1", "-T", strconv.Itoa(seconds), "-f", f.Name(), "pgbench"}
	cmd := exec.Command("pgbench", args...)
	cmd.Env = append(os.Environ(), "PGPASSWORD=sluice")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %v: %s", err, out)
	}
	m := selectLatencyRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no statement latency: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func ensurePgbench(url string) error {
	hp, _ := harness.HostPort(url)
	host, port, _ := strings.Cut(hp, ":")
	env := append(os.Environ(), "PGPASSWORD=sluice")
	c := exec.Command("psql", "-h", host, "-p", port, "-U", "sluice", "-d", "sluice", "-qtAc", "SELECT 1 FROM pg_database WHERE datname='pgbench'")
	c.Env = env
	out, _ := c.Output()
	if strings.TrimSpace(string(out)) != "1" {
		c = exec.Command("psql", "-h", host, "-p", port, "-U", "sluice", "-d", "sluice", "-qc", "CREATE DATABASE pgbench")
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("create database pgbench: %v: %s", err, out)
		}
	}
	c = exec.Command("psql", "-h", host, "-p", port, "-U", "sluice", "-d", "pgbench", "-qtAc", "SELECT count(*) FROM pgbench_branches")
	c.Env = env
	if out, err := c.Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		return nil
	}
	c = exec.Command("pgbench", "-h", host, "-p", port, "-U", "sluice", "-i", "-q", "-s", "10", "pgbench")
	c.Env = env
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("pgbench -i: %v: %s", err, out)
	}
	return nil
}

// pinFlag turns -cpus into the CPU list for sluice serve --cpus, "" for
// none.
func pinFlag(v string) (string, error) {
	switch v {
	case "off":
		return "", nil
	case "last":
		allowed, err := cpuset.Allowed()
		if err != nil {
			return "", err
		}
		return strconv.Itoa(cpuset.Last(allowed)), nil
	}
	if _, err := cpuset.Parse(v); err != nil {
		return "", fmt.Errorf("%w, or last, or off", err)
	}
	return v, nil
}

// precision runs the precision experiment; pinTo is sluice's CPU list
// ("" leaves it free).
func precision(ctx context.Context, url string, seconds, rounds int, pinTo string) error {
	if err := ensurePgbench(url); err != nil {
		return err
	}
	up, _ := harness.HostPort(url)
	httpAddr := harness.FreeAddr()
	args := []string{"--http", httpAddr}
	if pinTo != "" {
		args = append(args, "--cpus", pinTo)
	}
	s, err := harness.Start(ctx, "postgres", up, args...)
	if err != nil {
		return err
	}
	defer s.Stop()
	dh, dp, _ := strings.Cut(up, ":")
	sh, sp, _ := strings.Cut(s.Listen, ":")
	fmt.Printf("\nprecision: pgbench -S -c 1, %d rounds of -T %d per column, rotating; direct vs through sluice, delay each way\n", rounds, max(1, seconds/rounds))
	if pinTo != "" {
		fmt.Printf("(sluice pinned to CPU %s: sluice serve --cpus %s)\n", pinTo, pinTo)
	} else {
		fmt.Printf("(sluice not pinned: -cpus off)\n")
	}
	fmt.Printf("(latency: the SELECT's own mean, pgbench -r; paced: direct again with the client\n")
	fmt.Printf(" sleeping 2 x delay after each query, so the server idles as long as behind the\n")
	fmt.Printf(" delay; an idle server answers slower)\n")
	fmt.Printf(" own: sluice's own release lateness, mean per query, both directions, in us,\n")
	fmt.Printf(" from sluice_emulation_release_lateness_seconds)\n")
	fmt.Printf("%-7s %9s %9s %9s %9s %9s %7s %8s %5s %8s %5s %7s\n", "delay", "direct", "paced", "sluice", "added", "added/p", "want",
		"error", "ok", "error/p", "ok/p", "own")
	within := func(d, e float64) bool { return math.Abs(e) <= tolerance(d) }
	verdict := func(d, e float64) string {
		switch {
		case d == 0:
			return "-"
		case within(d, e):
			return "yes"
		}
		return "NO"
	}
	// passed counts the delayed rows within tolerance, against direct and
	// against paced; idleCost is the largest excess of paced over direct
	// beyond the tolerance, in ms (0: none).
	var passed, passedP, rows int
	var idleCost float64
	for _, d := range []float64{0, 0.5, 1, 5, 10} {
		if err := s.Exec(ctx, fmt.Sprintf("ALTER LINK default WITH (delay='%gms')", d)); err != nil {
			return err
		}
		// The three columns run in rounds, their order rotating, so that
		// the host's drift over the minute a row takes lands on all three.
		idle := time.Duration(2 * d * float64(time.Millisecond))
		var direct, via, paced float64
		var released, lateSum float64
		per := max(1, seconds/rounds)
		for r := range rounds {
			fmt.Fprintf(os.Stderr, "  delay %gms: round %d/%d\n", d, r+1, rounds)
			for k := range 3 {
				switch (r + k) % 3 {
				case 0:
					v, err := pgbench(dh, dp, per, 0)
					if err != nil {
						return err
					}
					direct += v / float64(rounds)
				case 1:
					before, err := releaseLateness(httpAddr)
					if err != nil {
						return err
					}
					v, err := pgbench(sh, sp, per, 0)
					if err != nil {
						return err
					}
					after, err := releaseLateness(httpAddr)
					if err != nil {
						return err
					}
					via += v / float64(rounds)
					released += after.count - before.count
					lateSum += after.sum - before.sum
				case 2:
					// Behind the delay the server idles 2 x delay before
					// each query; at zero delay paced is direct.
					if d == 0 {
						continue
					}
					v, err := pgbench(dh, dp, per, idle)
					if err != nil {
						return err
					}
					paced += v / float64(rounds)
				}
			}
		}
		if d == 0 {
			paced = direct
		}
		// Both directions' lateness, per query (one release each way).
		own := "-"
		if released > 0 {
			own = fmt.Sprintf("%+.1f", 2*lateSum/released*1e6)
		}
		want := 2 * d
		e, ep := via-direct-want, via-paced-want
		fmt.Printf("%-7s %9.3f %9.3f %9.3f %9.3f %9.3f %7.3f %+8.3f %5s %+8.3f %5s %7s\n", fmt.Sprintf("%gms", d),
			direct, paced, via, via-direct, via-paced, want, e, verdict(d, e), ep, verdict(d, ep), own)
		if d == 0 {
			continue
		}
		rows++
		if within(d, e) {
			passed++
		}
		if within(d, ep) {
			passedP++
		}
		if x := paced - direct - tolerance(d); x > idleCost {
			idleCost = x
		}
	}
	fmt.Printf("within tolerance: %d of %d delays against direct, %d of %d against paced\n", passed, rows, passedP, rows)
	if idleCost > 0 {
		fmt.Printf("(paced ran up to %.3f ms beyond the tolerance above direct, with no sluice in the\n", idleCost)
		fmt.Printf(" path: this host wakes an idle CPU late, and any delay on the wire pays that)\n")
	}
	return nil
}

// tolerance is the precision target's allowed error at a one-way delay of
// d ms: max(2% of the added round trip, 0.1 ms), in ms.
func tolerance(d float64) float64 { return math.Max(0.02*2*d, 0.1) }

// lateness is the precise releases' lateness summed over routes and
// directions: count releases, sum seconds.
type lateness struct{ count, sum float64 }

// latenessRE matches the precise releases' count and sum in sluice's
// metrics exposition.
var latenessRE = regexp.MustCompile(`(?m)^sluice_emulation_release_lateness_seconds_(sum|count)\{[^}]*wait="precise"[^}]*\} (\S+)$`)

// releaseLateness scrapes sluice's /metrics at addr.
func releaseLateness(addr string) (lateness, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return lateness{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return lateness{}, fmt.Errorf("metrics: %w", err)
	}
	var l lateness
	for _, m := range latenessRE.FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			return lateness{}, fmt.Errorf("metrics: %q: %w", m[0], err)
		}
		if string(m[1]) == "sum" {
			l.sum += v
		} else {
			l.count += v
		}
	}
	return l, nil
}

// copyTime times one COPY TO STDOUT through addr and returns bytes and
// seconds.
func copyTime(ctx context.Context, url, addr, query string) (int64, float64, error) {
	purl, err := harness.ReplaceHostPort(url, addr)
	if err != nil {
		return 0, 0, err
	}
	c, err := pgconn.Connect(ctx, purl)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close(ctx)
	cw := &counter{}
	start := time.Now()
	if _, err := c.CopyTo(ctx, cw, query); err != nil {
		return 0, 0, err
	}
	return cw.n, time.Since(start).Seconds(), nil
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*counter)(nil)

func throughput(ctx context.Context, url string) error {
	up, _ := harness.HostPort(url)
	s, err := harness.Start(ctx, "postgres", up)
	if err != nil {
		return err
	}
	defer s.Stop()
	// 200 MB: 200,000 rows of 999 bytes plus a newline.
	q200 := `COPY (SELECT repeat('r', 999) FROM generate_series(1, 200000)) TO STDOUT`
	fmt.Printf("\nthroughput: one COPY TO STDOUT through sluice\n")
	fmt.Printf("%-34s %10s %10s %12s %12s %8s\n", "setting", "MB", "seconds", "MB/s", "target MB/s", "ok")
	direct := func() (float64, error) {
		n, secs, err := copyTime(ctx, url, up, q200)
		return float64(n) / 1e6 / secs, err
	}
	if d, err := direct(); err == nil {
		fmt.Printf("%-34s %10s %10s %12.1f %12s %8s\n", "direct (no sluice)", "200", "-", d, "-", "-")
	}
	if err := s.Exec(ctx, "ALTER LINK default WITH (rate='50MB')"); err != nil {
		return err
	}
	n, secs, err := copyTime(ctx, url, s.Listen, q200)
	if err != nil {
		return err
	}
	ok := "yes"
	if math.Abs(secs-4.0) > 0.2 {
		ok = "NO"
	}
	fmt.Printf("%-34s %10.1f %10.3f %12.2f %12.2f %8s\n", "rate=50MB", float64(n)/1e6, secs, float64(n)/1e6/secs, 50.0, ok)
	if err := s.Exec(ctx, "ALTER LINK default WITH (rate='0', delay='25ms', window='1MiB')"); err != nil {
		return err
	}
	q100 := `COPY (SELECT repeat('w', 999) FROM generate_series(1, 100000)) TO STDOUT`
	n, secs, err = copyTime(ctx, url, s.Listen, q100)
	if err != nil {
		return err
	}
	want := float64(1<<20) / 0.050 / 1e6
	got := float64(n) / 1e6 / secs
	ok = "yes"
	if math.Abs(got-want)/want > 0.10 {
		ok = "NO"
	}
	fmt.Printf("%-34s %10.1f %10.3f %12.2f %12.2f %8s\n", "delay=25ms window=1MiB", float64(n)/1e6, secs, got, want, ok)
	return nil
}

var (
	tpsRE = regexp.MustCompile(`transactions:\s+\d+\s+\(([0-9.]+) per sec`)
	minRE = regexp.MustCompile(`min:\s+([0-9.]+)`)
	avgRE = regexp.MustCompile(`avg:\s+([0-9.]+)`)
)

type sbResult struct{ tps, min, avg float64 }

func sysbench(db string, host, port string, args ...string) (sbResult, error) {
	base := []string{"--db-driver=" + db, "--tables=1", "--table-size=10000"}
	if db == "pgsql" {
		base = append(base, "--pgsql-host="+host, "--pgsql-port="+port, "--pgsql-user=sluice", "--pgsql-password=sluice", "--pgsql-db=sluice")
	} else {
		base = append(base, "--mysql-host="+host, "--mysql-port="+port, "--mysql-user=sluice", "--mysql-password=sluice", "--mysql-db=sluice")
	}
	cmd := exec.Command("sysbench", append(append(base, args[:len(args)-1]...), "oltp_read_write", args[len(args)-1])...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return sbResult{}, fmt.Errorf("sysbench %v: %v: %s", args, err, out)
	}
	var r sbResult
	if m := tpsRE.FindSubmatch(out); m != nil {
		r.tps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := minRE.FindSubmatch(out); m != nil {
		r.min, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := avgRE.FindSubmatch(out); m != nil {
		r.avg, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	return r, nil
}

func sysbenchRTT(ctx context.Context, db string, seconds int) error {
	var up, proto string
	switch db {
	case "pgsql":
		up, proto = harness.Env("SLUICE_TEST_PG_ADDR", "127.0.0.1:15432"), "postgres"
	case "mysql":
		up, proto = harness.Env("SLUICE_TEST_MYSQL_ADDR", "127.0.0.1:13306"), "mysql"
	default:
		return fmt.Errorf("unknown db %q", db)
	}
	var extra []string
	if procs := os.Getenv("SLUICE_PROCS"); procs != "" {
		extra = append(extra, "--procs", procs)
	}
	s, err := harness.Start(ctx, proto, up, extra...)
	if err != nil {
		return err
	}
	defer s.Stop()
	h, p, _ := strings.Cut(up, ":")
	sh, sp, _ := strings.Cut(s.Listen, ":")
	sysbench(db, h, p, "cleanup")
	if _, err := sysbench(db, h, p, "prepare"); err != nil {
		return err
	}
	defer sysbench(db, h, p, "cleanup")
	run := func(host, port string) (sbResult, error) {
		return sysbench(db, host, port, "--threads=10", fmt.Sprintf("--time=%d", seconds), "run")
	}
	fmt.Printf("\nsysbench oltp_read_write --threads=10 --time=%d (%s), through sluice\n", seconds, db)
	fmt.Printf("%-10s %10s %10s %10s %14s %8s\n", "added RTT", "tps", "min ms", "avg ms", "predicted tps", "ok")
	base, err := run(sh, sp)
	if err != nil {
		return err
	}
	fmt.Printf("%-10s %10.1f %10.2f %10.2f %14s %8s\n", "0ms", base.tps, base.min, base.avg, "-", "-")
	if err := s.Exec(ctx, "ALTER LINK default WITH (delay='5ms')"); err != nil {
		return err
	}
	slow, err := run(sh, sp)
	if err != nil {
		return err
	}
	pred := 10 / ((base.avg + 20*10) / 1000)
	ok := "yes"
	if slow.min < 200 || math.Abs(slow.tps-pred)/pred > 0.15 {
		ok = "NO"
	}
	fmt.Printf("%-10s %10.1f %10.2f %10.2f %14.1f %8s\n", "10ms", slow.tps, slow.min, slow.avg, pred, ok)
	return nil
}

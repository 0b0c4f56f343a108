// Command flowcontrol reproduces the reference flow-control measurement on
// one machine, through the real PostgreSQL: a link with capacity 100 MB/s,
// background pressure from N concurrent sessions of a low-priority user
// each pulling a large result, and a normal-priority query returning about
// 1 MB measured repeatedly. It reports elapsed and slowdown against N for
// three settings:
//
//   - off:       network_control = off (one FIFO, the unmanaged baseline)
//   - ratelimit: control on, low_priority_bandwidth at 20% of capacity,
//     occupancy bound off (the reference system's mechanism)
//   - bound:     control on with defaults (occupancy bound 64 KiB)
//
// and the low class's throughput, alone and beside the normal query.
//
// Every point starts from an idle link: the sessions of the previous point
// are closed abruptly (their data still queued in socket buffers would
// otherwise keep flowing through the link and share the low class with
// the next point's sessions), and the point waits until sluice shows no
// session left.
//
// The direct columns separate what sluice can fix from what it cannot.
// For each point the same query runs straight against PostgreSQL, while
// N bulk sessions, also direct, pull the same COPY paced to the rate the
// low class had through sluice: the same work for the server and the
// client, without sluice and without the link. The direct elapsed is what
// the host's CPU alone costs the query; the slowdown floor is the
// slowdown the query would show through sluice if sluice added nothing
// beyond the link's transfer time: (sluice at N=0 + direct at N - direct
// at N=0) / sluice at N=0. CPU columns give the host's busy share (200%
// on two cores) and sluice's own, during the normal queries.
//
// Units: MB is 10^6 bytes here as in sluice; the program checks that the
// capacity and low_priority_bandwidth sluice reports are the values it
// set.
//
//	go -C measure run ./flowcontrol [-n 0,1,2,4,8,10] [-reps 20] [-capacity 100MB] [-settings off,ratelimit,bound] [-direct=true]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/lab/flowsql"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/measure/harness"
)

// settleTimeout bounds the wait for the previous point's sessions to
// leave sluice or the server.
const settleTimeout = 60 * time.Second

type setting struct {
	name    string
	stmts   []string
	lowRate int64 // low_priority_bandwidth the statements set, bytes/s; -1: the default
}

func main() {
	ns := flag.String("n", "0,1,2,4,8,10", "numbers of bulk sessions")
	reps := flag.Int("reps", 20, "normal queries measured per point")
	capacity := flag.String("capacity", "100MB", "link capacity (bytes/s with a unit; MB is 10^6 bytes)")
	only := flag.String("settings", "off,ratelimit,bound", "settings to run")
	direct := flag.Bool("direct", true, "also measure each point directly against PostgreSQL, without sluice")
	flag.Parse()
	ctx := context.Background()
	url := harness.Env("SLUICE_TEST_PG", "postgres://sluice:sluice@127.0.0.1:15432/sluice?sslmode=disable")
	var counts []int
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			log.Fatalf("-n: bad value %q", s)
		}
		counts = append(counts, n)
	}
	capBytes, err := units.ParseRate(*capacity)
	if err != nil || capBytes <= 0 {
		log.Fatalf("-capacity: want a rate such as 100MB, got %q", *capacity)
	}
	if err := run(ctx, url, counts, *reps, capBytes, strings.Split(*only, ","), *direct); err != nil {
		log.Fatal(err)
	}
}

// row is one point's results.
type row struct {
	n                 int
	ms, slowdown      float64 // normal query through sluice, median
	directMS, floor   float64 // normal query without sluice, median; slowdown floor
	lowAlone, lowSide float64 // low class MB/s at the client, alone and beside the normal query
	linkAlone         float64 // low class MB/s admitted by the link, alone and beside
	linkSide          float64
	lowShare          float64 // linkSide / capacity the normal query leaves idle on the link
	hostCPU, sluCPU   float64 // % of one core during the normal queries
}

func run(ctx context.Context, url string, counts []int, reps int, capBytes int64, only []string, direct bool) error {
	up, err := harness.HostPort(url)
	if err != nil {
		return err
	}
	// The low-priority user, in PostgreSQL and in sluice's catalog.
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	admin.Exec(ctx, "DO $$BEGIN CREATE ROLE bulk LOGIN PASSWORD 'bulk'; EXCEPTION WHEN duplicate_object THEN NULL; END$$")
	admin.Exec(ctx, "GRANT CONNECT ON DATABASE sluice TO bulk")
	admin.Close(ctx)

	// Sessions closed abruptly at the end of each point are expected: no
	// warning for each.
	s, err := harness.Start(ctx, "postgres", up, "--log-level", "error")
	if err != nil {
		return err
	}
	defer s.Stop()
	pid := pidOf(s.Bin)
	lowRate := capBytes / 5
	if err := s.Exec(ctx,
		fmt.Sprintf("ALTER LINK default WITH (capacity='%d')", capBytes),
		"CREATE RESOURCE POOL bulkpool WITH (network_priority='low')",
		"CREATE USER bulk RESOURCE POOL 'bulkpool'",
	); err != nil {
		return err
	}
	settings := map[string]setting{
		"off": {"off", []string{"SET network_control = off", "RESET low_priority_bandwidth", "RESET low_priority_queue_bytes"}, -1},
		"ratelimit": {"ratelimit", []string{"SET network_control = on",
			fmt.Sprintf("SET low_priority_bandwidth = '%d'", lowRate), "SET low_priority_queue_bytes = '-1'"}, lowRate},
		"bound": {"bound", []string{"SET network_control = on", "RESET low_priority_bandwidth", "RESET low_priority_queue_bytes"}, -1},
	}
	normalURL, _ := harness.ReplaceHostPort(url, s.Listen)
	bulkURL := strings.Replace(normalURL, "sluice:sluice@", "bulk:bulk@", 1)
	directBulkURL := strings.Replace(url, "sluice:sluice@", "bulk:bulk@", 1)

	fmt.Printf("flow control: link capacity %.1f MB/s, normal query ~1 MB x %d per point (median reported), bulk sessions pull %q\n", float64(capBytes)/1e6, reps, flowsql.PGBulk)
	results := map[string][]row{}
	for _, name := range only {
		st, ok := settings[name]
		if !ok {
			return fmt.Errorf("unknown setting %q", name)
		}
		if err := s.Exec(ctx, st.stmts...); err != nil {
			return err
		}
		if err := checkUnits(ctx, s, capBytes, st.lowRate); err != nil {
			return err
		}
		var base, directBase float64
		for i, n := range counts {
			if err := settleSluice(ctx, s); err != nil {
				return fmt.Errorf("%s N=%d: %w", name, n, err)
			}
			p, err := point(ctx, s, pid, normalURL, bulkURL, n, reps)
			if err != nil {
				return fmt.Errorf("%s N=%d: %w", name, n, err)
			}
			r := row{n: n, ms: p.ms, lowAlone: p.lowAlone, lowSide: p.lowSide, linkAlone: p.linkAlone, linkSide: p.linkSide,
				hostCPU: p.hostCPU, sluCPU: p.sluCPU}
			if idle := float64(capBytes)/1e6 - p.normalMBs; idle > 0 {
				// On the link: what the clients receive lags it by their
				// socket buffers, too much for a window of a few hundred
				// milliseconds.
				r.lowShare = p.linkSide / idle
			}
			if direct {
				if err := settleServer(ctx, url); err != nil {
					return fmt.Errorf("%s N=%d direct: %w", name, n, err)
				}
				d, err := point(ctx, nil, 0, url, directBulkURL, n, reps, p.lowSide*1e6)
				if err != nil {
					return fmt.Errorf("%s N=%d direct: %w", name, n, err)
				}
				r.directMS = d.ms
			}
			if i == 0 {
				base, directBase = r.ms, r.directMS
			}
			r.slowdown = r.ms / base
			if base > 0 {
				r.floor = (base + r.directMS - directBase) / base
			}
			results[name] = append(results[name], r)
			fmt.Fprintf(os.Stderr, "  %-9s N=%-2d normal %7.2f ms  slowdown %5.2fx  direct %6.2f ms (floor %4.2fx)  low alone %6.1f MB/s (link %6.1f), beside normal %6.1f MB/s (link %6.1f, %3.0f%% of idle)  cpu host %3.0f%% sluice %3.0f%%\n",
				name, n, r.ms, r.slowdown, r.directMS, r.floor, r.lowAlone, r.linkAlone, r.lowSide, r.linkSide, 100*r.lowShare, r.hostCPU, r.sluCPU)
		}
	}
	fmt.Printf("\nslowdown is against N=%d of the same setting; direct = same query and paced bulk load without sluice; floor = slowdown the host's CPU alone would cause (see the package doc)\n", counts[0])
	fmt.Printf("\n| setting | N | normal query ms (median) | slowdown | direct ms | slowdown floor | low class alone MB/s | low beside normal MB/s | low / idle link capacity | host CPU | sluice CPU |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range only {
		for _, r := range results[name] {
			directMS, floor := "-", "-"
			if direct {
				directMS, floor = fmt.Sprintf("%.2f", r.directMS), fmt.Sprintf("%.2fx", r.floor)
			}
			fmt.Printf("| %s | %d | %.2f | %.2fx | %s | %s | %.1f | %.1f | %.0f%% | %.0f%% | %.0f%% |\n",
				name, r.n, r.ms, r.slowdown, directMS, floor, r.lowAlone, r.lowSide, 100*r.lowShare, r.hostCPU, r.sluCPU)
		}
	}
	fmt.Printf("\nlow_priority_bandwidth in the ratelimit setting: %.1f MB/s (20%% of capacity; MB = 10^6 bytes)\n", float64(lowRate)/1e6)
	return nil
}

// checkUnits confirms that sluice carries the capacity this program set
// and, unless lowRate is -1, the low_priority_bandwidth, in the same
// units: a rate shown as "20MB/s" must parse back to 20e6 bytes/s.
func checkUnits(ctx context.Context, s *harness.Sluice, capBytes, lowRate int64) error {
	rows, err := s.Query(ctx, "SHOW LINKS")
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r["name"] != "default" {
			continue
		}
		got, err := units.ParseRate(r["capacity"])
		if err != nil || got != capBytes {
			return fmt.Errorf("sluice shows link capacity %q, want %d bytes/s", r["capacity"], capBytes)
		}
	}
	rows, err = s.Query(ctx, "SHOW low_priority_bandwidth")
	if err != nil {
		return err
	}
	if lowRate < 0 {
		return nil
	}
	for _, r := range rows {
		for _, v := range r {
			got, err := units.ParseRate(v)
			if v == "unlimited" {
				got, err = 0, nil
			}
			if err != nil || got != lowRate {
				return fmt.Errorf("sluice shows low_priority_bandwidth %q, want %d bytes/s", v, lowRate)
			}
		}
	}
	return nil
}

// pointResult is what one point measured.
type pointResult struct {
	ms                  float64 // normal query, median elapsed
	lowAlone, lowSide   float64 // bulk MB/s at the clients
	linkAlone, linkSide float64 // low-class MB/s admitted by the link; 0 without sluice
	normalMBs           float64 // normal query MB/s over its window: on the link, or at the client without sluice
	hostCPU, sluCPU     float64 // % of one core over the normal queries' window
}

// point runs n bulk sessions, measures the bulk throughput alone for two
// seconds, then the normal query reps times, and returns the normal
// query's median elapsed and the throughputs. With s nil the URLs point
// at the server itself and each bulk session is paced to pace/n bytes/s
// (0: unpaced).
func point(ctx context.Context, s *harness.Sluice, pid int, normalURL, bulkURL string, n, reps int, pace ...float64) (pointResult, error) {
	var res pointResult
	var rate float64
	if len(pace) > 0 && n > 0 {
		rate = pace[0] / float64(n)
	}
	bctx, stop := context.WithCancel(ctx)
	var bulkBytes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var mu sync.Mutex
	var conns []net.Conn
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgconn.Connect(bctx, bulkURL)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			conns = append(conns, c.Conn())
			mu.Unlock()
			defer c.Close(context.Background())
			w := &pacer{n: &bulkBytes, rate: rate, start: time.Now()}
			for bctx.Err() == nil {
				if _, err := c.CopyTo(bctx, w, flowsql.PGBulk); err != nil {
					if bctx.Err() == nil {
						errs <- err
					}
					return
				}
			}
		}()
	}
	defer func() {
		// Close the sockets under the clients: a cancelled COPY would
		// otherwise drain what the server had already sent.
		stop()
		mu.Lock()
		for _, c := range conns {
			abort(c)
		}
		mu.Unlock()
		wg.Wait()
	}()
	c, err := pgx.Connect(ctx, normalURL)
	if err != nil {
		return res, err
	}
	defer c.Close(ctx)
	query := func() (int64, error) {
		rows, err := c.Query(ctx, flowsql.PGNormal, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return 0, err
		}
		var total int64
		for rows.Next() {
			total += int64(len(rows.RawValues()[0]))
		}
		rows.Close()
		return total, rows.Err()
	}
	if _, err := query(); err != nil { // warm up the session
		return res, err
	}
	linkLow, linkNormal := func() int64 { return 0 }, func() int64 { return 0 }
	if s != nil {
		linkLow = func() int64 { return linkBytes(ctx, s, "bytes_low") }
		linkNormal = func() int64 { return linkBytes(ctx, s, "bytes_normal") }
	}
	if n > 0 && s == nil {
		time.Sleep(time.Second) // let the paced sessions reach their rate
	}
	if n > 0 && s != nil {
		time.Sleep(1500 * time.Millisecond) // let the bulk sessions fill the link
		a0, l0, at := bulkBytes.Load(), linkLow(), time.Now()
		time.Sleep(2 * time.Second)
		secs := time.Since(at).Seconds()
		res.lowAlone = float64(bulkBytes.Load()-a0) / 1e6 / secs
		res.linkAlone = float64(linkLow()-l0) / 1e6 / secs
	}
	select {
	case err := <-errs:
		return res, err
	default:
	}
	var times []float64
	var normalBytes int64
	h0, s0 := hostCPU(), procCPU(pid)
	b0, l0, n0, t0 := bulkBytes.Load(), linkLow(), linkNormal(), time.Now()
	for i := 0; i < reps; i++ {
		start := time.Now()
		nb, err := query()
		if err != nil {
			return res, err
		}
		normalBytes += nb
		times = append(times, float64(time.Since(start).Microseconds())/1000)
	}
	secs := time.Since(t0).Seconds()
	res.lowSide = float64(bulkBytes.Load()-b0) / 1e6 / secs
	res.linkSide = float64(linkLow()-l0) / 1e6 / secs
	res.normalMBs = float64(normalBytes) / 1e6 / secs
	if s != nil {
		// The link's own count: the bytes the schedule gave the normal
		// query, protocol framing included, in the same window as the
		// low class's.
		res.normalMBs = float64(linkNormal()-n0) / 1e6 / secs
	}
	res.hostCPU = hostCPU().since(h0)
	if pid > 0 {
		res.sluCPU = 100 * (procCPU(pid) - s0) / secs
	}
	select {
	case err := <-errs:
		return res, err
	default:
	}
	sort.Float64s(times)
	res.ms = times[len(times)/2]
	return res, nil
}

// abort closes c at once, with a reset if it is TCP, so the peer stops
// sending instead of draining its buffers into a closed socket.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// linkBytes returns the bytes of one class the default link has admitted
// (col: bytes_low, bytes_normal, bytes_high), both directions, or 0 if
// sluice does not say.
func linkBytes(ctx context.Context, s *harness.Sluice, col string) int64 {
	rows, err := s.Query(ctx, "SHOW LINKS")
	if err != nil {
		return 0
	}
	for _, r := range rows {
		if r["name"] == "default" {
			v, _ := strconv.ParseInt(r[col], 10, 64)
			return v
		}
	}
	return 0
}

// settleSluice waits until sluice has no session and no byte waiting on
// its link.
func settleSluice(ctx context.Context, s *harness.Sluice) error {
	deadline := time.Now().Add(settleTimeout)
	for {
		sessions, err := s.Query(ctx, "SHOW SESSIONS")
		if err != nil {
			return err
		}
		links, err := s.Query(ctx, "SHOW LINKS")
		if err != nil {
			return err
		}
		waiting := false
		for _, r := range links {
			if r["waiting"] != "0" {
				waiting = true
			}
		}
		if len(sessions) == 0 && !waiting {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sluice still has %d sessions after %v", len(sessions), settleTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settleServer waits until the server has no backend of the bulk user.
func settleServer(ctx context.Context, url string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	deadline := time.Now().Add(settleTimeout)
	for {
		var k int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = 'bulk'").Scan(&k); err != nil {
			return err
		}
		if k == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("bulk backends still running")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pacer counts the bytes written to it into n and, with a rate in
// bytes/s, sleeps so that they arrive no faster than the rate; the
// client then reads its socket no faster, and TCP holds the server back.
type pacer struct {
	n     *atomic.Int64
	rate  float64 // bytes/s; 0 means unpaced
	start time.Time
	sent  int64
}

func (p *pacer) Write(b []byte) (int, error) {
	p.n.Add(int64(len(b)))
	p.sent += int64(len(b))
	if p.rate > 0 {
		due := p.start.Add(time.Duration(float64(p.sent) / p.rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
	}
	return len(b), nil
}

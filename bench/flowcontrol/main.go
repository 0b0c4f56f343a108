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
// and the low class's throughput during the measurement.
//
//	go run ./bench/flowcontrol [-n 0,1,2,4,8,10] [-reps 20] [-capacity 100MB]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/bench/harness"
)

const (
	bulkQuery   = `COPY (SELECT repeat('b', 7000) FROM generate_series(1, 100000)) TO STDOUT`
	normalQuery = `SELECT repeat('n', 1000) FROM generate_series(1, 1000)`
)

type setting struct {
	name  string
	stmts []string
}

func main() {
	ns := flag.String("n", "0,1,2,4,8,10", "numbers of bulk sessions")
	reps := flag.Int("reps", 20, "normal queries measured per point")
	capacity := flag.String("capacity", "100MB", "link capacity")
	only := flag.String("settings", "off,ratelimit,bound", "settings to run")
	flag.Parse()
	ctx := context.Background()
	url := harness.Env("SLUICE_TEST_PG", "postgres://sluice:sluice@127.0.0.1:15432/sluice?sslmode=disable")
	var counts []int
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			log.Fatalf("-n: bad value %q", s)
		}
		counts = append(counts, n)
	}
	if err := run(ctx, url, counts, *reps, *capacity, strings.Split(*only, ",")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string, counts []int, reps int, capacity string, only []string) error {
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

	s, err := harness.Start(ctx, "postgres", up)
	if err != nil {
		return err
	}
	defer s.Stop()
	capBytes := parseMB(capacity)
	lowRate := capBytes / 5
	if err := s.Exec(ctx,
		fmt.Sprintf("ALTER LINK default WITH (capacity='%s')", capacity),
		"CREATE RESOURCE POOL bulkpool WITH (network_priority='low')",
		"CREATE USER bulk RESOURCE POOL 'bulkpool'",
	); err != nil {
		return err
	}
	settings := map[string]setting{
		"off": {"off", []string{"SET network_control = off", "RESET low_priority_bandwidth", "RESET low_priority_queue_bytes"}},
		"ratelimit": {"ratelimit", []string{"SET network_control = on",
			fmt.Sprintf("SET low_priority_bandwidth = '%d'", int64(lowRate)), "SET low_priority_queue_bytes = '-1'"}},
		"bound": {"bound", []string{"SET network_control = on", "RESET low_priority_bandwidth", "RESET low_priority_queue_bytes"}},
	}
	normalURL, _ := harness.ReplaceHostPort(url, s.Listen)
	bulkURL := strings.Replace(normalURL, "sluice:sluice@", "bulk:bulk@", 1)

	fmt.Printf("flow control: link capacity %s, normal query ~1 MB x %d per point (median reported), bulk sessions pull %q\n", capacity, reps, bulkQuery)
	type row struct {
		n                  int
		ms, slowdown, low  float64
		lowShare, lowAlone float64
	}
	results := map[string][]row{}
	for _, name := range only {
		st, ok := settings[name]
		if !ok {
			return fmt.Errorf("unknown setting %q", name)
		}
		if err := s.Exec(ctx, st.stmts...); err != nil {
			return err
		}
		var base float64
		for _, n := range counts {
			ms, lowAlone, lowMBs, normalMBs, err := point(ctx, normalURL, bulkURL, n, reps)
			if err != nil {
				return fmt.Errorf("%s N=%d: %w", name, n, err)
			}
			if n == 0 || base == 0 {
				base = ms
			}
			idle := capBytes/1e6 - normalMBs
			r := row{n: n, ms: ms, slowdown: ms / base, low: lowMBs, lowAlone: lowAlone}
			if idle > 0 {
				r.lowShare = lowMBs / idle
			}
			results[name] = append(results[name], r)
			fmt.Fprintf(os.Stderr, "  %-9s N=%-2d normal %8.2f ms  slowdown %5.2fx  low class alone %7.1f MB/s, beside the normal query %7.1f MB/s (%.0f%% of idle capacity)\n",
				name, n, ms, r.slowdown, lowAlone, lowMBs, 100*r.lowShare)
		}
	}
	fmt.Printf("\n| setting | N | normal query ms (median) | slowdown | low class alone MB/s | low beside normal MB/s | low / idle capacity |\n|---|---|---|---|---|---|---|\n")
	for _, name := range only {
		for _, r := range results[name] {
			fmt.Printf("| %s | %d | %.2f | %.2fx | %.1f | %.1f | %.0f%% |\n", name, r.n, r.ms, r.slowdown, r.lowAlone, r.low, 100*r.lowShare)
		}
	}
	fmt.Printf("\nlow_priority_bandwidth in the ratelimit setting: %.1f MB/s (20%% of capacity)\n", lowRate/1e6)
	return nil
}

// point runs n bulk sessions, measures the low class alone for two
// seconds, then the normal query reps times, and returns the normal
// query's median elapsed in ms, the low class's throughput alone, the
// low class's throughput while the normal queries ran, and the normal
// query's throughput, in MB/s.
func point(ctx context.Context, normalURL, bulkURL string, n, reps int) (ms, lowAlone, lowMBs, normalMBs float64, err error) {
	bctx, stop := context.WithCancel(ctx)
	var bulkBytes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgconn.Connect(bctx, bulkURL)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close(context.Background())
			w := &adder{n: &bulkBytes}
			for bctx.Err() == nil {
				if _, err := c.CopyTo(bctx, w, bulkQuery); err != nil {
					if bctx.Err() == nil {
						errs <- err
					}
					return
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	c, err := pgx.Connect(ctx, normalURL)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer c.Close(ctx)
	query := func() (int64, error) {
		rows, err := c.Query(ctx, normalQuery, pgx.QueryExecModeSimpleProtocol)
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
		return 0, 0, 0, 0, err
	}
	if n > 0 {
		time.Sleep(1500 * time.Millisecond) // let the bulk sessions fill the link
		a0, at := bulkBytes.Load(), time.Now()
		time.Sleep(2 * time.Second)
		lowAlone = float64(bulkBytes.Load()-a0) / 1e6 / time.Since(at).Seconds()
	}
	select {
	case err := <-errs:
		return 0, 0, 0, 0, err
	default:
	}
	var times []float64
	var normalBytes int64
	b0, t0 := bulkBytes.Load(), time.Now()
	for i := 0; i < reps; i++ {
		start := time.Now()
		nb, err := query()
		if err != nil {
			return 0, 0, 0, 0, err
		}
		normalBytes += nb
		times = append(times, float64(time.Since(start).Microseconds())/1000)
	}
	secs := time.Since(t0).Seconds()
	lowMBs = float64(bulkBytes.Load()-b0) / 1e6 / secs
	normalMBs = float64(normalBytes) / 1e6 / secs
	sort.Float64s(times)
	return times[len(times)/2], lowAlone, lowMBs, normalMBs, nil
}

type adder struct{ n *atomic.Int64 }

func (a *adder) Write(p []byte) (int, error) { a.n.Add(int64(len(p))); return len(p), nil }

func parseMB(s string) float64 {
	s = strings.TrimSuffix(s, "MB")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		log.Fatalf("-capacity: want a value in MB such as 100MB, got %q", s)
	}
	return v * 1e6
}

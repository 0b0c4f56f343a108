// Command realnet measures sluice's flow control on a real kernel
// bottleneck: a client network namespace reaches a sluice route whose
// listener lives in a second namespace, over a veth pair (netlab).
// sluice runs in this process. With -side send the veth's egress toward
// the client goes through a tbf queue of the given rate and depth, and
// sluice reaches PostgreSQL on the host's loopback; with -side receive
// the client's veth is unshaped, and sluice reaches PostgreSQL through a
// third namespace, the server's, whose egress toward sluice goes
// through the tbf queue (a relay there forwards to PostgreSQL on the
// host's loopback), so the bottleneck is where sluice receives. N sessions of a user in a network_priority='low'
// pool each pull a large result over and over, and a 100 kB query from
// an ordinary user is timed with pgbench, alone and beside them, for
// each setting:
//
//   - off: network_control = off;
//   - on: network_control = on, nothing configured about the link;
//   - capacity: on, with the link's capacity at 95 % of the tbf rate.
//
// Every address is in 198.18.0.0/15, inside namespaces it makes and
// removes. Needs root, pgbench and psql, and PostgreSQL with a role
// sluice (password sluice) that may create roles (scripts/testdb start).
//
//	go -C measure run ./realnet -rate 200mbit -queue 100ms -n 8
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/netlab"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	rate := flag.String("rate", "200mbit", "the bottleneck's rate (units: 50mbit, 1gbit, 25MB)")
	queue := flag.Duration("queue", 100*time.Millisecond, "the bottleneck's queue, in time at its rate")
	n := flag.Int("n", 8, "bulk sessions")
	dur := flag.Duration("time", 5*time.Second, "pgbench run per measurement")
	modes := flag.String("modes", "off,on,capacity", "settings to measure")
	instances := flag.Int("instances", 1, "sluice instances sharing the bottleneck (more than one: a fleet on etcd, no budget set)")
	etcdAddr := flag.String("etcd", "127.0.0.1:"+harness.Env("SLUICE_TEST_ETCD_PORT", "12379"), "etcd host:port for a fleet")
	set := flag.String("set", "", "console statements run on each setting after its own (e.g. \"SET low_priority_yield = '10%'\")")
	stress := flag.Bool("stress", false, "run stress-ng --cpu on every core during each measurement")
	trace := flag.Duration("trace", 0, "print the controller's rows and the queue's backlog at this period (0: no)")
	side := flag.String("side", "send", "where the bottleneck is: send (between sluice and the client) or receive (between the server and sluice)")
	cpuprofile := flag.String("cpuprofile", "", "write sluice's CPU profile over the whole run to this file")
	pg := flag.String("pg", "127.0.0.1:"+harness.Env("SLUICE_TEST_PG_PORT", "15432"), "PostgreSQL host:port")
	flag.Parse()
	harness.Main("realnet", func(ctx context.Context) error {
		if *cpuprofile != "" {
			f, err := os.Create(*cpuprofile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		return run(ctx, *rate, *queue, *n, *dur, strings.Split(*modes, ","), *pg, *side, testbed{trace: *trace, instances: max(*instances, 1), etcd: *etcdAddr, stress: *stress, set: *set})
	})
}

// parseRate reads "200mbit" (bits/s) or a sluice rate ("25MB").
func parseRate(s string) (int64, error) {
	l := strings.ToLower(s)
	for _, u := range []struct {
		suffix string
		mul    float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if strings.HasSuffix(l, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(l, u.suffix), 64)
			return int64(v * u.mul / 8), err
		}
	}
	return units.ParseRate(s)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, rateS string, queue time.Duration, n int, dur time.Duration, modes []string, pg, side string, bed testbed) error {
	rate, err := parseRate(rateS)
	if err != nil {
		return err
	}
	if err := ensureRole(ctx, pg); err != nil {
		return err
	}
	tb, err := netlab.New(ctx)
	if err != nil {
		return err
	}
	defer tb.Close()
	cli, err := tb.Namespace(ctx, "cli")
	if err != nil {
		return err
	}
	prx, l, err := tb.Attach(ctx, "prx", cli)
	if err != nil {
		return err
	}
	bed.prx, bed.cli, bed.front, bed.upstream, bed.bottleneck = prx, cli, l, pg, l.A
	switch side {
	case "send":
	case "receive":
		srv, ls, err := tb.Attach(ctx, "srv", prx)
		if err != nil {
			return err
		}
		ln, err := srv.Listen(ctx, "tcp", netip.AddrPortFrom(ls.A.Addr, 5432).String())
		if err != nil {
			return err
		}
		defer ln.Close()
		go relay(ln, pg)
		bed.upstream, bed.bottleneck, bed.dial = ln.Addr().String(), ls.A, prx.Dial
	default:
		return fmt.Errorf("-side %q: send or receive", side)
	}
	if err := bed.bottleneck.Shape(ctx, rate, queue); err != nil {
		return err
	}
	progress("bottleneck: %s (%d B/s), queue %v, on the %s side; %d bulk sessions", rateS, rate, queue, side, n)
	fmt.Printf("%-10s %10s %12s %9s %9s %9s %9s  %s\n", "setting", "alone ms", "beside ms", "slowdown", "link use", "bulk use", "recovery", "controller")
	for _, m := range modes {
		r, err := measure(ctx, bed, rate, n, dur, m)
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		fmt.Printf("%-10s %10.2f %12.2f %8.2fx %8.0f%% %8.0f%% %9s  %s\n", m, r.alone, r.loaded, r.loaded/r.alone, 100*r.use, 100*r.bulkUse, r.recovery, r.network)
	}
	return nil
}

// testbed is where a measurement runs: the client's and sluice's
// namespaces, the veth between them, the upstream sluice dials (from
// its namespace when dial is set), and the end whose egress is the
// bottleneck.
type testbed struct {
	prx, cli   *netlab.Namespace
	front      *netlab.Link
	upstream   string
	dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	bottleneck netlab.End
	trace      time.Duration // 0: none
	instances  int           // sluice instances, a fleet when more than one
	etcd       string        // host:port of the fleet's etcd
	stress     bool          // a CPU-bound background during each measurement
	set        string        // console statements after each setting's own
}

// relay forwards each connection ln accepts to addr, both ways.
func relay(ln net.Listener, addr string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
			io.Copy(c, u)
		}()
	}
}

type result struct {
	alone, loaded float64 // ms
	use           float64 // of the bottleneck's rate, while loaded
	bulkUse       float64 // of the bottleneck's rate, the bulk sessions alone
	// recovery is how long after the measured query's load stopped the
	// link was back at 85 % use over 250 ms; "-" not within 4 s.
	recovery string
	network  string // SHOW NETWORK's rows at the end
}

func measure(ctx context.Context, tb testbed, rate int64, n int, dur time.Duration, mode string) (result, error) {
	prx, cli, l, bn := tb.prx, tb.cli, tb.front, tb.bottleneck
	var res result
	if tb.stress {
		sctx, stopStress := context.WithCancel(ctx)
		progress("%s: a CPU-bound background on every core (stress-ng --cpu 0)", mode)
		cmd := exec.CommandContext(sctx, "stress-ng", "--cpu", "0", "--quiet")
		if err := cmd.Start(); err != nil {
			stopStress()
			return res, fmt.Errorf("stress-ng: %w", err)
		}
		defer func() {
			stopStress()
			cmd.Wait()
		}()
	}
	stacks, err := startStacks(ctx, tb, mode)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, st := range stacks {
			st.Close()
		}
	}()
	st := stacks[0]
	svc := st.Manager().Service()
	control := map[string]string{"off": "off", "on": "on", "capacity": "on"}[mode]
	if control == "" {
		return res, fmt.Errorf("unknown setting %q", mode)
	}
	link := "CREATE LINK l"
	if mode == "capacity" {
		link += fmt.Sprintf(" WITH (capacity='%d')", rate*95/100)
	}
	for _, q := range []string{link, "SET network_control = " + control,
		"CREATE RESOURCE POOL lowpool WITH (network_priority='low')", "CREATE USER bulk RESOURCE POOL 'lowpool'"} {
		if _, err := svc.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("%s: %w", q, err)
		}
	}
	if tb.set != "" {
		if _, err := svc.Exec(ctx, tb.set); err != nil {
			return res, fmt.Errorf("%s: %w", tb.set, err)
		}
	}
	for i, st := range stacks {
		if i > 0 {
			// The catalog reaches the others through etcd.
			if err := waitCatalog(ctx, st); err != nil {
				return res, err
			}
		}
		ln, err := prx.Listen(ctx, "tcp", netip.AddrPortFrom(l.A.Addr, uint16(7432+i)).String())
		if err != nil {
			return res, err
		}
		if _, err := st.AddRoute(stack.Route{Route: config.Route{Name: "pg", Upstream: tb.upstream, Protocol: "postgres", Link: "l"}, Listener: ln, Dial: tb.dial}); err != nil {
			return res, err
		}
	}
	host := l.A.Addr.String()
	query, err := os.CreateTemp("", "realnet-*.sql")
	if err != nil {
		return res, err
	}
	defer os.Remove(query.Name())
	fmt.Fprintln(query, "select repeat('a', 100000);")
	query.Close()
	lat := func() (float64, error) {
		out, err := cli.Command(ctx, "env", "PGPASSWORD=sluice", "pgbench", "-n", "-h", host, "-p", "7432", "-U", "sluice",
			"-c", "1", "-T", strconv.Itoa(int(dur.Seconds())), "-f", query.Name(), "sluice").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("pgbench: %w: %s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 4 && f[0] == "latency" && f[1] == "average" {
				return strconv.ParseFloat(f[3], 64)
			}
		}
		return 0, fmt.Errorf("pgbench printed no latency: %s", out)
	}
	if tb.trace > 0 {
		tctx, stopTrace := context.WithCancel(ctx)
		defer stopTrace()
		go func() {
			for tctx.Err() == nil {
				time.Sleep(tb.trace)
				q, _ := bn.Qdisc(tctx)
				line := fmt.Sprintf("backlog %7d", q.Backlog)
				if t, ok := st.Manager().Views().ViewTables([]string{"network"})["network"]; ok {
					for _, row := range t.Rows {
						line += " | " + strings.Join(row[2:], " ")
					}
				}
				progress("%s", line)
			}
		}()
	}
	progress("%s: the 100 kB query alone", mode)
	if res.alone, err = lat(); err != nil {
		return res, err
	}
	bctx, stopBulk := context.WithCancel(ctx)
	defer stopBulk()
	for i := range n {
		port := strconv.Itoa(7432 + i%len(stacks)) // the bulk sessions spread over the instances
		go func() {
			for bctx.Err() == nil {
				cli.Command(bctx, "env", "PGPASSWORD=bulk", "psql", "-h", host, "-p", port, "-U", "bulk", "-d", "sluice", "-qAtc",
					"select repeat('b',7000) from generate_series(1,3000)").Run()
			}
		}()
	}
	// The bulk sessions get going: N clients connect, and with network
	// control the first queue they fill is found and drained.
	time.Sleep(3 * time.Second)
	use := func(d time.Duration) (float64, error) {
		q0, err := bn.Qdisc(ctx)
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		time.Sleep(d)
		q1, err := bn.Qdisc(ctx)
		return float64(q1.Bytes-q0.Bytes) / time.Since(t0).Seconds() / float64(rate), err
	}
	if res.bulkUse, err = use(3 * time.Second); err != nil {
		return res, err
	}
	q0, err := bn.Qdisc(ctx)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	progress("%s: the 100 kB query beside %d bulk sessions", mode, n)
	if res.loaded, err = lat(); err != nil {
		return res, err
	}
	q1, err := bn.Qdisc(ctx)
	if err != nil {
		return res, err
	}
	res.use = float64(q1.Bytes-q0.Bytes) / time.Since(t0).Seconds() / float64(rate)
	stopped := time.Now()
	res.recovery = "-"
	for time.Since(stopped) < 4*time.Second {
		u, err := use(250 * time.Millisecond)
		if err != nil {
			return res, err
		}
		if u >= 0.85 {
			res.recovery = time.Since(stopped).Round(10 * time.Millisecond).String()
			break
		}
	}
	for i, st := range stacks {
		if t, ok := st.Manager().Views().ViewTables([]string{"network"})["network"]; ok {
			for _, row := range t.Rows {
				res.network += fmt.Sprintf("%d:%s ", i, strings.Join(row, "|"))
			}
		}
	}
	stopBulk()
	return res, nil
}

// startStacks starts the testbed's sluice instances: one with its
// catalog in memory, or several sharing one in etcd (a fleet, with no
// budget), under a prefix of their own.
func startStacks(ctx context.Context, tb testbed, mode string) ([]*stack.Stack, error) {
	var stacks []*stack.Stack
	prefix := fmt.Sprintf("realnet-%d-%s-%d", os.Getpid(), mode, time.Now().UnixNano())
	for i := range tb.instances {
		cfg := &config.Config{}
		if tb.instances > 1 {
			var err error
			y := fmt.Sprintf("catalog: etcd://%s/%s\ninstance_name: sluice%d\n", tb.etcd, prefix, i)
			if cfg, err = config.Parse("realnet", []byte(y)); err != nil {
				return stacks, err
			}
		}
		st, err := stack.New(ctx, stack.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Version: "realnet"})
		if err != nil {
			for _, st := range stacks {
				st.Close()
			}
			return nil, err
		}
		stacks = append(stacks, st)
	}
	return stacks, nil
}

// waitCatalog waits until st's catalog binds the bulk user.
func waitCatalog(ctx context.Context, st *stack.Stack) error {
	for range 100 {
		if t, ok := st.Manager().Views().ViewTables([]string{"users"})["users"]; ok && len(t.Rows) > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the fleet's catalog did not reach an instance in 5 s")
}

// ensureRole makes the bulk role the low-priority sessions log in as.
func ensureRole(ctx context.Context, pg string) error {
	c, err := pgx.Connect(ctx, "postgres://sluice:sluice@"+pg+"/sluice")
	if err != nil {
		return fmt.Errorf("PostgreSQL at %s: %w", pg, err)
	}
	defer c.Close(ctx)
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bulk')").Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := c.Exec(ctx, "CREATE ROLE bulk LOGIN PASSWORD 'bulk'"); err != nil {
			return err
		}
	}
	_, err = c.Exec(ctx, "GRANT CONNECT ON DATABASE sluice TO bulk")
	return err
}

// Command fleetbudget is the acceptance bench of the fleet's shared
// low-priority budget (cluster_low_priority_bandwidth). It runs three
// sluice instances, a, b and c, in this process, each built as sluice
// serve builds it from a configuration file: the catalog in etcd (an
// etcd:// URL of a fresh prefix), instance_name, and an instance_ttl of
// 3 s; each joins the fleet and runs its part of the budget under its
// membership lease with no further call. The pool and the budget are
// set once, on a (CREATE RESOURCE POOL bulk_low ... low, SET
// cluster_low_priority_bandwidth = -budget), and b and c apply them
// from the catalog; then each gets a tcp route whose default pool is
// bulk_low, in front of a bulk source served by this program (the link
// is measured, not a database). Bulk sessions run on a only, then on a
// and b, then on all three, and finally the allocator's instance is
// killed: its sessions end and its connections to etcd (each instance
// reaches etcd through forwarders of this program) are cut at once, so
// that its lease is not revoked but expires, as after a crash.
//
// Every 100 ms it reads each instance's Low-class bytes (the link's
// counter, down); per phase it reports, over every 1 s window, the sum
// of the three throughputs (mean, min, max) and each instance's share.
// The first -settle of a phase is the transition (lower before raise
// takes a round or two of the allocator) and is left out of the mean
// and the shares, but not of the max. PASS when, in each phase, the
// steady mean sum is within 5% of the budget, no 1 s window of the
// whole run (transitions included) is above 105% of it, and the shares
// follow demand (the busy instances within 10% of an equal share, the
// idle ones under 1%); after the kill, when another instance is the
// allocator within the lease TTL (plus the election's own round trip,
// 1 s), the killed instance's lease outlived the kill and then expired
// (it was not revoked), and the survivors share the budget again.
//
// Before the fleet, two controls run the same shapes without one: one
// busy instance whose low_priority_bandwidth is the budget (phase a's
// shape) and three whose low_priority_bandwidth is a third of it each
// (phase a+b+c's, the static split a shared budget replaces). They say
// what the host carries when only the leaky buckets limit the links: a
// bucket loses what a late pump does not take within its 1 ms tick, so
// on a loaded host the controls fall short too (-control=false skips
// them).
//
// Units: MB is 10^6 bytes, as in sluice.
//
//	go -C measure run ./fleetbudget [-etcd 127.0.0.1:12379,...] [-budget 30MB] [-phase 12s] [-settle 4s] [-sessions 2] [-svg fleetbudget.svg]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/measure/harness"
)

const (
	sampleEvery = 100 * time.Millisecond
	window      = 10 // samples per 1 s window
	leaseTTL    = 3  // seconds
)

func main() {
	eps := harness.EtcdFlag()
	budgetFlag := flag.String("budget", "30MB", "cluster_low_priority_bandwidth (bytes/s with a unit)")
	phase := flag.Duration("phase", 12*time.Second, "length of each phase")
	settle := flag.Duration("settle", 4*time.Second, "start of each phase left out of the mean and the shares")
	sessions := flag.Int("sessions", 2, "bulk sessions per busy instance")
	svgPath := flag.String("svg", "", "write an SVG chart of the throughputs here")
	verbose := flag.Bool("v", false, "log the instances' budget transitions")
	control := flag.Bool("control", true, "first measure one, then three busy instances without a fleet, held to the budget (one) or a third of it (each of three) by low_priority_bandwidth: what the host carries for the same shapes")
	flag.Parse()
	budget, err := units.ParseRate(*budgetFlag)
	if err != nil || budget <= 0 {
		log.Fatalf("-budget %q: %v", *budgetFlag, err)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	ctx := context.Background()
	endpoints := eps()
	ecfg, admin, done, err := harness.EtcdScratch(ctx, endpoints, "fleetbudget")
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	var results []phaseResult
	src, err := bulkSource()
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()

	if *control {
		for _, k := range []int{1, 3} {
			c, err := controlRun(ctx, src.Addr().String(), budget, k, *phase, *settle, *sessions, logger)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("  control: %d instance(s), no fleet, low_priority_bandwidth = %s each, all busy: sum mean %6.2f MB/s (min %6.2f, max %6.2f over 1 s windows)\n",
				k, units.FormatRate(budget/int64(k)), c.mean/1e6, c.min/1e6, c.max/1e6)
			results = append(results, c)
		}
	}

	insts := make([]*instance, 3)
	for i := range insts {
		if insts[i], err = startInstance(ctx, endpoints, ecfg.Prefix, string(rune('a'+i)), logger); err != nil {
			log.Fatal(err)
		}
		defer insts[i].close()
	}
	// The workload is set once, on a; b and c apply it from the catalog.
	for _, q := range []string{
		"CREATE RESOURCE POOL bulk_low WITH (network_priority=low)",
		"SET cluster_low_priority_bandwidth = '" + *budgetFlag + "'",
	} {
		if _, err := insts[0].st.Manager().Service().Exec(ctx, q); err != nil {
			log.Fatalf("a: %s: %v", q, err)
		}
	}
	rev := insts[0].st.Manager().Service().AppliedRevision()
	t0 := time.Now()
	if err := waitApplied(insts, rev, 10*time.Second); err != nil {
		log.Fatal(err)
	}
	for _, in := range insts {
		if err := in.addRoute(src.Addr().String()); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("fleetbudget: 3 instances (a, b, c) on the etcd catalog %s%s, instance_ttl %ds; on a: cluster_low_priority_bandwidth = %s, applied by b and c (catalog revision %d) after %v; %d bulk sessions per busy instance\n",
		strings.Join(endpoints, ","), ecfg.Prefix, leaseTTL, units.FormatRate(budget), rev, time.Since(t0).Round(time.Millisecond), *sessions)

	if *verbose {
		go func() {
			for range time.Tick(time.Second) {
				var parts []string
				for _, in := range insts {
					st, _ := in.st.BudgetState()
					for _, r := range st.Rows {
						if r.Self {
							parts = append(parts, fmt.Sprintf("%s %s want %.1f rate %.1f v%d alloc %v", r.Instance, r.Mode, float64(r.Want)/1e6, float64(r.Rate)/1e6, r.Version, r.Allocator))
						}
					}
				}
				fmt.Fprintln(os.Stderr, "    budget:", strings.Join(parts, " | "))
			}
		}()
	}
	rec := &recorder{insts: insts}
	sctx, stopSampling := context.WithCancel(ctx)
	var swg sync.WaitGroup
	swg.Add(1)
	go func() { defer swg.Done(); rec.run(sctx) }()

	type phaseDef struct {
		name  string
		start []int // instances whose bulk sessions start
		kill  bool
	}
	phases := []phaseDef{
		{name: "a", start: []int{0}},
		{name: "a+b", start: []int{1}},
		{name: "a+b+c", start: []int{2}},
		{name: "kill allocator", kill: true},
	}
	pass := true
	var killInfo string
	var leaseExpired bool // the killed instance's lease outlived the kill, then expired
	for _, ph := range phases {
		begin := rec.len()
		var killed = -1
		for _, i := range ph.start {
			insts[i].startBulk(*sessions)
		}
		var failover time.Duration = -1
		if ph.kill {
			killed = allocatorOf(insts)
			if killed < 0 {
				fmt.Println("  no allocator to kill")
				pass = false
				break
			}
			lease := insts[killed].st.Lease()
			t0 := time.Now()
			insts[killed].kill()
			// The killed instance's lease is not revoked: etcd drops it
			// when its TTL runs out.
			type end struct {
				text    string
				expired bool
			}
			gone := make(chan end, 1)
			go func() {
				text, expired := leaseEnd(ctx, admin, lease, t0, *phase)
				gone <- end{text, expired}
			}()
			for time.Since(t0) < *phase {
				if j := allocatorOf(insts); j >= 0 && j != killed {
					failover = time.Since(t0)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			killInfo = fmt.Sprintf("killed %s (the allocator); ", insts[killed].name)
			if failover >= 0 {
				j := allocatorOf(insts)
				killInfo += fmt.Sprintf("%s elected after %v (lease TTL %ds)", insts[j].name, failover.Round(10*time.Millisecond), leaseTTL)
			} else {
				killInfo += "no other instance elected"
			}
			e := <-gone
			killInfo += "; " + e.text
			leaseExpired = e.expired
			time.Sleep(time.Until(t0.Add(*phase)))
		} else {
			time.Sleep(*phase)
		}
		samples := rec.since(begin)
		busy := make([]bool, len(insts))
		for i, in := range insts {
			busy[i] = in.busy() && i != killed
		}
		r := evaluate(ph.name, samples, busy, budget, int(*settle/sampleEvery))
		if ph.kill {
			// The dead instance's grant counts until it expires, so the
			// survivors may stay at their old shares for up to the
			// grant TTL: the phase passes when the sum stays under the
			// ceiling, the takeover is within the lease TTL (and a
			// round trip) and the survivors end sharing the budget.
			rec := recovery(samples, budget)
			r.note = killInfo
			if rec >= 0 {
				r.note += fmt.Sprintf("; sum back within 5%% of the budget %v after the kill", rec)
			} else {
				r.note += "; sum not back within 5% of the budget"
			}
			r.ok = r.allMax <= 1.05*float64(budget) && leaseExpired && failover >= 0 && failover <= (leaseTTL+1)*time.Second && rec >= 0 && r.sharesOK
		}
		results = append(results, r)
		pass = pass && r.ok
		fmt.Printf("  phase %-15s sum mean %6.2f MB/s (min %6.2f, max %6.2f over 1 s windows)  shares %s  %s\n",
			ph.name, r.mean/1e6, r.min/1e6, r.max/1e6, r.sharesText(insts), okText(r.ok))
		if r.note != "" {
			fmt.Printf("    %s\n", r.note)
		}
	}
	stopSampling()
	swg.Wait()

	fmt.Printf("\n%-15s %9s %9s %9s %10s %7s %7s %7s %-13s %s\n", "phase", "mean MB/s", "min MB/s", "max MB/s", "all max", "a", "b", "c", "rates set", "result")
	for _, r := range results {
		if r.control {
			fmt.Printf("%-15s %9.2f %9.2f %9.2f %10.2f %7s %7s %7s %-13s %s\n", r.name, r.mean/1e6, r.min/1e6, r.max/1e6, r.allMax/1e6, "", "", "", "", "control")
			continue
		}
		fmt.Printf("%-15s %9.2f %9.2f %9.2f %10.2f %6.1f%% %6.1f%% %6.1f%% %-13s %s\n", r.name, r.mean/1e6, r.min/1e6, r.max/1e6, r.allMax/1e6,
			100*r.shares[0], 100*r.shares[1], 100*r.shares[2], fmt.Sprintf("%.2f..%.2f", r.grantMin/1e6, r.grantMax/1e6), okText(r.ok))
	}
	fmt.Printf("rates set: the sum of the Low-class rates the budget set on the live instances (SHOW BUDGET's rate), min..max over the steady readings, MB/s\n")
	fmt.Printf("steady windows: after the first %v of each phase; budget %.2f MB/s, PASS band %.2f..%.2f MB/s, ceiling %.2f MB/s\n",
		*settle, float64(budget)/1e6, 0.95*float64(budget)/1e6, 1.05*float64(budget)/1e6, 1.05*float64(budget)/1e6)
	if *svgPath != "" {
		if err := rec.chart(*svgPath, budget); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("chart: %s\n", *svgPath)
	}
	if pass {
		fmt.Println("PASS")
		return
	}
	fmt.Println("FAIL")
	defer os.Exit(1)
}

// leaseEnd watches the lease id from the kill at t0 for at most d and
// says what etcd had left of it after the kill and when it was gone;
// expired reports that the lease was still there after the kill (it was
// not revoked) and gone within d.
func leaseEnd(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, t0 time.Time, d time.Duration) (text string, expired bool) {
	if id == 0 {
		return "the killed instance had no lease", false
	}
	left := int64(-2)
	for time.Since(t0) < d {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err := cli.TimeToLive(qctx, id)
		cancel()
		switch {
		case err != nil:
		case r.TTL < 0:
			if left == -2 {
				return fmt.Sprintf("its lease %x was already gone %v after the kill", int64(id), time.Since(t0).Round(10*time.Millisecond)), false
			}
			return fmt.Sprintf("its lease %x (%d s left just after the kill) expired %v after the kill", int64(id), left, time.Since(t0).Round(10*time.Millisecond)), true
		case left == -2:
			left = r.TTL
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Sprintf("its lease %x still there %v after the kill", int64(id), d), false
}

func okText(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// bulkSource serves endless bytes to every connection.
func bulkSource() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10) // only read
	go harness.ServeEach(ln, func(c net.Conn) {
		defer c.Close()
		go io.Copy(io.Discard, c)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	return ln, nil
}

// instance is one in-process sluice of the fleet.
type instance struct {
	name  string
	st    *stack.Stack
	cut   *etcdLink // its connections to etcd; nil for the controls
	route string    // the route's listen address

	mu     sync.Mutex
	conns  []net.Conn    // guarded by mu; the bulk sessions' client ends
	dead   bool          // guarded by mu
	closed chan struct{} // closed once a killed instance's Close returned
}

// startInstance starts the instance name as sluice serve would from a
// configuration file naming the etcd catalog (its endpoints are the
// instance's own links to etcd, so that kill can cut them), the name
// and a membership lease of leaseTTL seconds.
func startInstance(ctx context.Context, endpoints []string, prefix, name string, log *slog.Logger) (*instance, error) {
	cut, err := newEtcdLink(endpoints)
	if err != nil {
		return nil, err
	}
	yaml := fmt.Sprintf("catalog: etcd://%s%s\ninstance_name: %s\ninstance_ttl: %ds\n", strings.Join(cut.Addrs(), ","), prefix, name, leaseTTL)
	cfg, err := config.Parse(name+".yaml", []byte(yaml))
	if err != nil {
		cut.Cut()
		return nil, err
	}
	st, err := stack.New(ctx, stack.Options{Config: cfg, Logger: log.With("instance", name)})
	if err != nil {
		cut.Cut()
		return nil, err
	}
	return &instance{name: name, st: st, cut: cut}, nil
}

// addRoute gives the instance its tcp route to upstream, whose sessions
// run in the pool bulk_low.
func (in *instance) addRoute(upstream string) error {
	addr, err := in.st.AddRoute(stack.Route{Route: config.Route{Name: "bulk", Listen: "127.0.0.1:0", Upstream: upstream, Protocol: "tcp"}, Pool: "bulk_low"})
	if err != nil {
		return fmt.Errorf("%s: %w", in.name, err)
	}
	in.route = addr.String()
	return nil
}

// waitApplied waits until every instance applies the catalog revision
// rev or a later one, for at most d.
func waitApplied(insts []*instance, rev uint64, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, in := range insts {
		for in.st.Manager().Service().AppliedRevision() < rev {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s applies catalog revision %d after %v, want %d", in.name, in.st.Manager().Service().AppliedRevision(), d, rev)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// startBulk opens n bulk sessions that read and discard.
func (in *instance) startBulk(n int) {
	for range n {
		c, err := net.Dial("tcp", in.route)
		if err != nil {
			log.Fatalf("%s: %v", in.name, err)
		}
		in.mu.Lock()
		in.conns = append(in.conns, c)
		in.mu.Unlock()
		go io.Copy(io.Discard, c)
	}
}

func (in *instance) busy() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.conns) > 0 && !in.dead
}

// kill cuts the instance as a crash would: its sessions end and its
// connections to etcd are cut, so that its lease is not revoked but
// expires; then it is closed in the background (its leave fails, as a
// dead process's would not even try).
func (in *instance) kill() {
	in.mu.Lock()
	in.dead = true
	for _, c := range in.conns {
		c.Close()
	}
	in.conns = nil
	in.mu.Unlock()
	in.cut.Cut()
	in.st.Proxy().Close()
	in.closed = make(chan struct{})
	go func() {
		defer close(in.closed)
		in.st.Close()
	}()
}

func (in *instance) close() {
	in.mu.Lock()
	for _, c := range in.conns {
		c.Close()
	}
	in.conns = nil
	in.mu.Unlock()
	if in.closed != nil {
		<-in.closed
		return
	}
	in.st.Close()
	if in.cut != nil {
		in.cut.Cut()
	}
}

// etcdLink is an instance's network path to etcd: one loopback
// forwarder per etcd endpoint. Cut ends every connection through it
// and refuses new ones, as a dead host's would be.
type etcdLink struct {
	lns []net.Listener

	mu    sync.Mutex
	conns map[net.Conn]bool // guarded by mu; both ends of every forwarded connection
	cut   bool              // guarded by mu
}

func newEtcdLink(endpoints []string) (*etcdLink, error) {
	l := &etcdLink{conns: map[net.Conn]bool{}}
	for _, ep := range endpoints {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			l.Cut()
			return nil, err
		}
		l.lns = append(l.lns, ln)
		go l.serve(ln, ep)
	}
	return l, nil
}

// Addrs are the forwarders' addresses, one per endpoint.
func (l *etcdLink) Addrs() []string {
	var out []string
	for _, ln := range l.lns {
		out = append(out, ln.Addr().String())
	}
	return out
}

func (l *etcdLink) serve(ln net.Listener, target string) {
	harness.ServeEach(ln, func(c net.Conn) {
		u, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		if !l.track(c, u) {
			return
		}
		go func() { io.Copy(u, c); u.Close() }()
		io.Copy(c, u)
		c.Close()
	})
}

// track records c and u, or closes them when the link is cut.
func (l *etcdLink) track(c, u net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		c.Close()
		u.Close()
		return false
	}
	l.conns[c], l.conns[u] = true, true
	return true
}

// Cut closes the forwarders and every connection through them.
func (l *etcdLink) Cut() {
	for _, ln := range l.lns {
		ln.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// lowBytes is the Low-class bytes the instance's default link admitted
// down (server to client).
func (in *instance) lowBytes() int64 {
	l := in.st.Manager().Runtime().Link(wlm.DefaultLink)
	if l == nil {
		return 0
	}
	return l.Stats().Directions[link.Down].Classes[link.Low].Bytes
}

// rate is the rate the instance's Low class is set to under the budget,
// 0 without a budget or once killed.
func (in *instance) rate() int64 {
	in.mu.Lock()
	dead := in.dead
	in.mu.Unlock()
	if dead {
		return 0
	}
	st, _ := in.st.BudgetState()
	for _, r := range st.Rows {
		if r.Self {
			return r.Rate
		}
	}
	return 0
}

// allocator reports whether the instance is the elected allocator.
func (in *instance) allocator() bool {
	in.mu.Lock()
	dead := in.dead
	in.mu.Unlock()
	if dead {
		return false
	}
	st, ok := in.st.BudgetState()
	if !ok {
		return false
	}
	for _, r := range st.Rows {
		if r.Self {
			return r.Allocator
		}
	}
	return false
}

func allocatorOf(insts []*instance) int {
	for i, in := range insts {
		if in.allocator() {
			return i
		}
	}
	return -1
}

// recorder samples the instances' Low-class throughput.
type recorder struct {
	insts []*instance

	mu    sync.Mutex
	t0    time.Time
	rates []sample // guarded by mu
}

// sample is one interval between two readings: its length and the
// bytes each instance admitted in it.
type sample struct {
	dt    float64 // seconds
	bytes []float64
	// granted is the sum of the rates (bytes/s) the live instances' Low
	// classes were set to at the reading (SHOW BUDGET's rate; 0 for the
	// controls, which have no budget).
	granted float64
}

// windowRates returns each instance's rate (bytes/s) over samples, and
// their sum: bytes over the time the readings actually span.
func windowRates(samples []sample) (per []float64, sum float64) {
	var dt float64
	for _, s := range samples {
		dt += s.dt
		if per == nil {
			per = make([]float64, len(s.bytes))
		}
		for i, b := range s.bytes {
			per[i] += b
		}
	}
	for i := range per {
		per[i] /= dt
		sum += per[i]
	}
	return per, sum
}

func (r *recorder) run(ctx context.Context) {
	prev := make([]int64, len(r.insts))
	for i, in := range r.insts {
		prev[i] = in.lowBytes()
	}
	last := time.Now()
	r.mu.Lock()
	r.t0 = last
	r.mu.Unlock()
	tk := time.NewTicker(sampleEvery)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tk.C:
			dt := now.Sub(last).Seconds()
			last = now
			row := sample{dt: dt, bytes: make([]float64, len(r.insts))}
			for i, in := range r.insts {
				b := in.lowBytes()
				row.bytes[i] = float64(b - prev[i])
				prev[i] = b
				row.granted += float64(in.rate())
			}
			r.mu.Lock()
			r.rates = append(r.rates, row)
			r.mu.Unlock()
		}
	}
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.rates)
}

func (r *recorder) since(i int) []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rates[i:])
}

// phaseResult is one phase's figures, in bytes/s.
type phaseResult struct {
	name                   string
	mean, min, max, allMax float64 // sums over 1 s windows: steady mean/min/max, max over the whole phase
	shares                 []float64
	busy                   []bool
	grantMin, grantMax     float64 // the sum of the rates set, over the steady readings
	ok, sharesOK           bool
	control                bool // the host's own figure, no fleet
	note                   string
}

func (p phaseResult) sharesText(insts []*instance) string {
	var parts []string
	for i, in := range insts {
		parts = append(parts, fmt.Sprintf("%s %5.1f%%", in.name, 100*p.shares[i]))
	}
	return strings.Join(parts, " ")
}

// evaluate computes a phase's windows: every 1 s window (10 samples,
// sliding by one sample) for the max; those starting after settle
// samples for the mean, the min and the shares.
func evaluate(name string, samples []sample, busy []bool, budget int64, settle int) phaseResult {
	n := len(busy)
	r := phaseResult{name: name, shares: make([]float64, n), busy: busy, min: math.Inf(1)}
	var steady, total float64
	per := make([]float64, n)
	count := 0
	for s := 0; s+window <= len(samples); s++ {
		w, sum := windowRates(samples[s : s+window])
		if s >= settle {
			for i, v := range w {
				per[i] += v
			}
		}
		r.allMax = max(r.allMax, sum)
		if s >= settle {
			steady += sum
			count++
			r.min = min(r.min, sum)
			r.max = max(r.max, sum)
		}
	}
	if count == 0 {
		return r
	}
	r.grantMin = math.Inf(1)
	for _, smp := range samples[settle:] {
		r.grantMin, r.grantMax = min(r.grantMin, smp.granted), max(r.grantMax, smp.granted)
	}
	r.mean = steady / float64(count)
	for _, v := range per {
		total += v
	}
	nb := 0
	for _, b := range busy {
		if b {
			nb++
		}
	}
	r.sharesOK = true
	for i := range per {
		if total > 0 {
			r.shares[i] = per[i] / total
		}
		if busy[i] {
			r.sharesOK = r.sharesOK && math.Abs(r.shares[i]-1/float64(nb)) <= 0.1/float64(nb)
		} else {
			r.sharesOK = r.sharesOK && r.shares[i] < 0.01
		}
	}
	r.ok = math.Abs(r.mean-float64(budget)) <= 0.05*float64(budget) && r.allMax <= 1.05*float64(budget) && r.sharesOK
	return r
}

// recovery returns when, after the start of samples, a 1 s window's
// sum first comes within 5% of budget after having left it (the kill's
// dip); -1 if it never does. A phase that never dips recovers at 0.
func recovery(samples []sample, budget int64) time.Duration {
	dipped := false
	for s := 0; s+window <= len(samples); s++ {
		_, sum := windowRates(samples[s : s+window])
		in := math.Abs(sum-float64(budget)) <= 0.05*float64(budget)
		if !in {
			dipped = true
		}
		if in && dipped {
			return time.Duration(s+window) * sampleEvery
		}
	}
	if !dipped {
		return 0
	}
	return -1
}

// controlRun measures k instances without a fleet, all busy, each Low
// class held to budget/k by low_priority_bandwidth: the static split a
// fleet's budget replaces, and what the host gives the links when
// nothing but their leaky buckets limits them (k = 1 is phase a's
// shape, k = 3 phase a+b+c's).
func controlRun(ctx context.Context, upstream string, budget int64, k int, phase, settle time.Duration, sessions int, log *slog.Logger) (phaseResult, error) {
	var insts []*instance
	defer func() {
		for _, in := range insts {
			in.close()
		}
	}()
	for i := range k {
		name := "control" + strconv.Itoa(i)
		st, err := stack.New(ctx, stack.Options{Config: &config.Config{}, Logger: log.With("instance", name)})
		if err != nil {
			return phaseResult{}, err
		}
		in := &instance{name: name, st: st}
		insts = append(insts, in)
		for _, q := range []string{
			"CREATE RESOURCE POOL bulk_low WITH (network_priority=low)",
			"SET low_priority_bandwidth = '" + strconv.FormatInt(budget/int64(k), 10) + "'",
		} {
			if _, err := st.Manager().Service().Exec(ctx, q); err != nil {
				return phaseResult{}, fmt.Errorf("%s: %s: %w", name, q, err)
			}
		}
		addr, err := st.AddRoute(stack.Route{Route: config.Route{Name: "bulk", Listen: "127.0.0.1:0", Upstream: upstream, Protocol: "tcp"}, Pool: "bulk_low"})
		if err != nil {
			return phaseResult{}, err
		}
		in.route = addr.String()
	}
	rec := &recorder{insts: insts}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rec.run(sctx) }()
	for _, in := range insts {
		in.startBulk(sessions)
	}
	time.Sleep(phase)
	stop()
	<-done
	busy := make([]bool, k)
	for i := range busy {
		busy[i] = true
	}
	r := evaluate(fmt.Sprintf("static %d x 1/%d", k, k), rec.since(0), busy, budget, int(settle/sampleEvery))
	r.control = true
	return r, nil
}

// chart writes the three throughputs and their sum over time (1 s
// windows) as SVG.
func (r *recorder) chart(path string, budget int64) error {
	r.mu.Lock()
	rates := slices.Clone(r.rates)
	r.mu.Unlock()
	series := make([]svg.Series, len(r.insts)+1)
	for i, in := range r.insts {
		series[i].Name = in.name
	}
	series[len(r.insts)].Name = "sum"
	for s := 0; s+window <= len(rates); s++ {
		var x float64 // the window's end, seconds since the first reading
		for _, r := range rates[:s+window] {
			x += r.dt
		}
		per, sum := windowRates(rates[s : s+window])
		for i, v := range per {
			series[i].Points = append(series[i].Points, svg.Point{X: x, Y: v / 1e6})
		}
		series[len(r.insts)].Points = append(series[len(r.insts)].Points, svg.Point{X: x, Y: sum / 1e6})
	}
	c := svg.Chart{
		Title:  "Shared low-priority budget: Low-class throughput per instance (1 s windows)",
		XLabel: "time (s)", YLabel: "MB/s", Series: series, ZeroY: true,
		Guides: []svg.Guide{{Y: float64(budget) / 1e6, Label: "budget"}, {Y: 1.05 * float64(budget) / 1e6, Label: "+5%"}},
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := c.Render(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

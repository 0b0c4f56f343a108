package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/fastpath/fastpathtest"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// The chaos test runs many concurrent sessions of valid and of mangled
// traffic through a postgres and a mysql route to the real servers, with
// canary sessions alongside that must get every result byte for byte,
// then checks that the proxy is unharmed: its listeners serve a fresh
// session, the registry is empty, and goroutines, descriptors and memory
// are back where they started.
//
// It is a stress test and runs only without -short. SLUICE_CHAOS_DURATION
// (a Go duration, default 45s) sets how long new sessions start;
// SLUICE_CHAOS_SEED replays a run (the seed is printed first);
// SLUICE_CHAOS_WORKERS sets the concurrent sessions per route (default
// 20). Only the order of each worker's choices follows from the seed: the
// interleaving is the scheduler's.

// chaos session kinds, for the counters.
const (
	kindPG = iota
	kindPGRaw
	kindMySQL
	kindMySQLRaw
	kindCanaryPG
	kindCanaryMySQL
	numKinds
)

var kindNames = [numKinds]string{"pg", "pg-raw", "mysql", "mysql-raw", "canary-pg", "canary-mysql"}

// chaosEnd is how a session's client lets go of its socket.
type chaosEnd uint8

const (
	endFIN  chaosEnd = iota // Close
	endRST                  // SetLinger(0), then Close
	endHalf                 // CloseWrite, drain to EOF, then Close
)

// chaosStats counts what a chaos run did. Safe for concurrent use.
type chaosStats struct {
	sessions    [numKinds]atomic.Int64
	ends        [3]atomic.Int64 // by chaosEnd
	up, down    atomic.Int64    // bytes through sluice, as its sessions counted them
	canaries    atomic.Int64    // canary queries that matched
	guarded     atomic.Int64    // raw sessions stopped before a forbidden command reached a server
	drainStalls atomic.Int64    // half-closed sessions whose drain hit its deadline

	mu  sync.Mutex
	ops map[string]int64 // guarded by mu
}

func (s *chaosStats) op(name string) {
	s.mu.Lock()
	s.ops[name]++
	s.mu.Unlock()
}

func (s *chaosStats) kinds() string {
	var b strings.Builder
	for k := range numKinds {
		fmt.Fprintf(&b, " %s=%d", kindNames[k], s.sessions[k].Load())
	}
	return strings.TrimSpace(b.String())
}

func (s *chaosStats) opList() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range s.ops {
			if !yield(k) {
				return
			}
		}
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, s.ops[n])
	}
	return strings.Join(parts, " ")
}

// chaos is one run: its routes, reference results and counters.
type chaos struct {
	t     *testing.T
	seed  uint64
	srv   *Server
	reg   *session.Registry
	pgURL string          // direct
	myCfg *gomysql.Config // direct
	addrs map[string]string
	pgRef [32]byte // digest of the canary query's result, read directly
	myRef [32]byte
	stats chaosStats
	logs  *countingHandler
	errMu sync.Mutex
	errs  []string // guarded by errMu; first ones only
	nerrs int      // guarded by errMu
}

// fail records a defect seen by a session; the test fails at the end.
func (c *chaos) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.errMu.Lock()
	defer c.errMu.Unlock()
	c.nerrs++
	if len(c.errs) < 30 {
		c.errs = append(c.errs, msg)
	}
}

// say logs a line with t.Log and writes it to stderr, so that go test -v
// shows it while the test runs and a CI log keeps it.
func (c *chaos) say(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
}

// countingHandler counts the proxy's log records by level and keeps the
// first error records.
type countingHandler struct {
	warn, errs atomic.Int64
	mu         sync.Mutex
	first      []string // guarded by mu
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *countingHandler) WithGroup(string) slog.Handler                { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		h.warn.Add(1)
		return nil
	}
	h.errs.Add(1)
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	if len(h.first) < 5 {
		h.first = append(h.first, b.String())
	}
	h.mu.Unlock()
	return nil
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// procStatus returns a field of /proc/self/status in kB (VmRSS), or -1.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return -1
}

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count descriptors: %v", err)
	}
	return len(ents)
}

// settle polls f (with a GC before each call) until it returns at most
// limit or d passes, and returns the last value.
func settle(limit int, d time.Duration, f func() int) int {
	var n int
	testenv.Poll(d, func() bool {
		runtime.GC()
		n = f()
		return n <= limit
	})
	return n
}

func TestChaos(t *testing.T) {
	testenv.SkipShort(t, "stress test of concurrent valid and mangled sessions")
	pgURL := testenv.PostgresURL(t)
	myDSN := testenv.MySQLDSN(t)
	myCfg, err := gomysql.ParseDSN(myDSN)
	if err != nil {
		t.Fatal(err)
	}
	duration := envDuration(t, "SLUICE_CHAOS_DURATION", 45*time.Second)
	seed := envUint(t, "SLUICE_CHAOS_SEED", uint64(time.Now().UnixNano()))
	workers := int(envUint(t, "SLUICE_CHAOS_WORKERS", 20))

	logs := &countingHandler{}
	reg := session.NewRegistry(session.Options{})
	log := slog.New(logs)
	// The kernel fast path relays the pg route's sessions whenever
	// nothing sluice does applies to their bytes; the other routes stay
	// in user space (pg-raw's wrapped socket, mysql).
	kernel := fastpathtest.Open(t)
	srv := New(Options{Logger: log, Registry: reg, FastPath: kernel})
	c := &chaos{t: t, seed: seed, srv: srv, reg: reg, pgURL: pgURL, myCfg: myCfg, addrs: map[string]string{}, logs: logs}
	c.stats.ops = map[string]int64{}
	c.say("chaos: seed %d (replay with SLUICE_CHAOS_SEED=%d), %v, %d workers per route", seed, seed, duration, workers)

	pgUp := upstreamAddr(t, pgURL)
	for _, r := range []struct {
		name, protocol, upstream string
		guard                    bool
	}{
		{"pg", "postgres", pgUp, false},
		{"pg-raw", "postgres", pgUp, true},
		{"mysql", "mysql", myCfg.Addr, false},
		{"mysql-raw", "mysql", myCfg.Addr, true},
	} {
		route := testRoute(t, log, reg, r.name, r.protocol, r.upstream)
		if r.guard {
			pg := r.protocol == "postgres"
			route.WrapUpstream = func(up net.Conn) net.Conn { return &guardConn{Conn: up, pg: pg, trips: &c.stats.guarded} }
		}
		addr, err := srv.AddRoute(route)
		if err != nil {
			t.Fatal(err)
		}
		c.addrs[r.name] = addr.String()
	}
	t.Cleanup(func() { srv.Close() })
	unwatch := reg.Watch(session.WatcherFunc(func(e session.Event) {
		if e.Kind == session.SessionClosed {
			c.stats.up.Add(e.Session.BytesUp())
			c.stats.down.Add(e.Session.BytesDown())
		}
	}))
	defer unwatch()

	ctx := context.Background()
	c.pgRef = c.pgCanaryDigest(ctx, pgURL, false)
	c.myRef = c.myCanaryDigest(ctx, c.myCfg, false)
	// Warm up every route once, so lazily made state (the default link,
	// pools, the resolver) counts in the baseline.
	c.alive(ctx)
	waitNoSessions(t, srv)
	runtime.GC()
	g0, fd0, rss0 := runtime.NumGoroutine(), openFDs(t), procStatus("VmRSS")

	start := time.Now()
	stopAt := start.Add(duration)
	var wg sync.WaitGroup
	for w := range workers {
		for _, proto := range []string{"pg", "mysql"} {
			rng := rand.New(rand.NewPCG(seed, uint64(w)<<1|boolBit(proto == "mysql")))
			wg.Go(func() { c.worker(proto, w, rng, stopAt) })
		}
	}
	canaryStop := make(chan struct{})
	var cwg sync.WaitGroup
	for i := range 2 {
		cwg.Go(func() { c.canary(kindCanaryPG, i == 0, canaryStop) })
		cwg.Go(func() { c.canary(kindCanaryMySQL, i == 0, canaryStop) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Second)
progress:
	for {
		select {
		case <-done:
			break progress
		case <-tick.C:
			c.say("chaos: %v: sessions %s; bytes up %d down %d; ends fin %d rst %d half %d; canaries %d; live %d",
				time.Since(start).Round(time.Second), c.stats.kinds(), c.stats.up.Load(), c.stats.down.Load(),
				c.stats.ends[endFIN].Load(), c.stats.ends[endRST].Load(), c.stats.ends[endHalf].Load(),
				c.stats.canaries.Load(), len(reg.Sessions()))
		case <-time.After(time.Until(stopAt.Add(2 * time.Minute))):
			c.dumpGoroutines()
			t.Fatalf("chaos: workers still busy 2 minutes after the end (seed %d)", seed)
		}
	}
	tick.Stop()
	close(canaryStop)
	cwg.Wait()

	// The proxy must still serve every route.
	c.alive(ctx)
	testenv.Poll(20*time.Second, func() bool { return len(reg.Sessions()) == 0 })
	left := reg.Sessions()
	g1 := settle(g0+3, 20*time.Second, runtime.NumGoroutine)
	fd1 := settle(fd0+3, 20*time.Second, func() int { return openFDs(t) })
	rss1 := procStatus("VmRSS")

	c.say("chaos: seed=%d duration=%v sessions: %s total=%d; bytes up=%d down=%d; ends fin=%d rst=%d half=%d; canaries=%d; guarded=%d; drain-stalls=%d; proxy warn=%d error=%d; goroutines %d->%d; fds %d->%d; rss %dMB->%dMB; errors=%d",
		seed, time.Since(start).Round(time.Second), c.stats.kinds(), c.totalSessions(), c.stats.up.Load(), c.stats.down.Load(),
		c.stats.ends[endFIN].Load(), c.stats.ends[endRST].Load(), c.stats.ends[endHalf].Load(),
		c.stats.canaries.Load(), c.stats.guarded.Load(), c.stats.drainStalls.Load(), logs.warn.Load(), logs.errs.Load(),
		g0, g1, fd0, fd1, rss0>>10, rss1>>10, c.nerrs)
	c.say("chaos: ops %s", c.stats.opList())

	c.errMu.Lock()
	for _, e := range c.errs {
		t.Errorf("seed %d: %s", seed, e)
	}
	if c.nerrs > len(c.errs) {
		t.Errorf("seed %d: and %d more errors", seed, c.nerrs-len(c.errs))
	}
	c.errMu.Unlock()
	for _, e := range logs.first {
		t.Errorf("seed %d: proxy logged an error: %s", seed, e)
	}
	if len(left) > 0 {
		t.Errorf("seed %d: %d sessions still in the registry, first %d on %s user %q", seed, len(left), left[0].ID, left[0].Info.Route, left[0].User())
	}
	if c.stats.canaries.Load() == 0 {
		t.Errorf("seed %d: no canary query completed", seed)
	}
	if g1 > g0+3 {
		c.dumpGoroutines()
		t.Errorf("seed %d: %d goroutines after the run, %d before", seed, g1, g0)
	}
	if fd1 > fd0+3 {
		t.Errorf("seed %d: %d open descriptors after the run, %d before", seed, fd1, fd0)
	}
	if rss0 > 0 && rss1-rss0 > 200<<10 {
		t.Errorf("seed %d: RSS grew from %d MB to %d MB", seed, rss0>>10, rss1>>10)
	}
	paired, resumed, paused := srv.FastPathEvents()
	c.say("chaos: fast path: %d sessions paired, %d resumes, %d pauses, %d bytes relayed in the kernel", paired, resumed, paused, srv.FastPathBytes())
	if resumed == 0 || srv.FastPathBytes() == 0 {
		t.Errorf("seed %d: the kernel relayed no session", seed)
	}
	if socks, links, flows, err := kernel.Entries(); err != nil || socks+links+flows != 0 {
		t.Errorf("seed %d: the kernel's maps hold %d sockets, %d links, %d flows after the run (%v)", seed, socks, links, flows, err)
	}
	if c.stats.drainStalls.Load() > 0 {
		t.Errorf("seed %d: %d half-closed sessions were never closed by the proxy", seed, c.stats.drainStalls.Load())
	}
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (c *chaos) totalSessions() int64 {
	var n int64
	for k := range numKinds {
		n += c.stats.sessions[k].Load()
	}
	return n
}

func (c *chaos) dumpGoroutines() {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	c.t.Logf("goroutines:\n%s", b.String())
}

// worker runs sessions on one protocol's routes until stopAt: about
// three in five of valid traffic, the rest of raw bytes.
func (c *chaos) worker(proto string, w int, rng *rand.Rand, stopAt time.Time) {
	for n := 0; time.Now().Before(stopAt); n++ {
		raw := rng.IntN(5) >= 3
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var err error
		var kind int
		switch {
		case proto == "pg" && !raw:
			kind, err = kindPG, c.pgSession(ctx, rng, w, n)
		case proto == "pg":
			kind, err = kindPGRaw, c.pgRawSession(ctx, rng)
		case !raw:
			kind, err = kindMySQL, c.mySession(ctx, rng, w, n)
		default:
			kind, err = kindMySQLRaw, c.myRawSession(ctx, rng)
		}
		cancel()
		c.stats.sessions[kind].Add(1)
		if err != nil {
			c.fail("worker %d session %d (%s): %v", w, n, kindNames[kind], err)
		}
	}
}

// alive opens a fresh session on every route and checks that it works.
func (c *chaos) alive(ctx context.Context) {
	c.t.Helper()
	for _, name := range []string{"pg", "pg-raw"} {
		if got := c.pgCanaryDigest(ctx, viaProxy(c.t, c.pgURL, c.addrs[name]), true); got != c.pgRef {
			c.t.Fatalf("route %s: canary result differs from the direct one", name)
		}
	}
	for _, name := range []string{"mysql", "mysql-raw"} {
		if got := c.myCanaryDigest(ctx, c.myVia(name), true); got != c.myRef {
			c.t.Fatalf("route %s: canary result differs from the direct one", name)
		}
	}
}

// canary runs the canary query on route until stop, checking each
// result against the direct one. reconnect opens a session per query;
// otherwise one session serves them all.
func (c *chaos) canary(kind int, reconnect bool, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		open, ref := c.pgCanaryOpen, c.pgRef
		if kind == kindCanaryMySQL {
			open, ref = c.myCanaryOpen, c.myRef
		}
		err := c.canarySession(open, ref, reconnect, stop)
		c.stats.sessions[kind].Add(1)
		if err != nil {
			c.fail("%s session %d: %v", kindNames[kind], i, err)
		}
	}
}

// canaryTimeout bounds each step of a canary session.
const canaryTimeout = 30 * time.Second

// canaryConn is an open canary session: query runs its i-th canary
// query and returns the digest of the result.
type canaryConn struct {
	query func(ctx context.Context, i int) ([32]byte, error)
	close func()
}

// canarySession opens a canary session and checks its queries against
// ref: one query if reconnect, else queries until stop.
func (c *chaos) canarySession(open func(context.Context) (canaryConn, error), ref [32]byte, reconnect bool, stop <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), canaryTimeout)
	conn, err := open(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.close()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), canaryTimeout)
		d, err := conn.query(ctx, i)
		cancel()
		if err != nil {
			return fmt.Errorf("query %d: %w", i, err)
		}
		if d != ref {
			return fmt.Errorf("query %d: result differs from the direct one", i)
		}
		c.stats.canaries.Add(1)
		if reconnect {
			return nil
		}
		select {
		case <-stop:
			return nil
		default:
		}
	}
}

// digest hashes a result, row by row and value by value, with lengths,
// so that two results match only if every byte of every value does.
type digest struct{ buf []byte }

func (d *digest) row(vals ...[]byte) {
	for _, v := range vals {
		d.buf = strconv.AppendInt(d.buf, int64(len(v)), 10)
		d.buf = append(d.buf, ':')
		d.buf = append(d.buf, v...)
	}
	d.buf = append(d.buf, '\n')
}

func (d *digest) sum() [32]byte { return sha256.Sum256(d.buf) }

// endConn lets go of a client socket the way end says and counts it. d
// reads the socket in the background, or is nil: a half-close then
// drains it here, until the proxy closes it.
func (c *chaos) endConn(conn net.Conn, end chaosEnd, d *drainer) {
	c.stats.ends[end].Add(1)
	tc, _ := conn.(*net.TCPConn)
	switch {
	case end == endRST && tc != nil:
		tc.SetLinger(0)
	case end == endHalf && tc != nil:
		if d == nil {
			d = startDrain(conn)
		}
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		tc.CloseWrite()
		if !<-d.done {
			c.stats.drainStalls.Add(1)
		}
		d = nil
	}
	conn.Close()
	if d != nil {
		<-d.done
	}
}

// pickEnd draws an end: FIN half the time, RST and half-close a quarter
// each.
func pickEnd(rng *rand.Rand) chaosEnd {
	switch rng.IntN(4) {
	case 0:
		return endRST
	case 1:
		return endHalf
	}
	return endFIN
}

package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/fastpath/fastpathtest"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/whatif"
)

// statementRecord is what the registry keeps of one ended statement that
// both paths must agree on.
type statementRecord struct {
	sql      string
	up, down int64
	outcome  session.Outcome
	rows     int64
}

// pgWorkload runs a fixed mix on url: simple and extended queries, a
// transaction, an error, and results larger than the kernel's journal
// holds, so that both of its paths carry bytes.
func pgWorkload(ctx context.Context, url string, rounds int) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for i := range rounds {
		var n int
		if err := c.QueryRow(ctx, "select $1::int + 1", i).Scan(&n); err != nil || n != i+1 {
			return fmt.Errorf("extended query: %d, %v", n, err)
		}
		if _, err := c.Exec(ctx, "select 1; select 2", pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("simple query: %w", err)
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		var s string
		if err := tx.QueryRow(ctx, "select string_agg(md5(g::text), '') from generate_series(1, $1::int) g", 10+i*40).Scan(&s); err != nil {
			return fmt.Errorf("in a transaction: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, "select 1/0"); err == nil {
			return fmt.Errorf("division by zero succeeded")
		}
	}
	return nil
}

// mysqlWorkload is pgWorkload for MySQL: text and prepared statements,
// a transaction, an error and results larger than the journal holds.
func mysqlWorkload(ctx context.Context, dsn string, rounds int) error {
	a, err := openMySQLAsker(ctx, dsn)
	if err != nil {
		return err
	}
	defer a.close()
	c := a.c
	for i := range rounds {
		var n int
		if err := c.QueryRowContext(ctx, "select ? + 1", i).Scan(&n); err != nil || n != i+1 {
			return fmt.Errorf("prepared query: %d, %v", n, err)
		}
		if _, err := c.ExecContext(ctx, "do 1"); err != nil {
			return fmt.Errorf("text query: %w", err)
		}
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var s string
		if err := tx.QueryRowContext(ctx, fmt.Sprintf("select repeat(md5('x'), %d)", 10+i*40)).Scan(&s); err != nil {
			return fmt.Errorf("in a transaction: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, "select * from no_such_table_here"); err == nil {
			return fmt.Errorf("a query of a missing table succeeded")
		}
	}
	return nil
}

// workloadResult is what one run of a workload left in sluice.
type workloadResult struct {
	statements []statementRecord // the registry's ended statements, in order
	up, down   int64             // the session's bytes
	app        whatif.App        // the session's round trips and transactions
	srv        *Server
}

// runWorkload runs a protocol's workload through a new server (with the
// kernel fast path when k is not nil).
func runWorkload(t *testing.T, protocol string, k *fastpath.Kernel, rounds int) workloadResult {
	t.Helper()
	reg := session.NewRegistry(session.Options{KeepStatements: 100000})
	fo := frontOpts{whatIf: whatif.New(whatif.Options{Window: time.Hour}), admit: openAdmitter{}}
	o := Options{Registry: reg}
	if k != nil {
		o.FastPath = k
	}
	srv := newTestServer(t, o)
	res := workloadResult{srv: srv}
	unwatch := reg.Watch(session.WatcherFunc(func(e session.Event) {
		if e.Kind == session.SessionClosed {
			res.up, res.down = e.Session.BytesUp(), e.Session.BytesDown()
		}
	}))
	defer unwatch()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	switch protocol {
	case "postgres":
		pgURL := testenv.PostgresURL(t)
		addr := addTestRoute(t, srv, testRouteWith(t, testLogger(t), reg, "r", protocol, upstreamAddr(t, pgURL), fo))
		err = pgWorkload(ctx, viaProxy(t, pgURL, addr), rounds)
	case "mysql":
		cfg := testenv.MySQLConfig(t)
		cfg.Addr = addTestRoute(t, srv, testRouteWith(t, testLogger(t), reg, "r", protocol, cfg.Addr, fo))
		err = mysqlWorkload(ctx, cfg.FormatDSN(), rounds)
	}
	if err != nil {
		t.Fatal(err)
	}
	waitNoSessions(t, srv)
	for _, st := range reg.Recent() {
		snap := st.Snapshot()
		res.statements = append(res.statements, statementRecord{sql: snap.SQL, up: st.BytesUp(), down: st.BytesDown(), outcome: snap.Outcome, rows: snap.Rows})
	}
	apps := fo.whatIf.Snapshot(time.Now())
	if len(apps) != 1 {
		t.Fatalf("what-if: %d applications, want the workload's one: %+v", len(apps), apps)
	}
	res.app = apps[0]
	return res
}

// openAdmitter admits every statement at once and limits none, as the
// admission of a pool with no limit does: the sessions' client observers
// run inside the admission rewriter, as in sluice.
type openAdmitter struct{}

func (openAdmitter) Admit(context.Context, *session.Statement) (func(), error) {
	return func() {}, nil
}

func (openAdmitter) TryAdmit(*session.Statement) (func(), bool) { return func() {}, true }

func (openAdmitter) Limits(*session.Session) bool { return false }

// TestKernelPathSameData runs one workload through sluice without and
// with the kernel fast path, on each protocol: the registry records the
// same statements, with the same bytes, the session the same totals, and
// what-if the same transactions and round trips.
func TestKernelPathSameData(t *testing.T) {
	k := fastpathtest.Open(t)
	for _, protocol := range []string{"postgres", "mysql"} {
		t.Run(protocol, func(t *testing.T) {
			const rounds = 30
			want := runWorkload(t, protocol, nil, rounds)
			got := runWorkload(t, protocol, k, rounds)
			srv := got.srv
			t.Logf("%d statements, session bytes up %d down %d, %d in the kernel", len(got.statements), got.up, got.down, srv.FastPathBytes())
			t.Logf("what-if: %d transactions, %.3f round trips each, latency %v (user space: %d, %.3f, %v)",
				got.app.Transactions, got.app.RoundTrips, got.app.Latency, want.app.Transactions, want.app.RoundTrips, want.app.Latency)
			paired, resumed, _ := srv.FastPathEvents()
			if paired != 1 || resumed == 0 {
				t.Fatalf("fast path: %d sessions paired, %d resumes; want the session relayed in the kernel", paired, resumed)
			}
			// Both paths carried bytes: the small exchanges in the
			// kernel, the large results (more than the journal holds a
			// chunk of) through user space.
			if kb := srv.FastPathBytes(); kb == 0 || kb >= uint64(got.up+got.down) {
				t.Errorf("the kernel relayed %d of the session's %d bytes; want some, not all", kb, got.up+got.down)
			}
			if len(got.statements) != len(want.statements) {
				t.Fatalf("%d statements with the kernel path, %d without", len(got.statements), len(want.statements))
			}
			for i := range want.statements {
				if got.statements[i] != want.statements[i] {
					t.Errorf("statement %d: %+v with the kernel path, %+v without", i, got.statements[i], want.statements[i])
				}
			}
			if got.up != want.up || got.down != want.down {
				t.Errorf("session bytes: up %d down %d with the kernel path, %d %d without", got.up, got.down, want.up, want.down)
			}
			if got.app.Transactions != want.app.Transactions || want.app.Transactions == 0 {
				t.Errorf("what-if transactions: %d with the kernel path, %d without", got.app.Transactions, want.app.Transactions)
			}
			if d := math.Abs(got.app.RoundTrips - want.app.RoundTrips); d > 0.01*want.app.RoundTrips {
				t.Errorf("what-if round trips per transaction: %.3f with the kernel path, %.3f without", got.app.RoundTrips, want.app.RoundTrips)
			}
			// Each transaction waits for its server; times taken when the
			// journal was read would give some none.
			if got.app.ServerTime <= 0 || got.app.Latency < got.app.ServerTime {
				t.Errorf("what-if times with the kernel path: server %v, latency %v", got.app.ServerTime, got.app.Latency)
			}
			socks, links, flows, err := k.Entries()
			if err != nil || socks+links+flows != 0 {
				t.Errorf("map entries after the session: %d sockets, %d links, %d flows (%v)", socks, links, flows, err)
			}
		})
	}
}

// kernelSession is one pgx session through a new server with the kernel
// fast path, relayed in the kernel once query has run: query runs n
// small queries on it and fails t on a wrong answer.
type kernelSession struct {
	k     *fastpath.Kernel
	srv   *Server
	reg   *session.Registry
	c     *pgx.Conn
	sess  *session.Session
	ctx   context.Context
	query func(n int)
}

func newKernelSession(t *testing.T) *kernelSession {
	t.Helper()
	ks := &kernelSession{k: fastpathtest.Open(t), reg: session.NewRegistry(session.Options{})}
	pgURL := testenv.PostgresURL(t)
	ks.srv = newTestServer(t, Options{Registry: ks.reg, FastPath: ks.k})
	addr := addTestRoute(t, ks.srv, testRoute(t, testLogger(t), ks.reg, "r", "postgres", upstreamAddr(t, pgURL)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ks.ctx = ctx
	c, err := pgx.Connect(ctx, viaProxy(t, pgURL, addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	ks.c = c
	ks.query = func(n int) {
		t.Helper()
		for i := range n {
			var got int
			if err := c.QueryRow(ctx, "select $1::int", i).Scan(&got); err != nil || got != i {
				t.Fatalf("query %d: %d, %v", i, got, err)
			}
		}
	}
	ks.query(20)
	if _, resumed, _ := ks.srv.FastPathEvents(); resumed == 0 {
		t.Fatal("the session was not relayed in the kernel")
	}
	sessions := ks.reg.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("%d sessions", len(sessions))
	}
	ks.sess = sessions[0]
	return ks
}

// TestKernelPathLeavesForPumps terminates a session relayed in the
// kernel: it pauses, goes to its pumps, and the client reads the
// terminate's error; the maps hold nothing after.
func TestKernelPathLeavesForPumps(t *testing.T) {
	ks := newKernelSession(t)
	_, _, before := ks.srv.FastPathEvents()
	if !ks.sess.Terminate() {
		t.Fatal("Terminate: the session was not running")
	}
	// The loop acts on the terminate at its next pass; until then the
	// kernel may still relay a request.
	testenv.Eventually(t, 10*time.Second, "the pair to pause", func() bool {
		_, _, paused := ks.srv.FastPathEvents()
		return paused > before
	})
	var n int
	if err := ks.c.QueryRow(ks.ctx, "select 1").Scan(&n); err == nil {
		t.Fatal("a query after the terminate succeeded")
	}
	waitNoSessions(t, ks.srv)
	socks, links, flows, err := ks.k.Entries()
	if err != nil || socks+links+flows != 0 {
		t.Errorf("map entries after the session: %d sockets, %d links, %d flows (%v)", socks, links, flows, err)
	}
}

// TestKernelPathLeavesForDistributed links a shard session to a session
// the kernel relays: the coordinator goes back to user space at once and
// is not resumed again, so its statements are seen before its server
// sees them.
func TestKernelPathLeavesForDistributed(t *testing.T) {
	ks := newKernelSession(t)
	_, _, paused := ks.srv.FastPathEvents()
	shard := ks.reg.Open(session.Info{Route: "shard", Protocol: "postgres"}, time.Now())
	defer shard.Close(time.Now())
	if !shard.Link(ks.sess) {
		t.Fatal("Link refused")
	}
	testenv.Eventually(t, 10*time.Second, "the coordinator to leave the kernel", func() bool {
		_, _, p := ks.srv.FastPathEvents()
		return p > paused
	})
	_, resumed, _ := ks.srv.FastPathEvents()
	ks.query(10)
	if _, r, _ := ks.srv.FastPathEvents(); r != resumed {
		t.Errorf("the coordinator was resumed %d times after its shard was linked", r-resumed)
	}
}

// TestSyncRegistryHoldsWhatClientsReceived runs the same small query
// again and again on a session relayed in the kernel: after each answer,
// once SyncRegistry has returned, the session's bytes and statements in
// the registry are those of every answer the client has read, no fewer.
func TestSyncRegistryHoldsWhatClientsReceived(t *testing.T) {
	ks := newKernelSession(t)
	_, resumed, _ := ks.srv.FastPathEvents()
	const n = 300
	per := testenv.SteadyCounts(t, 2, n, func() []int64 {
		var x int
		if err := ks.c.QueryRow(ks.ctx, "select 42::int").Scan(&x); err != nil || x != 42 {
			t.Fatalf("select 42: %d, %v", x, err)
		}
		if err := ks.srv.SyncRegistry(ks.ctx); err != nil {
			t.Fatal(err)
		}
		return []int64{ks.sess.Statements(), ks.sess.BytesDown()}
	})
	if _, r, _ := ks.srv.FastPathEvents(); r != resumed {
		t.Errorf("the session left the kernel %d times", r-resumed)
	}
	if kb := ks.srv.FastPathBytes(); kb < uint64(n*per[1]) {
		t.Errorf("the kernel relayed %d bytes, want the %d of the queries at least", kb, n*per[1])
	}
}

// TestKernelPathLeavesForEmulation gives sessions relayed in the kernel a
// delay while their clients keep sending, again and again: each session
// goes back to user space with its link held while the kernel may be
// sending its last answer, and every answer is the answer to its query.
// The program's link read against user space's Hold once redirected a
// query back out of the socket it came in on, to its own client (pgconn
// then says only "conn closed").
func TestKernelPathLeavesForEmulation(t *testing.T) {
	testenv.SkipShort(t, "takes 25s here")
	k := fastpathtest.Open(t)
	for _, protocol := range []string{"postgres", "mysql"} {
		t.Run(protocol, func(t *testing.T) {
			reg := session.NewRegistry(session.Options{})
			pol := new(switchPolicy)
			srv := newTestServer(t, Options{Registry: reg, FastPath: k, Policy: pol})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var open func() (asker, error)
			switch protocol {
			case "postgres":
				pgURL := testenv.PostgresURL(t)
				url := viaProxy(t, pgURL, addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", protocol, upstreamAddr(t, pgURL))))
				open = func() (asker, error) {
					c, err := pgconn.Connect(ctx, url)
					return pgAsker{c}, err
				}
			case "mysql":
				cfg := testenv.MySQLConfig(t)
				cfg.Addr = addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", protocol, cfg.Addr))
				open = func() (asker, error) { return openMySQLAsker(ctx, cfg.FormatDSN()) }
			}
			const rounds, sessions = 300, 4
			for round := range rounds {
				pol.set(netem.Params{})
				var cs []asker
				for range sessions {
					c, err := open()
					if err != nil {
						t.Fatal(err)
					}
					cs = append(cs, c)
				}
				q := 0
				for i, c := range cs {
					for range 3 {
						q++
						if err := c.ask(ctx, q); err != nil {
							t.Fatalf("round %d, session %d, before the delay: %v", round, i, err)
						}
					}
				}
				pol.set(netem.Params{Delay: time.Millisecond})
				for i, c := range cs {
					for range 2 {
						q++
						if err := c.ask(ctx, q); err != nil {
							t.Fatalf("round %d, session %d, after the delay: %v", round, i, err)
						}
					}
					c.close()
				}
			}
			paired, resumed, paused := srv.FastPathEvents()
			t.Logf("%d sessions paired, %d resumes, %d pauses", paired, resumed, paused)
			if paired < rounds*sessions/2 {
				t.Errorf("%d of %d sessions paired in the kernel", paired, rounds*sessions)
			}
			waitNoSessions(t, srv)
			socks, links, flows, err := k.Entries()
			if err != nil || socks+links+flows != 0 {
				t.Errorf("map entries after the sessions: %d sockets, %d links, %d flows (%v)", socks, links, flows, err)
			}
		})
	}
}

// asker is one client session that asks for a number and checks the
// answer.
type asker interface {
	ask(ctx context.Context, n int) error
	close()
}

type pgAsker struct{ c *pgconn.PgConn }

func (a pgAsker) ask(ctx context.Context, n int) error {
	res, err := a.c.Exec(ctx, fmt.Sprintf("SELECT %d", n)).ReadAll()
	if err != nil {
		return err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != fmt.Sprint(n) {
		return fmt.Errorf("answer %+v to SELECT %d", res, n)
	}
	return nil
}

func (a pgAsker) close() { a.c.Close(context.Background()) }

// mysqlAsker is one MySQL session: c, held from db, a pool of one.
type mysqlAsker struct {
	db *sql.DB
	c  *sql.Conn
}

// openMySQLAsker opens one session on dsn; close ends it and its pool.
func openMySQLAsker(ctx context.Context, dsn string) (mysqlAsker, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return mysqlAsker{}, err
	}
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return mysqlAsker{}, err
	}
	return mysqlAsker{db, c}, nil
}

// ask sends its statement as text (no arguments): one round trip.
func (a mysqlAsker) ask(ctx context.Context, n int) error {
	var got int
	if err := a.c.QueryRowContext(ctx, fmt.Sprintf("SELECT %d", n)).Scan(&got); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("answer %d to SELECT %d", got, n)
	}
	return nil
}

func (a mysqlAsker) close() {
	a.c.Close()
	a.db.Close()
}

// TestSyncRegistryAsTheLoopEnds asks SyncRegistry again and again while
// the kernel's loop relays its last session, goes idle and stops with the
// server. The runner drains the journal for a sync before it gives the
// loop up: once it has said no runner exists, the journal is the next
// runner's, or Close's (under -race, a drain after that is a race with
// the journal's Close).
func TestSyncRegistryAsTheLoopEnds(t *testing.T) {
	k := fastpathtest.Open(t)
	pgURL := testenv.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 50 {
		reg := session.NewRegistry(session.Options{})
		srv := newTestServer(t, Options{Registry: reg, FastPath: k})
		addr := addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", "postgres", upstreamAddr(t, pgURL)))
		syncs := syncAgainAndAgain(ctx, t, srv)
		c, err := pgconn.Connect(ctx, viaProxy(t, pgURL, addr))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := (pgAsker{c}).ask(ctx, i); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if _, resumed, _ := srv.FastPathEvents(); resumed == 0 {
			t.Fatalf("round %d: the session was not relayed in the kernel", round)
		}
		c.Close(ctx)
		waitNoSessions(t, srv)
		srv.Close()
		if n := syncs(); n == 0 {
			t.Errorf("round %d: no sync ran", round)
		}
	}
}

// syncAgainAndAgain calls srv.SyncRegistry in a loop on a goroutine of
// its own until the returned func (or t's end) stops it; the func
// returns how many calls returned.
func syncAgainAndAgain(ctx context.Context, t *testing.T, srv *Server) func() int {
	stop, done := make(chan struct{}), make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			if err := srv.SyncRegistry(ctx); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	var once sync.Once
	var n int
	end := func() int {
		once.Do(func() { close(stop); n = <-done })
		return n
	}
	t.Cleanup(func() { end() })
	return end
}

// TestKernelPathTerminateIsAtOnce terminates sessions relayed in the
// kernel and sends a query the moment Terminate returns: it is never
// answered. Terminate returns once the runner has taken the session off
// the kernel; a request the kernel relayed meanwhile would reach the
// server after the administrator was told the session had ended.
func TestKernelPathTerminateIsAtOnce(t *testing.T) {
	k := fastpathtest.Open(t)
	pgURL := testenv.PostgresURL(t)
	reg := session.NewRegistry(session.Options{})
	srv := newTestServer(t, Options{Registry: reg, FastPath: k})
	url := viaProxy(t, pgURL, addTestRoute(t, srv, testRoute(t, testLogger(t), reg, "r", "postgres", upstreamAddr(t, pgURL))))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const rounds = 100
	for round := range rounds {
		c, err := pgconn.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		a := pgAsker{c}
		for i := range 3 {
			if err := a.ask(ctx, i); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		var sess *session.Session
		for _, s := range reg.Sessions() {
			if sess == nil || s.ID > sess.ID {
				sess = s
			}
		}
		if !sess.Terminate() {
			t.Fatalf("round %d: Terminate refused", round)
		}
		if err := a.ask(ctx, 7); err == nil {
			t.Fatalf("round %d: a query after Terminate returned was answered", round)
		}
		a.close()
	}
	if _, resumed, _ := srv.FastPathEvents(); resumed < rounds {
		t.Errorf("%d resumes in the kernel for %d sessions", resumed, rounds)
	}
}

package stack_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// admitStack starts a stack with two routes to upstream (protocol
// postgres or mysql): "lim", whose sessions go to pool admw_lim with
// active_statements=limit, and "free", whose sessions go to pool
// admw_free without a limit. It returns the routes' addresses.
func admitStack(t *testing.T, protocol, upstream string, limit int, extra string) (st *stack.Stack, lim, free string) {
	t.Helper()
	lim, free = testenv.DeadAddr(t), testenv.DeadAddr(t)
	body := "catalog: \"\"\nroutes:\n" +
		"  - name: lim\n    listen: " + lim + "\n    upstream: " + upstream + "\n    protocol: " + protocol + "\n" + extra +
		"  - name: free\n    listen: " + free + "\n    upstream: " + upstream + "\n    protocol: " + protocol + "\n" + extra
	st, _ = configStack(t, body)
	execManager(t, st,
		fmt.Sprintf("CREATE RESOURCE POOL admw_lim WITH (active_statements=%d)", limit),
		"CREATE RESOURCE POOL admw_free",
		"ALTER ROUTE lim WITH (pool='admw_lim')",
		"ALTER ROUTE free WITH (pool='admw_free')",
	)
	return st, lim, free
}

// pgVia returns the test PostgreSQL's configuration pointed at addr,
// with application_name app.
func pgVia(t *testing.T, addr, app string) *pgx.ConnConfig {
	t.Helper()
	cfg := testenv.PostgresConfigVia(t, testenv.PostgresURL(t), addr)
	cfg.RuntimeParams["application_name"] = app
	return cfg
}

// pgViaNoCancel is pgVia for a client that only disappears: it dials its
// session's connection and no other, so the CancelRequest pgx sends from
// a new connection when a query fails never leaves it.
func pgViaNoCancel(t *testing.T, addr, app string) *pgx.ConnConfig {
	t.Helper()
	cfg := pgVia(t, addr, app)
	var dials atomic.Int32
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) > 1 {
			return nil, errors.New("no cancel connection")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return cfg
}

// pgBackends returns a function that counts, through direct, the
// PostgreSQL backends whose application_name is app; a failed count
// fails t.
func pgBackends(t *testing.T, direct *pgx.Conn, app string) func() int {
	return func() int {
		var n int
		if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// TestAdmitPGBound: 40 sessions of a pool with active_statements=4 run
// SELECT pg_sleep(0.5) in a loop; pg_stat_activity, sampled every 50 ms,
// never shows more than 4 of them active, and about 8 statements end per
// second. A session of a pool without a limit meanwhile sees no wait.
func TestAdmitPGBound(t *testing.T) {
	testenv.SkipShort(t, "takes 13s here")
	_, lim, free := admitStack(t, "postgres", testenv.PostgresAddr(t), boundLimit, "")
	app := fmt.Sprintf("admw_bound_%d", time.Now().UnixNano())
	var check boundCheck
	for range boundSessions {
		c := testenv.ConnectPGConfig(t, pgVia(t, lim, app))
		check.limited = append(check.limited, func(ctx context.Context) error {
			_, err := c.Exec(ctx, "SELECT pg_sleep(0.5)")
			return err
		})
	}
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	other := testenv.ConnectPGConfig(t, pgVia(t, free, app+"_free"))
	check.other = func(ctx context.Context) error { _, err := other.Exec(ctx, "SELECT 1"); return err }
	check.active = func() (n int, err error) {
		err = direct.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'", app).Scan(&n)
		return n, err
	}
	checkAdmitBound(t, check)
}

// TestAdmitPGNoDeadlock: with active_statements=1, a session that holds
// a row lock inside a transaction keeps its slot until it commits, and
// is never held itself meanwhile; another session that wants the row is
// held (not at the server), and both finish.
func TestAdmitPGNoDeadlock(t *testing.T) {
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	table := pgTable(t, direct, "admw_dl", "id int PRIMARY KEY, v int")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := direct.Exec(ctx, "INSERT INTO "+table+" VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}

	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, "")
	a := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_dl_a"))
	b := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_dl_b"))
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkNoDeadlock(t, st, deadlockCheck{
		table:  table,
		txExec: func(q string) error { _, err := tx.Exec(ctx, q); return err },
		commit: func() error { return tx.Commit(ctx) },
		bExec:  func(q string) error { _, err := b.Exec(ctx, q); return err },
		value: func() (v int, err error) {
			err = direct.QueryRow(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v)
			return v, err
		},
	})
}

// pgTable creates the table prefix_<ns> with columns through direct and
// drops it when the test ends; it returns the table's name.
func pgTable(t *testing.T, direct *pgx.Conn, prefix, columns string) string {
	t.Helper()
	table := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := direct.Exec(context.Background(), "CREATE TABLE "+table+" ("+columns+")"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	return table
}

// heldCount is the number of statements waiting for admission.
func heldCount(st *stack.Stack) int {
	n := 0
	for _, s := range st.Registry().Active() {
		if s.Waiting() {
			n++
		}
	}
	return n
}

// TestAdmitPGCancelHeld: a statement held for admission is cancelled by
// the client's CancelRequest (pgconn's) and by the console's cancel
// (Registry.Cancel): sluice answers 57014 itself, within milliseconds
// (logged; the bound checked is a generous one), and the session then
// runs another statement. Also through a route with a delay, whose
// answer passes the delay line.
func TestAdmitPGCancelHeld(t *testing.T) {
	for _, tc := range []struct{ name, extra string }{
		{"plain", ""},
		// The answer passes the down direction's delay line.
		{"delayed", "    emulation:\n      delay: 5ms\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { testAdmitPGCancelHeld(t, tc.extra) })
	}
}

func testAdmitPGCancelHeld(t *testing.T, extra string) {
	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, extra)
	holder := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_cancel_holder"))
	held := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_cancel_held"))
	bg := context.Background()
	// Prepare both statements first, so the held one is an Execute batch.
	if _, err := held.Exec(bg, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	tx := beginSlot(t, holder)

	for _, how := range []string{"CancelRequest", "console"} {
		ctx, cancel := context.WithCancel(bg)
		err := cancelHeld(t, st, how, func() error { _, err := held.Exec(ctx, "SELECT 1"); return err }, func() {
			if how == "CancelRequest" {
				if err := held.PgConn().CancelRequest(bg); err != nil {
					t.Fatal(err)
				}
			} else {
				cancelWaiting(t, st)
			}
		})
		cancel()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("%s: held statement = %v, want SQLSTATE 57014", how, err)
		}
		if how == "console" && pe.Message != "canceling statement due to user request" {
			t.Errorf("%s: message %q", how, pe.Message)
		}
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := held.QueryRow(bg, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("after the cancels: %d, %v", n, err)
	}
}

// holdSlot opens a transaction on a new session of route addr, taking
// the pool's only slot until the test ends (or commit is called).
func holdSlot(t *testing.T, addr string) (commit func()) {
	t.Helper()
	tx := beginSlot(t, testenv.ConnectPGConfig(t, pgVia(t, addr, "admw_holder")))
	return func() {
		if err := tx.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// beginSlot opens a transaction on c and runs a statement in it, so
// that c's session holds a slot of its pool until the transaction ends;
// the test's end rolls it back if it is still open.
func beginSlot(t *testing.T, c *pgx.Conn) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestAdmitPGExtendedHeld: a pipelined pgx batch, a COPY FROM STDIN and
// a simple multi-statement query, each held while another session holds
// the only slot, run whole and correctly once it frees it; their session
// goes on.
func TestAdmitPGExtendedHeld(t *testing.T) {
	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, "")
	bg := context.Background()
	table := pgTable(t, testenv.ConnectPG(t, testenv.PostgresURL(t)), "admw_ext", "id int, s text")
	c := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_ext"))

	cases := []struct {
		name string
		run  func() error
	}{
		{"pipelined batch", func() error {
			b := &pgx.Batch{}
			for i := range 20 {
				b.Queue("INSERT INTO "+table+" VALUES ($1, $2)", i, strings.Repeat("x", i*100))
			}
			b.Queue("SELECT count(*), sum(length(s)) FROM " + table)
			br := c.SendBatch(bg, b)
			for range 20 {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			var n, sum int
			if err := br.QueryRow().Scan(&n, &sum); err != nil {
				return err
			}
			if n != 20 || sum != 19000 {
				return fmt.Errorf("count %d, sum %d", n, sum)
			}
			return br.Close()
		}},
		{"copy from stdin", func() error {
			var in strings.Builder
			for i := range 1000 {
				fmt.Fprintf(&in, "%d\trow %d\n", 100+i, i)
			}
			tag, err := c.PgConn().CopyFrom(bg, strings.NewReader(in.String()), "COPY "+table+" FROM STDIN")
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1000 {
				return fmt.Errorf("copied %d rows", tag.RowsAffected())
			}
			return nil
		}},
		{"simple multi-statement", func() error {
			rr := c.PgConn().Exec(bg, "SELECT 1; SELECT count(*) FROM "+table+"; SELECT 3")
			res, err := rr.ReadAll()
			if err != nil {
				return err
			}
			if len(res) != 3 || string(res[1].Rows[0][0]) != "1020" {
				return fmt.Errorf("results %v", res)
			}
			return nil
		}},
	}
	for _, tc := range cases {
		commit := holdSlot(t, lim)
		done := make(chan error, 1)
		go func() { done <- tc.run() }()
		testenv.Eventually(t, 10*time.Second, tc.name+" held", func() bool { return heldCount(st) == 1 })
		select {
		case err := <-done:
			t.Fatalf("%s finished while held: %v", tc.name, err)
		case <-time.After(100 * time.Millisecond):
		}
		commit()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	var n int
	if err := c.QueryRow(bg, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 1020 {
		t.Fatalf("count %d, %v", n, err)
	}
}

// TestAdmitPGWaitLimits: a statement held longer than its pool's
// queue_timeout, or than an abort rule's blocktime, is answered 57014
// with that limit's message, and the session goes on.
func TestAdmitPGWaitLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		ddl  []string
		msg  string
	}{
		{"queue_timeout", []string{"ALTER RESOURCE POOL admw_lim WITH (queue_timeout=0.2)"}, "queue timeout"},
		{"blocktime", []string{"CREATE EXCEPT RULE admw_block WITH (blocktime=0.2, action='abort')",
			"ALTER RESOURCE POOL admw_lim WITH (except_rule='admw_block')"}, `exception rule "admw_block"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, "")
			execManager(t, st, tc.ddl...)
			commit := holdSlot(t, lim)
			c := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_limits"))
			t0 := time.Now()
			_, err := c.Exec(context.Background(), "SELECT 1")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "57014" || !strings.Contains(pe.Message, tc.msg) {
				t.Fatalf("held past the limit: %v, want 57014 naming %s", err, tc.msg)
			}
			t.Logf("refused after %v: %s", time.Since(t0).Round(time.Millisecond), pe.Message)
			commit()
			if _, err := c.Exec(context.Background(), "SELECT 1"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAdmitPGDisconnectWhileHeld: a client that goes away while its
// statement is held frees no slot it did not hold (the holder's
// transaction still blocks others), its statement never reaches the
// server, and its wait and session end at once.
func TestAdmitPGDisconnectWhileHeld(t *testing.T) {
	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, "")
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	table := pgTable(t, direct, "admw_gone", "id int")
	commit := holdSlot(t, lim)
	gone := testenv.ConnectPGConfig(t, pgViaNoCancel(t, lim, "admw_gone"))
	done := make(chan error, 1)
	go func() { _, err := gone.Exec(context.Background(), "INSERT INTO "+table+" VALUES (1)"); done <- err }()
	testenv.Eventually(t, 10*time.Second, "a held statement", func() bool { return heldCount(st) == 1 })
	// The client's socket closes under it: no Terminate, only the FIN.
	gone.PgConn().Conn().Close()
	<-done
	stats := func() (running, waiting int) {
		s := st.Manager().Admission().AdmissionStats()["admw_lim"]
		return s.Running, s.Waiting
	}
	other := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_other"))
	oDone := make(chan error, 1)
	go func() { _, err := other.Exec(context.Background(), "SELECT 2"); oDone <- err }()
	testenv.Eventually(t, 10*time.Second, "the gone client's session ended", func() bool { return routeSessions(st, "lim") == 2 })
	testenv.Eventually(t, 10*time.Second, "another statement held", func() bool { _, w := stats(); return w == 1 })
	if r, _ := stats(); r != 1 {
		t.Fatalf("%d slots running while the holder's transaction is open, want 1", r)
	}
	commit()
	if err := <-oDone; err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "every slot back", func() bool {
		r, w := stats()
		return r == 0 && w == 0 && len(st.Registry().Sessions()) == 2
	})
	var n int
	if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows, %v: the gone client's statement ran", n, err)
	}
}

// TestAdmitPGChurn: sessions of a pool with active_statements=2 run
// queries, transactions and batches, cancel some while they wait and
// drop their connection under others, for 5 s (half a second with
// -short); then every slot is back, nothing waits, and a new session runs
// at once.
func TestAdmitPGChurn(t *testing.T) {
	const workers = 12
	run := 5 * time.Second
	if testing.Short() {
		run = 500 * time.Millisecond
	}
	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 2, "")
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	ops := churn(ctx, workers, func(_, op int) bool {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := pgx.ConnectConfig(cctx, pgVia(t, lim, "admw_churn"))
		ccancel()
		if err != nil {
			t.Error(err)
			return false
		}
		bg := context.Background()
		switch op {
		case 0: // a query
			_, err = c.Exec(bg, "SELECT pg_sleep(0.01)")
		case 1: // a transaction
			var tx pgx.Tx
			if tx, err = c.Begin(bg); err == nil {
				if _, err = tx.Exec(bg, "SELECT pg_sleep(0.01)"); err == nil {
					err = tx.Commit(bg)
				}
			}
		case 2: // a pipelined batch
			b := &pgx.Batch{}
			b.Queue("SELECT 1")
			b.Queue("SELECT pg_sleep(0.01)")
			err = c.SendBatch(bg, b).Close()
		case 3: // cancelled, waiting or running
			qctx, qcancel := context.WithTimeout(bg, 5*time.Millisecond)
			c.Exec(qctx, "SELECT pg_sleep(0.05)") // either outcome will do
			qcancel()
		case 4: // the connection dropped under a statement
			go func() { time.Sleep(3 * time.Millisecond); c.PgConn().Conn().Close() }()
			c.Exec(bg, "SELECT pg_sleep(0.05)") // fails: the socket closed
		}
		if err != nil {
			t.Errorf("op %d: %v", op, err)
		}
		c.Close(bg)
		return true
	})
	t.Logf("ops (query, transaction, batch, cancel, drop): %d %d %d %d %d", ops[0], ops[1], ops[2], ops[3], ops[4])
	testenv.Eventually(t, 30*time.Second, "every slot back and every session closed", func() bool {
		s := st.Manager().Admission().AdmissionStats()["admw_lim"]
		return s.Running == 0 && s.Waiting == 0 && len(st.Registry().Sessions()) == 0
	})
	c := testenv.ConnectPGConfig(t, pgVia(t, lim, "admw_churn_after"))
	for range 3 {
		if _, err := c.Exec(context.Background(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
}

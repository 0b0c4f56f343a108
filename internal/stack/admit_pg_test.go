package stack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	st, path := configStack(t, body)
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf("CREATE RESOURCE POOL admw_lim WITH (active_statements=%d)", limit),
		"CREATE RESOURCE POOL admw_free",
		"ALTER ROUTE lim WITH (pool='admw_lim')",
		"ALTER ROUTE free WITH (pool='admw_free')",
	} {
		if _, err := st.Manager().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_ = path
	return st, lim, free
}

// pgVia returns the test PostgreSQL's configuration pointed at addr,
// with application_name app.
func pgVia(t *testing.T, addr, app string) *pgx.ConnConfig {
	t.Helper()
	cfg := testenv.PostgresConfig(t)
	host, port, _ := strings.Cut(addr, ":")
	cfg.Host = host
	fmt.Sscan(port, &cfg.Port)
	cfg.RuntimeParams["application_name"] = app
	return cfg
}

func connectCfg(t *testing.T, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestAdmitPGBound: 40 sessions of a pool with active_statements=4 run
// SELECT pg_sleep(0.5) in a loop; pg_stat_activity, sampled every 50 ms,
// never shows more than 4 of them active, and about 8 statements end per
// second. A session of a pool without a limit meanwhile sees no wait.
func TestAdmitPGBound(t *testing.T) {
	const (
		sessions = 40
		limit    = 4
		sleep    = 500 * time.Millisecond
	)
	run := 10 * time.Second
	if testing.Short() {
		run = 3 * time.Second
	}
	_, lim, free := admitStack(t, "postgres", testenv.PostgresConfig(t).Host+":"+fmt.Sprint(testenv.PostgresConfig(t).Port), limit, "")
	app := fmt.Sprintf("admw_bound_%d", time.Now().UnixNano())
	conns := make([]*pgx.Conn, sessions)
	for i := range conns {
		conns[i] = connectCfg(t, pgVia(t, lim, app))
	}
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))

	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, sessions+1)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := c.Exec(context.Background(), "SELECT pg_sleep(0.5)"); err != nil {
					errs <- err
					return
				}
				if ctx.Err() == nil {
					done.Add(1)
				}
			}
		}()
	}
	// The other pool's session: its statements never wait for a slot.
	other := connectCfg(t, pgVia(t, free, app+"_free"))
	var otherMax, otherSum time.Duration
	var otherN int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			t0 := time.Now()
			if _, err := other.Exec(context.Background(), "SELECT 1"); err != nil {
				errs <- err
				return
			}
			d := time.Since(t0)
			otherSum += d
			otherN++
			otherMax = max(otherMax, d)
			time.Sleep(20 * time.Millisecond)
		}
	}()

	maxActive, samples := 0, 0
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for ctx.Err() == nil {
		<-tick.C
		var n int
		err := direct.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'", app).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		samples++
		maxActive = max(maxActive, n)
		if n > limit {
			t.Errorf("sample %d: %d statements active, limit %d", samples, n, limit)
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rate := float64(done.Load()) / elapsed.Seconds()
	want := float64(limit) / sleep.Seconds()
	t.Logf("%d sessions, active_statements=%d: %d statements in %v = %.2f/s (ideal %.1f/s, %+.1f%%); max active %d over %d samples",
		sessions, limit, done.Load(), elapsed.Round(time.Millisecond), rate, want, 100*(rate-want)/want, maxActive, samples)
	if otherN > 0 {
		t.Logf("other pool: %d statements, mean %v, max %v", otherN, (otherSum / time.Duration(otherN)).Round(time.Microsecond), otherMax.Round(time.Microsecond))
	}
	if maxActive == 0 {
		t.Fatal("no sample saw a statement running")
	}
	// Sanity, not timing: the slots were used, and never more than the limit.
	if rate < want/2 || rate > want*1.5 {
		t.Errorf("throughput %.2f/s, far from %.1f/s", rate, want)
	}
	if otherMax > 2*sleep {
		t.Errorf("the other pool's statement waited %v, as long as a slot", otherMax)
	}
}

// TestAdmitPGNoDeadlock: with active_statements=1, a session that holds
// a row lock inside a transaction keeps its slot until it commits, and
// is never held itself meanwhile; another session that wants the row is
// held (not at the server), and both finish.
func TestAdmitPGNoDeadlock(t *testing.T) {
	pc := testenv.PostgresConfig(t)
	table := fmt.Sprintf("admw_dl_%d", time.Now().UnixNano())
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := direct.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, v int); INSERT INTO "+table+" VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })

	st, lim, _ := admitStack(t, "postgres", fmt.Sprintf("%s:%d", pc.Host, pc.Port), 1, "")
	a := connectCfg(t, pgVia(t, lim, "admw_dl_a"))
	b := connectCfg(t, pgVia(t, lim, "admw_dl_b"))
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT * FROM "+table+" WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() {
		_, err := b.Exec(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
		bDone <- err
	}()
	// b is held by sluice, not blocked at the server; a, inside its
	// transaction, goes on.
	testenv.Eventually(t, 10*time.Second, "b held", func() bool { return heldCount(st) == 1 })
	for i := range 3 {
		if _, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s SET v = v + 10 WHERE id = 1 -- %d", table, i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-bDone:
		t.Fatalf("b finished before a committed: %v", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	var v int
	if err := direct.QueryRow(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil || v != 31 {
		t.Fatalf("v = %d, %v; want 31", v, err)
	}
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
// the client's CancelRequest (pgx's context cancel) and by the console's
// cancel (Registry.Cancel): sluice answers 57014 itself, quickly, and the
// session then runs another statement.
func TestAdmitPGCancelHeld(t *testing.T) {
	pc := testenv.PostgresConfig(t)
	st, lim, _ := admitStack(t, "postgres", fmt.Sprintf("%s:%d", pc.Host, pc.Port), 1, "")
	holder := connectCfg(t, pgVia(t, lim, "admw_cancel_holder"))
	held := connectCfg(t, pgVia(t, lim, "admw_cancel_held"))
	bg := context.Background()
	// Prepare both statements first, so the held one is an Execute batch.
	if _, err := held.Exec(bg, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := tx.Exec(bg, "SELECT 2"); err != nil {
		t.Fatal(err)
	}

	waitHeld := func() {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, "a held statement", func() bool {
			for _, s := range st.Registry().Active() {
				if s.Waiting() {
					return true
				}
			}
			return false
		})
	}
	for _, how := range []string{"CancelRequest", "console"} {
		ctx, cancel := context.WithCancel(bg)
		res := make(chan error, 1)
		var t0 time.Time
		var mu sync.Mutex
		go func() {
			_, err := held.Exec(ctx, "SELECT 1")
			mu.Lock()
			d := time.Since(t0)
			mu.Unlock()
			t.Logf("%s: answered %v after the cancel", how, d.Round(time.Microsecond))
			if d > 50*time.Millisecond {
				t.Logf("%s: slower than 50 ms", how)
			}
			res <- err
		}()
		waitHeld()
		mu.Lock()
		t0 = time.Now()
		mu.Unlock()
		if how == "CancelRequest" {
			if err := held.PgConn().CancelRequest(bg); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, s := range st.Registry().Active() {
				if s.Waiting() {
					if err := st.Registry().Cancel(bg, s); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		err := <-res
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

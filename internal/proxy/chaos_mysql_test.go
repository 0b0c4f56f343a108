package proxy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/testenv"
)

// myCanaryQuery is the canary's query on MariaDB (its sequence engine).
const myCanaryQuery = "SELECT seq, MD5(seq) FROM seq_1_to_2000"

// myVia returns the test server's driver config aimed at a route.
func (c *chaos) myVia(route string) *gomysql.Config {
	cfg := c.myCfg.Clone()
	cfg.Addr = c.addrs[route]
	cfg.Timeout = 10 * time.Second
	cfg.Logger = &gomysql.NopLogger{} // sessions this test breaks on purpose
	return cfg
}

// myCanaryDigest runs the canary query once on a session of cfg (as a
// prepared statement if prepared) and returns the digest of its result,
// failing the test on an error.
func (c *chaos) myCanaryDigest(ctx context.Context, cfg *gomysql.Config, prepared bool) [32]byte {
	c.t.Helper()
	db, conn, _, err := myOpen(ctx, cfg)
	if err != nil {
		c.t.Fatalf("canary connect: %v", err)
	}
	defer db.Close()
	defer conn.Close()
	d, err := myCanaryRun(ctx, conn, prepared)
	if err != nil {
		c.t.Fatalf("canary query: %v", err)
	}
	return d
}

func myCanaryRun(ctx context.Context, conn *sql.Conn, prepared bool) ([32]byte, error) {
	var rows *sql.Rows
	var err error
	if prepared {
		rows, err = conn.QueryContext(ctx, "SELECT seq, MD5(seq) FROM seq_1_to_2000 WHERE seq > ?", 0)
	} else {
		rows, err = conn.QueryContext(ctx, myCanaryQuery)
	}
	if err != nil {
		return [32]byte{}, err
	}
	defer rows.Close()
	var d digest
	for rows.Next() {
		var a, b sql.RawBytes
		if err := rows.Scan(&a, &b); err != nil {
			return [32]byte{}, err
		}
		d.row(a, b)
	}
	if err := rows.Err(); err != nil {
		return [32]byte{}, err
	}
	return d.sum(), nil
}

// myOpen opens one driver connection of cfg and returns it with its
// socket.
func myOpen(ctx context.Context, cfg *gomysql.Config) (*sql.DB, *sql.Conn, func() net.Conn, error) {
	cfg = cfg.Clone()
	var mu sync.Mutex
	var sock net.Conn
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		mu.Lock()
		sock = c
		mu.Unlock()
		return c, err
	}
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	db := sql.OpenDB(connector)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, nil, fmt.Errorf("connect: %w", err)
	}
	return db, conn, func() net.Conn { mu.Lock(); defer mu.Unlock(); return sock }, nil
}

// myCanaryOpen opens a canary session on the mysql route; its queries
// alternate between text and prepared statements.
func (c *chaos) myCanaryOpen(ctx context.Context) (canaryConn, error) {
	db, conn, _, err := myOpen(ctx, c.myVia("mysql"))
	if err != nil {
		return canaryConn{}, err
	}
	return canaryConn{
		query: func(ctx context.Context, i int) ([32]byte, error) { return myCanaryRun(ctx, conn, i%2 == 1) },
		close: func() { conn.Close(); db.Close() },
	}, nil
}

var myOps = []sessionOp[*sql.Conn]{
	{"mysql-query", myQueryOp},
	{"mysql-prepared", myPreparedOp},
	{"mysql-multi", myMultiOp},
	{"mysql-temp-table", myTempTableOp},
	{"mysql-kill-query", myKillOp},
	{"mysql-registry-cancel", myRegistryCancelOp},
	{"mysql-context-cancel", myContextCancelOp},
	{"mysql-error", myErrorOp},
}

// mySession runs a valid session of 1 to 8 random steps, with statements
// prepared by the server or interpolated by the driver, and ends it by
// COM_QUIT, FIN, RST or half-close.
func (c *chaos) mySession(ctx context.Context, rng *rand.Rand, w, n int) error {
	cfg := c.myVia("mysql")
	cfg.MultiStatements = true
	cfg.InterpolateParams = rng.IntN(2) == 0
	db, conn, sock, err := myOpen(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	failed, closed, err := runSteps(ctx, c, rng, w, n, myOps, conn, func() bool { return false })
	if err != nil {
		conn.Close()
		return fmt.Errorf("%s (interpolate %v): %w", failed, cfg.InterpolateParams, err)
	}
	if closed {
		conn.Close()
		return nil
	}
	if rng.IntN(2) == 0 {
		c.stats.ends[endFIN].Add(1)
		return conn.Close()
	}
	// The driver finds the socket closed when the pool closes it.
	c.endConn(sock(), pickEnd(rng), nil)
	conn.Close()
	return nil
}

func myQueryOp(ctx context.Context, _ *chaos, conn *sql.Conn, rng *rand.Rand, _ string) (bool, error) {
	n := 1 + rng.IntN(3000)
	rows, err := conn.QueryContext(ctx, fmt.Sprintf("SELECT seq, MD5(seq) FROM seq_1_to_%d", n))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	return false, checkMD5Rows(rows, n)
}

// myPreparedOp prepares on the server (COM_STMT_PREPARE) and executes
// several times with binary parameters.
func myPreparedOp(ctx context.Context, _ *chaos, conn *sql.Conn, rng *rand.Rand, tag string) (bool, error) {
	st, err := conn.PrepareContext(ctx, "SELECT ? * ?, CONCAT(?, '!')")
	if err != nil {
		return false, err
	}
	defer st.Close()
	for range 1 + rng.IntN(10) {
		a, b := rng.IntN(1000), rng.IntN(1000)
		var v int
		var s string
		if err := st.QueryRowContext(ctx, a, b, tag).Scan(&v, &s); err != nil {
			return false, err
		}
		if v != a*b || s != tag+"!" {
			return false, fmt.Errorf("%d*%d = %d, %q", a, b, v, s)
		}
	}
	return false, nil
}

// myMultiOp sends several statements in one COM_QUERY and reads every
// result set.
func myMultiOp(ctx context.Context, _ *chaos, conn *sql.Conn, rng *rand.Rand, _ string) (bool, error) {
	k := 2 + rng.IntN(5)
	parts := make([]string, k)
	for i := range parts {
		parts[i] = fmt.Sprintf("SELECT %d, REPEAT('m', %d)", i, i*10)
	}
	rows, err := conn.QueryContext(ctx, strings.Join(parts, "; "))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for i := range k {
		if i > 0 && !rows.NextResultSet() {
			return false, fmt.Errorf("result set %d missing: %v", i, rows.Err())
		}
		if !rows.Next() {
			return false, fmt.Errorf("result set %d empty: %v", i, rows.Err())
		}
		var v int
		var s string
		if err := rows.Scan(&v, &s); err != nil {
			return false, err
		}
		if v != i || s != strings.Repeat("m", i*10) {
			return false, fmt.Errorf("result set %d: %d %q", i, v, s)
		}
	}
	return false, rows.Err()
}

func myTempTableOp(ctx context.Context, _ *chaos, conn *sql.Conn, rng *rand.Rand, _ string) (bool, error) {
	if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE IF NOT EXISTS chaos_t (i INT, v VARCHAR(64))"); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM chaos_t"); err != nil {
		return false, err
	}
	k := 1 + rng.IntN(200)
	vals := make([]string, k)
	sum := 0
	for i := range vals {
		vals[i] = fmt.Sprintf("(%d, '%s')", i, md5hex(strconv.Itoa(i)))
		sum += i
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO chaos_t VALUES "+strings.Join(vals, ", ")); err != nil {
		return false, err
	}
	var n, s int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(i), 0) FROM chaos_t").Scan(&n, &s); err != nil {
		return false, err
	}
	if n != k || s != sum {
		return false, fmt.Errorf("count %d sum %d, want %d %d", n, s, k, sum)
	}
	return false, nil
}

// sleepResult waits for a SELECT SLEEP that was interrupted: MariaDB
// ends it with 1 (or ER_QUERY_INTERRUPTED); 0 means it ran to the end,
// which only a cancel that came too late explains.
func sleepResult(done <-chan sleepOutcome, mayMiss bool) error {
	r := <-done
	var me *gomysql.MySQLError
	switch {
	case r.err == nil && (r.v == 1 || mayMiss):
		return nil
	case r.err == nil:
		return fmt.Errorf("SLEEP returned %d, want 1 (interrupted)", r.v)
	case errors.As(r.err, &me) && me.Number == 1317:
		return nil
	}
	return fmt.Errorf("interrupted SLEEP: %w", r.err)
}

type sleepOutcome struct {
	v   int
	err error
}

func startSleep(ctx context.Context, conn *sql.Conn, sql string) <-chan sleepOutcome {
	done := make(chan sleepOutcome, 1)
	go func() {
		var r sleepOutcome
		r.err = conn.QueryRowContext(ctx, sql).Scan(&r.v)
		done <- r
	}()
	return done
}

// myKillOp interrupts a running SLEEP with KILL QUERY from a second
// session through the route, as a MySQL client does, then checks that
// the first session goes on.
func myKillOp(ctx context.Context, c *chaos, conn *sql.Conn, _ *rand.Rand, _ string) (bool, error) {
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return false, err
	}
	db, killer, _, err := myOpen(ctx, c.myVia("mysql"))
	if err != nil {
		return false, fmt.Errorf("killer: %w", err)
	}
	defer db.Close()
	defer killer.Close()
	// The sleep outlasts any delay of a loaded host between its start and
	// the KILL, so that the KILL finds it running.
	start := time.Now()
	done := startSleep(ctx, conn, "SELECT SLEEP(10)")
	var kerr error
	if !testenv.Poll(20*time.Second, func() bool {
		var n int
		kerr = killer.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'SELECT SLEEP%'", id).Scan(&n)
		return kerr != nil || n > 0
	}) {
		return false, errors.New("SLEEP never showed in the process list")
	}
	if kerr != nil {
		return false, fmt.Errorf("killer: %w", kerr)
	}
	if _, err := killer.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(id, 10)); err != nil {
		return false, fmt.Errorf("KILL QUERY: %w", err)
	}
	if err := sleepResult(done, time.Since(start) > 9*time.Second); err != nil {
		return false, err
	}
	return false, myAfter(ctx, conn)
}

// myAfter checks that a session still answers.
func myAfter(ctx context.Context, conn *sql.Conn) error {
	var v int
	if err := conn.QueryRowContext(ctx, "SELECT 41 + 1").Scan(&v); err != nil || v != 42 {
		return fmt.Errorf("query after the interrupt: %d, %w", v, err)
	}
	return nil
}

// myRegistryCancelOp cancels a running SLEEP through Registry.Cancel,
// which runs KILL QUERY on a side connection of sluice's own.
func myRegistryCancelOp(ctx context.Context, c *chaos, conn *sql.Conn, _ *rand.Rand, tag string) (bool, error) {
	done := startSleep(ctx, conn, "SELECT SLEEP(1) /* "+tag+" */")
	relay := make(chan error, 1)
	cerr := cancelInRegistry(ctx, c.reg, tag, relay)
	if err := sleepResult(done, true); err != nil {
		return false, fmt.Errorf("%w (cancel: %v)", err, cerr)
	}
	if cerr != nil {
		return false, cerr
	}
	return false, myAfter(ctx, conn)
}

// myContextCancelOp ends a SLEEP's context early: the driver drops the
// connection, which ends the session.
func myContextCancelOp(ctx context.Context, _ *chaos, conn *sql.Conn, rng *rand.Rand, _ string) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, time.Duration(20+rng.IntN(300))*time.Millisecond)
	defer cancel()
	var v int
	if err := conn.QueryRowContext(qctx, "SELECT SLEEP(2)").Scan(&v); err == nil {
		return false, fmt.Errorf("SLEEP(2) finished within its shorter context with %d", v)
	}
	return true, nil
}

func myErrorOp(ctx context.Context, _ *chaos, conn *sql.Conn, _ *rand.Rand, _ string) (bool, error) {
	_, err := conn.ExecContext(ctx, "SELECT * FROM chaos_no_such_table")
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1146 {
		return false, fmt.Errorf("error %v, want 1146", err)
	}
	return false, myAfter(ctx, conn)
}

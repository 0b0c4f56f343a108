package proxy

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/sluicelab/sluice/internal/session"
)

// pgCanaryQuery is the canary's query: a result of known bytes.
const pgCanaryQuery = "SELECT i, md5(i::text) FROM generate_series(1, 2000) i"

// pgCanaryDigest runs the canary query once on url (simple protocol if
// simple, else extended) and returns the digest of its result. It fails
// the test on an error: it serves the reference and the liveness check.
func (c *chaos) pgCanaryDigest(ctx context.Context, url string, simple bool) [32]byte {
	c.t.Helper()
	conn, err := pgconn.Connect(ctx, url)
	if err != nil {
		c.t.Fatalf("canary connect: %v", err)
	}
	defer conn.Close(ctx)
	d, err := pgCanaryRun(ctx, conn, simple)
	if err != nil {
		c.t.Fatalf("canary query: %v", err)
	}
	return d
}

func pgCanaryRun(ctx context.Context, conn *pgconn.PgConn, simple bool) ([32]byte, error) {
	var d digest
	var rows [][][]byte
	if simple {
		rs, err := conn.Exec(ctx, pgCanaryQuery).ReadAll()
		if err != nil {
			return [32]byte{}, err
		}
		if len(rs) != 1 {
			return [32]byte{}, fmt.Errorf("%d results, want 1", len(rs))
		}
		rows = rs[0].Rows
	} else {
		r := conn.ExecParams(ctx, pgCanaryQuery, nil, nil, nil, nil).Read()
		if r.Err != nil {
			return [32]byte{}, r.Err
		}
		rows = r.Rows
	}
	for _, row := range rows {
		d.row(row...)
	}
	return d.sum(), nil
}

// pgCanaryOpen opens a canary session on the pg route; its queries
// alternate between the simple and the extended protocol.
func (c *chaos) pgCanaryOpen(ctx context.Context) (canaryConn, error) {
	conn, err := pgconn.Connect(ctx, viaProxy(c.t, c.pgURL, c.addrs["pg"]))
	if err != nil {
		return canaryConn{}, err
	}
	return canaryConn{
		query: func(ctx context.Context, i int) ([32]byte, error) { return pgCanaryRun(ctx, conn, i%2 == 0) },
		close: func() { conn.Close(context.Background()) },
	}, nil
}

// sessionOp is one step of a valid session on a connection of type C
// (*pgx.Conn for postgres, *sql.Conn for mysql). It returns an error for
// a wrong answer; closed reports that the step ended the connection, as
// a context cancel without a cancel request does.
type sessionOp[C any] struct {
	name string
	run  func(ctx context.Context, c *chaos, conn C, rng *rand.Rand, tag string) (closed bool, err error)
}

// runSteps runs 1 to 8 steps picked at random from ops on conn, the n-th
// session of worker w, until one fails or ends the connection (its
// closed result, or ended reporting true). It returns the failed step's
// name and error, or whether the connection ended.
func runSteps[C any](ctx context.Context, c *chaos, rng *rand.Rand, w, n int, ops []sessionOp[C], conn C, ended func() bool) (failed string, closed bool, err error) {
	steps := 1 + rng.IntN(8)
	for i := range steps {
		op := ops[rng.IntN(len(ops))]
		c.stats.op(op.name)
		closed, err := op.run(ctx, c, conn, rng, fmt.Sprintf("chaos_%d_%d_%d", w, n, i))
		if err != nil {
			return op.name, false, err
		}
		if closed || ended() {
			return "", true, nil
		}
	}
	return "", false, nil
}

var pgOps = []sessionOp[*pgx.Conn]{
	{"pg-query", pgQueryOp},
	{"pg-multi", pgMultiOp},
	{"pg-batch", pgBatchOp},
	{"pg-pipeline", pgPipelineOp},
	{"pg-copy", pgCopyOp},
	{"pg-prepared", pgPreparedOp},
	{"pg-cancel", pgCancelOp},
	{"pg-registry-cancel", pgRegistryCancelOp},
	{"pg-error", pgErrorOp},
}

// pgSession runs a valid session of 1 to 8 random steps with a random
// query mode and ends it by Terminate, FIN, RST or half-close.
func (c *chaos) pgSession(ctx context.Context, rng *rand.Rand, w, n int) error {
	cfg, err := pgx.ParseConfig(viaProxy(c.t, c.pgURL, c.addrs["pg"]))
	if err != nil {
		return err
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	cfg.DefaultQueryExecMode = modes[rng.IntN(len(modes))]
	if rng.IntN(2) == 0 {
		// Context cancels send a CancelRequest, as psql's Ctrl-C does,
		// instead of dropping the connection.
		cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	failed, closed, err := runSteps(ctx, c, rng, w, n, pgOps, conn, conn.IsClosed)
	if err != nil {
		conn.Close(context.Background())
		return fmt.Errorf("%s (mode %v): %w", failed, cfg.DefaultQueryExecMode, err)
	}
	if closed {
		conn.Close(context.Background())
		return nil
	}
	if rng.IntN(2) == 0 {
		c.stats.ends[endFIN].Add(1)
		return conn.Close(ctx)
	}
	c.endConn(conn.PgConn().Conn(), pickEnd(rng), nil)
	conn.Close(context.Background())
	return nil
}

func md5hex(s string) string { return fmt.Sprintf("%x", md5.Sum([]byte(s))) }

func pgQueryOp(ctx context.Context, _ *chaos, conn *pgx.Conn, rng *rand.Rand, _ string) (bool, error) {
	n := 1 + rng.IntN(3000)
	rows, err := conn.Query(ctx, "SELECT i, md5(i::text) FROM generate_series(1, $1::int) i", n)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	return false, checkMD5Rows(rows, n)
}

// rowScanner is what pgx.Rows and sql.Rows share.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// checkMD5Rows checks a result of n rows (i, md5 of i) for i from 1.
func checkMD5Rows(rows rowScanner, n int) error {
	want := 1
	for rows.Next() {
		var i int
		var h string
		if err := rows.Scan(&i, &h); err != nil {
			return err
		}
		if i != want || h != md5hex(strconv.Itoa(i)) {
			return fmt.Errorf("row %d: got %d %s", want, i, h)
		}
		want++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if want != n+1 {
		return fmt.Errorf("%d rows, want %d", want-1, n)
	}
	return nil
}

// pgMultiOp sends several statements in one simple Query, the last
// failing half the time: the results before the error arrive, and the
// session goes on.
func pgMultiOp(ctx context.Context, _ *chaos, conn *pgx.Conn, rng *rand.Rand, _ string) (bool, error) {
	fail := rng.IntN(2) == 0
	sql := "SELECT 1; SELECT 'two'; SELECT 3"
	if fail {
		sql += "; SELECT 1/0; SELECT 5"
	}
	rs, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	var pe *pgconn.PgError
	if fail && (!errors.As(err, &pe) || pe.Code != "22012") {
		return false, fmt.Errorf("error %v, want 22012", err)
	}
	if !fail && err != nil {
		return false, err
	}
	if len(rs) < 3 || string(rs[0].Rows[0][0]) != "1" || string(rs[1].Rows[0][0]) != "two" || string(rs[2].Rows[0][0]) != "3" {
		return false, fmt.Errorf("results %v", rs)
	}
	return false, nil
}

func pgBatchOp(ctx context.Context, _ *chaos, conn *pgx.Conn, rng *rand.Rand, _ string) (bool, error) {
	k := 2 + rng.IntN(12)
	b := &pgx.Batch{}
	for i := range k {
		b.Queue("SELECT $1::int * 2, repeat('b', $1::int)", i)
	}
	br := conn.SendBatch(ctx, b)
	for i := range k {
		var v int
		var s string
		if err := br.QueryRow().Scan(&v, &s); err != nil {
			br.Close()
			return false, fmt.Errorf("batch item %d: %w", i, err)
		}
		if v != 2*i || s != strings.Repeat("b", i) {
			br.Close()
			return false, fmt.Errorf("batch item %d: %d %q", i, v, s)
		}
	}
	return false, br.Close()
}

// pgPipelineOp pipelines a prepare and several executions with pgconn,
// and reads every result after the one Sync.
func pgPipelineOp(ctx context.Context, _ *chaos, conn *pgx.Conn, rng *rand.Rand, tag string) (bool, error) {
	k := 1 + rng.IntN(10)
	p := conn.PgConn().StartPipeline(ctx)
	p.SendPrepare(tag, "SELECT $1::text || '!'", nil)
	for i := range k {
		p.SendQueryPrepared(tag, [][]byte{[]byte(strconv.Itoa(i))}, nil, nil)
		p.SendQueryParams("SELECT $1::int + 1", [][]byte{[]byte(strconv.Itoa(i))}, nil, nil, nil)
	}
	p.SendDeallocate(tag)
	p.SendPipelineSync()
	if err := p.Flush(); err != nil {
		p.Close()
		return false, err
	}
	var got []string
results:
	for {
		res, err := p.GetResults()
		if err != nil {
			p.Close()
			return false, err
		}
		switch r := res.(type) {
		case nil, *pgconn.PipelineSync:
			break results
		case *pgconn.ResultReader:
			rr := r.Read()
			if rr.Err != nil {
				p.Close()
				return false, rr.Err
			}
			got = append(got, string(rr.Rows[0][0]))
		}
	}
	if err := p.Close(); err != nil {
		return false, err
	}
	if len(got) != 2*k {
		return false, fmt.Errorf("%d results, want %d", len(got), 2*k)
	}
	for i := range k {
		if got[2*i] != strconv.Itoa(i)+"!" || got[2*i+1] != strconv.Itoa(i+1) {
			return false, fmt.Errorf("results %q", got)
		}
	}
	return false, nil
}

// pgCopyOp copies rows into a temporary table and back out, and
// compares the bytes.
func pgCopyOp(ctx context.Context, _ *chaos, conn *pgx.Conn, rng *rand.Rand, _ string) (bool, error) {
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS chaos_copy (i int, v text)"); err != nil {
		return false, err
	}
	if _, err := conn.Exec(ctx, "TRUNCATE chaos_copy"); err != nil {
		return false, err
	}
	k := 1 + rng.IntN(5000)
	var want strings.Builder
	rows := make([][]any, k)
	for i := range k {
		v := md5hex(strconv.Itoa(i)) + strings.Repeat("c", i%50)
		rows[i] = []any{i, v}
		fmt.Fprintf(&want, "%d\t%s\n", i, v)
	}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"chaos_copy"}, []string{"i", "v"}, pgx.CopyFromRows(rows))
	if err != nil {
		return false, fmt.Errorf("copy in: %w", err)
	}
	if n != int64(k) {
		return false, fmt.Errorf("copied %d rows in, want %d", n, k)
	}
	var got strings.Builder
	if _, err := conn.PgConn().CopyTo(ctx, &got, "COPY (SELECT i, v FROM chaos_copy ORDER BY i) TO STDOUT"); err != nil {
		return false, fmt.Errorf("copy out: %w", err)
	}
	if got.String() != want.String() {
		return false, fmt.Errorf("copied out %d bytes, want %d", got.Len(), want.Len())
	}
	return false, nil
}

func pgPreparedOp(ctx context.Context, _ *chaos, conn *pgx.Conn, rng *rand.Rand, tag string) (bool, error) {
	if _, err := conn.Prepare(ctx, tag, "SELECT $1::int * $2::int, $3::text"); err != nil {
		return false, err
	}
	for range 1 + rng.IntN(10) {
		a, b := rng.IntN(1000), rng.IntN(1000)
		var v int
		var s string
		if err := conn.QueryRow(ctx, tag, a, b, tag).Scan(&v, &s); err != nil {
			return false, err
		}
		if v != a*b || s != tag {
			return false, fmt.Errorf("%d*%d = %d, %q", a, b, v, s)
		}
	}
	return false, conn.Deallocate(ctx, tag)
}

// pgCancelOp gives pg_sleep a context that ends first. With a
// CancelRequest handler the statement fails with 57014 (or the context
// ends before it is sent) and the session goes on; with the default one
// pgx drops the connection.
func pgCancelOp(ctx context.Context, c *chaos, conn *pgx.Conn, rng *rand.Rand, _ string) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, time.Duration(20+rng.IntN(300))*time.Millisecond)
	_, err := conn.Exec(qctx, "SELECT pg_sleep(2)")
	cancel()
	if err == nil {
		// Only the CancelRequest handler lets the statement finish: its
		// cancel reached PostgreSQL before the statement did (in
		// describe-exec mode, between the two round trips), and a backend
		// drops a cancel while it waits for its client.
		c.stats.op("pg-cancel-too-early")
	}
	if conn.IsClosed() {
		return true, nil
	}
	var v int
	if err := conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&v); err != nil || v != 42 {
		return false, fmt.Errorf("query after cancel: %d, %w", v, err)
	}
	return false, nil
}

// pgRegistryCancelOp cancels a running pg_sleep through sluice's own
// Registry.Cancel. A cancel that reaches PostgreSQL before the query
// does is dropped, so the statement may also finish normally.
func pgRegistryCancelOp(ctx context.Context, c *chaos, conn *pgx.Conn, _ *rand.Rand, tag string) (bool, error) {
	sql := "SELECT pg_sleep(1) /* " + tag + " */"
	done := make(chan error, 1)
	go func() { _, err := conn.Exec(ctx, sql); done <- err }()
	cerr := cancelInRegistry(ctx, c.reg, tag, done)
	err := <-done
	var pe *pgconn.PgError
	if err != nil && (!errors.As(err, &pe) || pe.Code != "57014") {
		return false, fmt.Errorf("cancelled statement: %w (cancel: %v)", err, cerr)
	}
	if cerr != nil {
		return false, cerr
	}
	return false, nil
}

// cancelInRegistry waits for the statement whose SQL holds tag to run in
// reg and cancels it, unless done fires first. A statement that ended
// before the cancel is no error.
func cancelInRegistry(ctx context.Context, reg *session.Registry, tag string, done chan error) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, st := range reg.Active() {
			if strings.Contains(st.SQL, tag) {
				if err := reg.Cancel(ctx, st); err != nil && !errors.Is(err, session.ErrNotRunning) {
					return fmt.Errorf("Registry.Cancel: %w", err)
				}
				return nil
			}
		}
		select {
		case err := <-done:
			done <- err
			return nil
		case <-time.After(2 * time.Millisecond):
		}
	}
	return fmt.Errorf("statement %s never showed in the registry", tag)
}

func pgErrorOp(ctx context.Context, _ *chaos, conn *pgx.Conn, _ *rand.Rand, _ string) (bool, error) {
	_, err := conn.Exec(ctx, "SELECT 1/0")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22012" {
		return false, fmt.Errorf("error %v, want 22012", err)
	}
	return false, nil
}

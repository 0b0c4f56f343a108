package stack_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/fastpath/fastpathtest"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// slowRows is a COPY FROM STDIN source: n rows of 1000 bytes, one per
// Read, every gap, so that each goes as a CopyData message of its own,
// a chunk the kernel fast path relays.
type slowRows struct {
	n   int
	gap time.Duration
}

func (r *slowRows) Read(b []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	r.n--
	time.Sleep(r.gap)
	row := make([]byte, 0, 1000)
	row = fmt.Appendf(row, "%d\t", r.n)
	for len(row) < 999 {
		row = append(row, 'x')
	}
	row = append(row, '\n')
	return copy(b, row), nil
}

// TestKernelPathPenalty: an exception rule with elapsedtime and
// bandwidth fires on a statement whose session the kernel relays (a COPY
// FROM STDIN sent a row at a time), and its penalty takes the session
// back to user space, where its bytes go at the low class. The time from
// the penalty to the session leaving the kernel is logged.
func TestKernelPathPenalty(t *testing.T) {
	fastpathtest.Open(t) // the stack loads its own
	pg := testenv.PostgresConfig(t)
	addr := testenv.DeadAddr(t)
	st, _ := configStack(t, fmt.Sprintf("fast_path: kernel\nroutes:\n  - name: kp\n    listen: %s\n    upstream: %s:%d\n    protocol: postgres\n",
		addr, pg.Host, pg.Port))
	execManager(t, st,
		"CREATE EXCEPT RULE kp_heavy WITH (elapsedtime=1, bandwidth='800kbit', action='penalty')",
		"CREATE RESOURCE POOL kp_pool WITH (except_rule='kp_heavy')",
		"ALTER ROUTE kp WITH (pool='kp_pool')",
		"SET except_check_period = '100ms'",
	)
	srv := st.Proxy()
	var penalized atomic.Int64 // unix nanoseconds of the penalty, 0 before
	var heldAfter atomic.Int64 // nanoseconds from the penalty to the pause
	var before atomic.Uint64   // pauses before the COPY
	unwatch := st.Registry().Watch(session.WatcherFunc(func(e session.Event) {
		if e.Kind == session.StatementPenalized && penalized.Load() == 0 {
			penalized.Store(time.Now().UnixNano())
			go func() {
				// Spin: the pause is expected within milliseconds, and a
				// sleep would round it up to the timer's slack.
				for start := time.Now(); time.Since(start) < 2*time.Second; runtime.Gosched() {
					if _, _, paused := srv.FastPathEvents(); paused > before.Load() {
						heldAfter.Store(time.Now().UnixNano() - penalized.Load())
						return
					}
				}
			}()
		}
	}))
	defer unwatch()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.ConnectPGConfig(t, pgVia(t, addr, "kernel_penalty"))
	if _, err := c.Exec(ctx, "CREATE TEMP TABLE kp_rows (n int, pad text)"); err != nil {
		t.Fatal(err)
	}
	kernelBefore := srv.FastPathBytes()
	_, _, paused := srv.FastPathEvents()
	before.Store(paused)
	// 2.5 s at 200 kB/s: past elapsedtime, above bandwidth.
	tag, err := c.PgConn().CopyFrom(ctx, &slowRows{n: 500, gap: 5 * time.Millisecond}, "COPY kp_rows FROM STDIN")
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 500 {
		t.Fatalf("COPY: %d rows", tag.RowsAffected())
	}
	if srv.FastPathBytes()-kernelBefore < 100_000 {
		t.Fatalf("the kernel relayed %d bytes of the COPY; want most of it before the penalty", srv.FastPathBytes()-kernelBefore)
	}
	res, err := st.Manager().Service().Exec(ctx, "SELECT rule, action, query FROM firings")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != "kp_heavy" || res.Rows[0][1] != "penalty" {
		t.Fatalf("firings %v, want kp_heavy's penalty", res.Rows)
	}
	if penalized.Load() == 0 {
		t.Fatal("no statement was penalised")
	}
	testenv.Poll(5*time.Second, func() bool { return heldAfter.Load() != 0 })
	if heldAfter.Load() == 0 {
		t.Fatal("the penalised session never left the kernel")
	}
	t.Logf("the penalised session left the kernel %v after its penalty", time.Duration(heldAfter.Load()))
}

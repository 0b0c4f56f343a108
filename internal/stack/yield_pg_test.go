package stack_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestLowYieldsToRunningStatement: a low-priority COPY fills a 20 MB/s
// link. While a statement of a normal-priority session on the same link
// runs (SELECT pg_sleep(1), which moves no byte while it runs), the Low
// class moves about low_priority_yield (10 %) of what it moves alone, and
// once the statement has ended it has the link again. Each window is
// timed by a pg_sleep(1) on a direct connection or through the normal
// route, so the test waits for no clock of its own.
func TestLowYieldsToRunningStatement(t *testing.T) {
	testenv.SkipShort(t, "takes 3s here")
	upstream := testenv.PostgresAddr(t)
	bulkAddr, appAddr := testenv.DeadAddr(t), testenv.DeadAddr(t)
	st, _ := configStack(t, "catalog: \"\"\nlinks:\n  - name: yl\n    capacity: 20MB\nroutes:\n"+
		"  - name: bulk\n    listen: "+bulkAddr+"\n    upstream: "+upstream+"\n    protocol: postgres\n    link: yl\n"+
		"  - name: app\n    listen: "+appAddr+"\n    upstream: "+upstream+"\n    protocol: postgres\n    link: yl\n")
	ctx := context.Background()
	execManager(t, st,
		"CREATE RESOURCE POOL yl_low WITH (network_priority='low')",
		"ALTER ROUTE bulk WITH (pool='yl_low')",
	)
	l := st.Manager().Runtime().Link("yl")
	low := func() int64 { return l.Stats().Directions[link.Down].Classes[link.Low].Bytes }

	bulk := testenv.ConnectPGConfig(t, pgVia(t, bulkAddr, "yield_bulk"))
	app := testenv.ConnectPGConfig(t, pgVia(t, appAddr, "yield_app"))
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	bctx, stop := context.WithCancel(ctx)
	copied := make(chan error, 1)
	go func() {
		_, err := bulk.PgConn().CopyTo(bctx, io.Discard, "COPY (SELECT repeat('b', 7000) FROM generate_series(1, 1000000)) TO STDOUT")
		copied <- err
	}()
	defer func() {
		stop()
		if err := <-copied; err != nil && !errors.Is(err, context.Canceled) && bctx.Err() == nil {
			t.Errorf("bulk COPY: %v", err)
		}
	}()
	testenv.Eventually(t, 10*time.Second, "low-priority bytes on the link", func() bool { return low() > 1<<20 })

	// window returns the Low class's bytes while exec runs pg_sleep(1).
	window := func(name string, exec func(context.Context, string) error) int64 {
		b0 := low()
		if err := exec(ctx, "SELECT pg_sleep(1)"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return low() - b0
	}
	directExec := func(ctx context.Context, q string) error { _, err := direct.Exec(ctx, q); return err }
	appExec := func(ctx context.Context, q string) error { _, err := app.Exec(ctx, q); return err }

	alone := window("alone", directExec)
	engaged := window("beside a running statement", appExec)
	after := window("after it ended", directExec)
	t.Logf("low class: %.1f MB/s alone, %.1f MB/s beside a running normal statement, %.1f MB/s after it", float64(alone)/1e6, float64(engaged)/1e6, float64(after)/1e6)
	if alone < 10_000_000 {
		t.Fatalf("the bulk COPY moved %d bytes in 1 s alone on a 20 MB/s link: it does not fill the link, nothing to yield", alone)
	}
	if engaged > alone/2 {
		t.Errorf("beside a running normal statement the low class moved %d bytes, alone %d: it did not yield", engaged, alone)
	}
	if after < alone*3/4 {
		t.Errorf("after the normal statement ended the low class moved %d bytes, alone %d: it did not take the link back", after, alone)
	}
}

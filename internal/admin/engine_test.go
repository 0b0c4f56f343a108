package admin

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/offpath"
)

const endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r"

// TestEngineBounded: twenty consoles that each send a query that would
// compute forever get one turn at a time: the queries beyond the ones
// running and waiting are refused at once with 53000, the others end at
// the query timeout with 57014, and none of them holds the engine past it.
func TestEngineBounded(t *testing.T) {
	const consoles, waiting = 20, 4
	timeout := 2 * time.Second
	if testing.Short() {
		timeout = time.Second
	}
	c := startConsole(t, Options{QueryTimeout: timeout, Engine: offpath.Options{MaxWaiting: waiting}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conns := make([]*pgx.Conn, consoles)
	for i := range conns {
		conn := c.connect(t)
		conns[i] = conn
	}
	var wg sync.WaitGroup
	codes := make(chan string, consoles)
	for _, conn := range conns {
		wg.Go(func() {
			var n int64
			err := conn.QueryRow(ctx, endless).Scan(&n)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				codes <- "no error: " + errString(err)
				return
			}
			codes <- pe.Code
		})
	}
	wg.Wait()
	close(codes)
	got := map[string]int{}
	for code := range codes {
		got[code]++
	}
	if got["53000"] != consoles-1-waiting || got["57014"] != 1+waiting || len(got) != 2 {
		t.Fatalf("codes %v, want %d of 53000 (refused) and %d of 57014 (ran or waited out the timeout)", got, consoles-1-waiting, 1+waiting)
	}
	// The engine is free again: a trivial query gets its answer.
	var n int64
	if err := conns[0].QueryRow(ctx, "SELECT count(*) FROM sessions").Scan(&n); err != nil {
		t.Fatalf("a trivial query after the storm: %v", err)
	}
}

// TestEngineTrivialWaitsItsTurn: a trivial query sent while an endless
// one runs waits for its turn and is answered once the endless one ends.
func TestEngineTrivialWaitsItsTurn(t *testing.T) {
	// The engine's thread computes only on a CPU nothing else wants: on a
	// host busy with other tests the long query takes far longer than
	// its CPU time, hence the generous timeouts.
	c := startConsole(t, Options{QueryTimeout: 2 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	heavy := c.connect(t)
	light := c.connect(t)
	done := make(chan error, 1)
	go func() {
		var n int64
		done <- heavy.QueryRow(ctx, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r LIMIT 50000) SELECT count(*) FROM r").Scan(&n)
	}()
	var n int64
	if err := light.QueryRow(ctx, "SELECT count(*) FROM rules").Scan(&n); err != nil {
		t.Fatalf("the trivial query: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the long query: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestWritesRefused: PRAGMA, ATTACH and writes sent to the console get
// 42501 (insufficient_privilege), as through its query engine, whichever
// of the parser or the engine sees them first.
func TestWritesRefused(t *testing.T) {
	c := startConsole(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := c.connect(t)
	for _, sql := range []string{
		"PRAGMA query_only = off",
		"ATTACH DATABASE '/tmp/x' AS x",
		"INSERT INTO rules VALUES ('r')",
		"UPDATE pools SET weight = 2",
		"DELETE FROM sessions",
		"CREATE TABLE t (a int)",
		"DROP TABLE rules",
		"SELECT * FROM pragma_table_info('rules')",
	} {
		_, err := conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s: %v, want 42501", sql, err)
		}
	}
}

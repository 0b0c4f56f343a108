package admin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/fastpath/fastpathtest"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestConsoleHoldsWhatClientsReceived runs the same small query again
// and again on a session the kernel fast path relays (fast_path is left
// at its default, auto) and reads the session's row on the console
// after each answer: its statements and bytes are those of every answer
// the client has read, no fewer, though the kernel hands an answer to
// the client before sluice has observed it.
func TestConsoleHoldsWhatClientsReceived(t *testing.T) {
	fastpathtest.Open(t) // the stack loads its own
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.ConnectPG(t, l.pgURL)
	adm := l.admin(t)
	var id uint64
	if err := adm.QueryRow(ctx, `SELECT id FROM sessions WHERE route = 'pg'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`SELECT statements, bytes_down FROM sessions WHERE id = %d`, id)
	const n = 200
	per := testenv.SteadyCounts(t, 20, n, func() []int64 {
		var x int
		if err := c.QueryRow(ctx, "select 42::int").Scan(&x); err != nil || x != 42 {
			t.Fatalf("select 42: %d, %v", x, err)
		}
		var stmts, down int64
		if err := adm.QueryRow(ctx, row).Scan(&stmts, &down); err != nil {
			t.Fatal(err)
		}
		return []int64{stmts, down}
	})
	srv := l.st.Proxy()
	if _, resumed, _ := srv.FastPathEvents(); resumed == 0 {
		t.Fatal("the session was not relayed in the kernel under the default fast_path")
	}
	if got := srv.FastPathBytes(); got < uint64(n*per[1]) {
		t.Errorf("the kernel relayed %d bytes, want the %d of the queries at least", got, n*per[1])
	}
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestAPIHoldsWhatClientsReceived runs the same small query again and
// again on a session the kernel fast path relays (fast_path is left at
// its default, auto) and reads GET /api/sessions/{id} after each
// answer: its statements and bytes are those of every answer the client
// has read, though the kernel hands an answer to the client before
// sluice has observed it.
func TestAPIHoldsWhatClientsReceived(t *testing.T) {
	if k, err := fastpath.Open(clock.Real{}); err != nil {
		testenv.Missing(t, "the kernel fast path (root, a BPF sockmap): %v", err)
		return
	} else {
		k.Close()
	}
	st := newStack(t, stackOptions{})
	url := st.addPGRoute(t, testenv.PostgresURL(t), "pg", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.ConnectPG(t, url)
	sessions := st.reg.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("%d sessions", len(sessions))
	}
	path := fmt.Sprintf("/api/sessions/%d", sessions[0].ID)
	one := func() (stmts, down int64) {
		t.Helper()
		var n int
		if err := c.QueryRow(ctx, "select 42::int").Scan(&n); err != nil || n != 42 {
			t.Fatalf("select 42: %d, %v", n, err)
		}
		var s httpapi.Session
		if err := json.Unmarshal(st.must(t, http.StatusOK, "GET", path, nil), &s); err != nil {
			t.Fatal(err)
		}
		return s.Statements, s.BytesDown
	}
	for range 20 { // pgx prepares on first use; the session is paired at an idle point
		one()
	}
	s0, d0 := one()
	s1, d1 := one()
	perStmts, perDown := s1-s0, d1-d0
	if perStmts <= 0 || perDown <= 0 {
		t.Fatalf("one query: %d statements, %d bytes down", perStmts, perDown)
	}
	if _, resumed, _ := st.srv.FastPathEvents(); resumed == 0 {
		t.Fatal("the session is not relayed in the kernel under the default fast_path")
	}
	kernel := st.srv.FastPathBytes()
	const n = 200
	for i := range n {
		s, d := one()
		k := int64(i + 2)
		if s-s0 != k*perStmts || d-d0 != k*perDown {
			t.Fatalf("after %d queries the API shows %d statements and %d bytes down, want %d and %d", k, s-s0, d-d0, k*perStmts, k*perDown)
		}
	}
	if got := st.srv.FastPathBytes() - kernel; got < uint64(n*perDown) {
		t.Errorf("the kernel relayed %d bytes of the queries, want %d at least", got, n*perDown)
	}
}

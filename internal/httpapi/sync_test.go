package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/fastpath/fastpathtest"
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
	fastpathtest.Open(t) // the stack loads its own
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
	const n = 200
	per := testenv.SteadyCounts(t, 20, n, func() []int64 {
		var x int
		if err := c.QueryRow(ctx, "select 42::int").Scan(&x); err != nil || x != 42 {
			t.Fatalf("select 42: %d, %v", x, err)
		}
		var s httpapi.Session
		if err := json.Unmarshal(st.must(t, http.StatusOK, "GET", path, nil), &s); err != nil {
			t.Fatal(err)
		}
		return []int64{s.Statements, s.BytesDown}
	})
	if _, resumed, _ := st.srv.FastPathEvents(); resumed == 0 {
		t.Fatal("the session was not relayed in the kernel under the default fast_path")
	}
	if got := st.srv.FastPathBytes(); got < uint64(n*per[1]) {
		t.Errorf("the kernel relayed %d bytes, want the %d of the queries at least", got, n*per[1])
	}
}

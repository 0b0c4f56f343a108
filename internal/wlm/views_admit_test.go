package wlm

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// TestAdmissionViews: a held statement shows as waiting with its block
// time, its pool's running and waiting counts, and once admitted its
// elapsed time counts from admission.
func TestAdmissionViews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAdmitEnv(t, "CREATE RESOURCE POOL p WITH (active_statements=1, queue_timeout=60); CREATE USER u RESOURCE POOL 'p'; ALTER LINK default WITH (max_active_statements=8)")
		ctx := context.Background()
		first := e.take(ctx, "u")
		held, ch := e.hold(ctx, "u")
		e.clk.Advance(1500 * time.Millisecond)

		res := mustExec(t, e.m, "SHOW POOLS")
		for k, want := range map[string]string{"active_statements": "1", "queue_timeout": "60s", "running": "1", "waiting": "1"} {
			if got := column(t, res, k); got != want {
				t.Errorf("SHOW POOLS %s = %q, want %q", k, got, want)
			}
		}
		if got := column(t, mustExec(t, e.m, "SELECT active_statements FROM pg_resource_pool"), "active_statements"); got != "1" {
			t.Errorf("pg_resource_pool active_statements = %q, want 1", got)
		}
		if got := column(t, mustExec(t, e.m, "SHOW LINKS"), "max_active_statements"); got != "8" {
			t.Errorf("SHOW LINKS max_active_statements = %q, want 8", got)
		}
		row := rowOf(t, mustExec(t, e.m, "SHOW STATEMENTS"), "id", held.ID)
		for k, want := range map[string]string{"state": "waiting", "elapsed": "0.000", "block_time": "1.500"} {
			if got := row[k]; got != want {
				t.Errorf("statements %s = %q, want %q", k, got, want)
			}
		}
		row = rowOf(t, mustExec(t, e.m, "SELECT * FROM gs_wlm_session_statistics"), "queryid", held.ID)
		for k, want := range map[string]string{"status": "waiting", "duration": "0", "block_time": "1500"} {
			if got := row[k]; got != want {
				t.Errorf("gs_wlm_session_statistics %s = %q, want %q", k, got, want)
			}
		}

		first.release()
		a := e.done(ch)
		e.clk.Advance(2 * time.Second)
		row = rowOf(t, mustExec(t, e.m, "SELECT * FROM gs_wlm_session_statistics"), "queryid", held.ID)
		for k, want := range map[string]string{"status": "running", "duration": "2000", "block_time": "1500"} {
			if got := row[k]; got != want {
				t.Errorf("after admission: gs_wlm_session_statistics %s = %q, want %q", k, got, want)
			}
		}
		res = mustExec(t, e.m, "SHOW POOLS")
		if got := column(t, res, "waiting"); got != "0" {
			t.Errorf("SHOW POOLS waiting = %q after admission", got)
		}
		a.release()
	})
}

// rowOf returns the row of res whose column key is id, by column name.
func rowOf(t *testing.T, res Result, key string, id uint64) map[string]string {
	t.Helper()
	for _, r := range res.Rows {
		row := map[string]string{}
		for i, c := range res.Columns {
			row[c] = r[i]
		}
		if row[key] == strconv.FormatUint(id, 10) {
			return row
		}
	}
	t.Fatalf("no row with %s %d in %v", key, id, res.Rows)
	return nil
}

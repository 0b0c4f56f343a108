package wlm

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/session"
)

// cancelKey returns a PostgreSQL cancel key for backend pid.
func cancelKey(pid uint32) string {
	k := make([]byte, 8)
	binary.BigEndian.PutUint32(k, pid)
	copy(k[4:], "salt")
	return string(k)
}

// TestCoordinator: distributed_application_name decides which shard
// connection names which open session, set after set.
func TestCoordinator(t *testing.T) {
	_, reg, m := newEvalManager(t, "CREATE RESOURCE POOL p")
	coord := openAs(reg, "coord", "u", t0)
	coord.SetCancelKey(cancelKey(4321))
	other := openAs(reg, "coord", "u", t0)
	other.SetCancelKey(cancelKey(77))
	for _, c := range []struct {
		set  string // SET statement before, "" for none
		app  string
		want *session.Session
	}{
		{"", "fdw 4321", coord}, // the default, fdw %p
		{"", "fdw 77", other},
		{"", "fdw 999", nil},
		{"", "postgres_fdw", nil},
		{"", "psql", nil},
		{"SET distributed_application_name = 'citus_internal gpid=%g'", "citus_internal gpid=10000004321", coord},
		{"", "fdw 4321", nil},
		{"SET distributed_application_name = '%u-%p'", "alice-77", other},
		{"SET distributed_application_name = ''", "fdw 4321", nil},
		{"SET distributed_application_name = DEFAULT", "fdw 4321", coord},
	} {
		if c.set != "" {
			mustExec(t, m, c.set)
		}
		if got := m.Runtime().Coordinator(c.app); got != c.want {
			t.Errorf("after %q, Coordinator(%q) = %v, want %v", c.set, c.app, got, c.want)
		}
	}
	if _, err := m.Service().Exec(context.Background(), "SET distributed_application_name = 'fdw'"); err == nil || !strings.Contains(err.Error(), "process id") {
		t.Errorf("SET of a pattern without a pid: %v", err)
	}
	if res := mustExec(t, m, "SHOW distributed_application_name"); len(res.Rows) != 1 || res.Rows[0][0] != "fdw %p" {
		t.Errorf("SHOW distributed_application_name = %v", res.Rows)
	}
}

// TestEvaluatorDistributedTotal: a bandwidth penalty rule of the
// coordinator's pool is evaluated on its statement's total (own bytes
// far below the threshold, shard bytes far above), fires once, and
// demotes every linked session while the statement runs; a coordinator
// statement alike but without shards does not fire. The shard pool's
// own rule applies to the shard statements on their own bytes.
func TestEvaluatorDistributedTotal(t *testing.T) {
	_, reg, m := newEvalManager(t, `CREATE EXCEPT RULE fat WITH (bandwidth=1, action=penalty);
CREATE RESOURCE POOL coord WITH (except_rule='fat'); CREATE USER cu RESOURCE POOL coord;
CREATE EXCEPT RULE thin WITH (bandwidth=3, elapsedtime=1, action=penalty);
CREATE RESOURCE POOL shards WITH (except_rule='thin'); CREATE USER su RESOURCE POOL shards`)
	ctx := context.Background()
	coord := openAs(reg, "coord", "cu", t0)
	lone := openAs(reg, "coord", "cu", t0)
	var shards []*session.Session
	for _, r := range []string{"shard1", "shard2", "shard3"} {
		s := openAs(reg, r, "su", t0)
		if !s.Link(coord) {
			t.Fatal("link refused")
		}
		shards = append(shards, s)
	}
	top := coord.Begin("SELECT count(*) FROM parted", t0)
	top.AddUp(100)
	alone := lone.Begin("SELECT count(*) FROM local", t0)
	alone.AddUp(100)
	var fetches []*session.Statement
	for i, s := range shards {
		st := s.Begin("FETCH 100 FROM c1", t0)
		st.AddDown((i + 1) * 2_000_000) // 2, 4 and 6 MB in the first second: 12 MB in all
		fetches = append(fetches, st)
	}
	for sec := 1; sec <= 12; sec++ {
		m.Rules().Evaluate(ctx, t0.Add(time.Duration(sec)*time.Second))
	}
	if !top.Penalized() || alone.Penalized() {
		t.Fatalf("penalised: distributed %v, alone %v; want true, false", top.Penalized(), alone.Penalized())
	}
	if n := m.Rules().Stats().Firings[FiringKey{"fat", Penalty}]; n != 1 {
		t.Fatalf("rule fired %d times, want once", n)
	}
	for _, s := range append([]*session.Session{coord}, shards...) {
		if !s.Penalized() {
			t.Fatalf("session on %s not demoted", s.Info.Route)
		}
	}
	if lone.Penalized() {
		t.Fatal("an unrelated session of the pool was demoted")
	}
	// thin: 4 and 6 MB/s over the first second are above 3 MB/s, 2 MB/s
	// is not.
	if n := m.Rules().Stats().Firings[FiringKey{"thin", Penalty}]; n != 2 || fetches[0].Penalized() || !fetches[1].Penalized() || !fetches[2].Penalized() {
		t.Fatalf("thin fired %d times (penalised %v %v %v), want twice, for shard2 and shard3", n, fetches[0].Penalized(), fetches[1].Penalized(), fetches[2].Penalized())
	}

	res := mustExec(t, m, "SHOW STATEMENTS")
	col := map[string]int{}
	for i, c := range res.Columns {
		col[c] = i
	}
	var sum int64
	for _, row := range res.Rows {
		switch row[col["id"]] {
		case itoa(top.ID):
			if row[col["parent"]] != "" || row[col["total_bytes_up"]] != "100" || row[col["total_bytes_down"]] != "12000000" {
				t.Errorf("distributed row parent %q totals %s/%s", row[col["parent"]], row[col["total_bytes_up"]], row[col["total_bytes_down"]])
			}
			if want := "coord:100/0,shard1:0/2000000,shard2:0/4000000,shard3:0/6000000"; row[col["nodes"]] != want {
				t.Errorf("nodes = %q, want %q", row[col["nodes"]], want)
			}
		case itoa(alone.ID):
			if row[col["parent"]] != "" || row[col["nodes"]] != "" {
				t.Errorf("plain statement: parent %q nodes %q", row[col["parent"]], row[col["nodes"]])
			}
		default:
			if row[col["parent"]] != itoa(top.ID) {
				t.Errorf("shard statement %s: parent %q, want %d", row[col["id"]], row[col["parent"]], top.ID)
			}
			n, err := strconv.ParseInt(row[col["bytes_down"]], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += n
		}
	}
	if sum != 12_000_000 {
		t.Errorf("shard statements' bytes_down sum to %d, want the distributed total 12000000", sum)
	}
	for _, st := range fetches {
		st.End(t0.Add(13*time.Second), session.OK, 100, "")
	}
	if !shards[0].Penalized() {
		t.Fatal("shard1's session is not demoted while its coordinator's statement runs")
	}
	top.End(t0.Add(13*time.Second), session.OK, 1, "")
	for _, s := range shards {
		if s.Penalized() {
			t.Fatalf("session on %s still demoted after the statement ended", s.Info.Route)
		}
	}
}

func itoa(id uint64) string { return strconv.FormatUint(id, 10) }

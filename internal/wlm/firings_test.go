package wlm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
)

// TestFiringLogRing: the history keeps the last size firings, oldest
// first, under concurrent Records.
func TestFiringLogRing(t *testing.T) {
	for _, tt := range []struct{ size, n int }{{3, 0}, {3, 2}, {3, 3}, {3, 10}, {0, 5}} {
		l, err := NewFiringLog(tt.size, "", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for i := range tt.n {
			l.Record(Firing{Statement: uint64(i)})
		}
		size := tt.size
		if size == 0 {
			size = DefaultFiringsSize
		}
		got := l.Entries()
		if want := min(tt.n, size); len(got) != want {
			t.Fatalf("size %d, %d firings: %d kept, want %d", tt.size, tt.n, len(got), want)
		}
		for i, e := range got {
			if want := uint64(tt.n - len(got) + i); e.Statement != want {
				t.Errorf("size %d, %d firings: entry %d is firing %d, want %d", tt.size, tt.n, i, e.Statement, want)
			}
		}
	}
	l, _ := NewFiringLog(50, "", slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				l.Record(Firing{Rule: fmt.Sprint(g), Statement: uint64(i)})
			}
		})
	}
	wg.Wait()
	if got := len(l.Entries()); got != 50 {
		t.Errorf("%d kept after 800 concurrent firings, want 50", got)
	}
}

// TestFiringLogFile: a history with a file gives its firings back to the
// next one made on the path (a restart), keeps the bound across the
// rewrite that compacts the file, writes the file 0600, and holds no
// password the statement's text had.
func TestFiringLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json.firings")
	log := slog.New(slog.DiscardHandler)
	l, err := NewFiringLog(4, path, log)
	if err != nil {
		t.Fatal(err)
	}
	reg := session.NewRegistry(session.Options{})
	s := reg.Open(session.Info{Route: "pg", Protocol: "postgres"}, t0)
	st := s.Begin("ALTER USER app PASSWORD 'hunter2-secret'", t0)
	for i := range 11 { // past 2x the bound: the file is compacted
		l.Record(firing{st: st, rule: fmt.Sprint("r", i), action: Penalty, pool: "p", age: time.Duration(i) * time.Second}.entry(t0.Add(time.Duration(i) * time.Second)))
	}
	l.Close()
	l.Close() // safe twice
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "hunter2") {
		t.Errorf("the firing file holds the password: %s", data)
	}
	if n := strings.Count(string(data), "\n"); n >= 8 {
		t.Errorf("the file holds %d lines, want fewer than twice the bound of 4", n)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the firing file's mode: %v, %v; want 0600", fi.Mode(), err)
	}
	back, err := NewFiringLog(4, path, log)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	got := back.Entries()
	if len(got) != 4 || got[0].Rule != "r7" || got[3].Rule != "r10" || got[3].Elapsed != 10*time.Second || got[3].Route != "pg" || got[3].Action != "penalty" {
		t.Fatalf("after a restart: %+v; want r7..r10", got)
	}
	back.Record(Firing{Rule: "r11"})
	if got := back.Entries(); got[len(got)-1].Rule != "r11" || got[0].Rule != "r8" {
		t.Errorf("recording after a restart: %+v", got)
	}
}

// TestFiringsSurviveTraffic: a firing stays in the firings view however
// many ordinary statements end after it, where the statement history
// (gs_wlm_session_history) has long dropped it.
func TestFiringsSurviveTraffic(t *testing.T) {
	clk := clock.NewFake(t0)
	reg := session.NewRegistry(session.Options{})
	m := newTestManager(t, ManagerOptions{Clock: clk, Registry: reg})
	mustExec(t, m, `CREATE EXCEPT RULE slow WITH (elapsedtime=2, action=penalty);
CREATE RESOURCE POOL p WITH (except_rule='slow'); CREATE USER u RESOURCE POOL p`)
	s := openAs(reg, "pg", "u", t0)
	st := s.Begin("SELECT pg_sleep(10) /* the slow one */", t0)
	m.Evaluate(context.Background(), t0.Add(2*time.Second))
	if !st.Snapshot().Penalized {
		t.Fatal("the rule did not fire")
	}
	st.End(t0.Add(3*time.Second), session.OK, 1, "")
	other := openAs(reg, "pg", "ordinary", t0)
	for i := range 5000 {
		other.Begin(fmt.Sprint("SELECT ", i), t0.Add(4*time.Second)).End(t0.Add(4*time.Second), session.OK, 1, "")
	}
	for _, row := range mustExec(t, m, "SELECT query FROM gs_wlm_session_history").Rows {
		if strings.Contains(row[0], "the slow one") {
			t.Fatal("the statement history still holds the firing's statement: the test shows nothing")
		}
	}
	res := mustExec(t, m, "SELECT rule, action, usename, resource_pool, route, query, elapsed_s FROM firings")
	if len(res.Rows) != 1 {
		t.Fatalf("firings view: %v, want one firing", res.Rows)
	}
	row := res.Rows[0]
	if row[0] != "slow" || row[1] != "penalty" || row[2] != "u" || row[3] != "p" || row[4] != "pg" || !strings.Contains(row[5], "the slow one") || row[6] != "2.000" {
		t.Errorf("firing row %v", row)
	}
}

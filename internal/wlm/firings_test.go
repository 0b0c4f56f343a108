package wlm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/views/viewsql"
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
		f := firing{st: st, rule: fmt.Sprint("r", i), action: Penalty, pool: "p", age: time.Duration(i) * time.Second, bytes: int64(i)}
		l.Record(f.entry(t0.Add(time.Duration(i)*time.Second), OutcomePenalized))
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
	// A line torn by a crash in the middle of a write is skipped.
	if err := os.WriteFile(path, append(data, `{"rule":"torn`...), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := NewFiringLog(4, path, log)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	got := back.Entries()
	if len(got) != 4 || got[0].Rule != "r7" || got[3].Rule != "r10" || got[3].Elapsed != 10*time.Second || got[3].Route != "pg" || got[3].Action != "penalty" ||
		got[3].Bytes != 10 || got[3].Outcome != OutcomePenalized || !strings.Contains(got[3].Query, "ALTER USER app PASSWORD") {
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
	m.Rules().Evaluate(context.Background(), t0.Add(2*time.Second))
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
	// The console's SELECT: SQL over the views (package viewsql).
	res, err := viewsql.Query(context.Background(), m.Views().ViewTables([]string{"firings"}),
		"SELECT rule, action, usename, resource_pool, route, query, elapsed_s, outcome FROM firings WHERE rule = 'slow'", viewsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 {
		t.Fatalf("firings view: %v, want one firing", res.Rows)
	}
	row := res.Rows[0]
	if row[0].String != "slow" || row[1].String != "penalty" || row[2].String != "u" || row[3].String != "p" || row[4].String != "pg" ||
		!strings.Contains(row[5].String, "the slow one") || row[6].String != "2" || row[7].String != OutcomePenalized {
		t.Errorf("firing row %v", row)
	}
}

// TestFiringOutcomes: each firing is in the firings view with what its
// action came to (a failed cancel with its error) and the bytes the
// statement had moved when the rule fired.
func TestFiringOutcomes(t *testing.T) {
	for _, tt := range []struct {
		name, action string
		canceler     func(st *session.Statement, clk *clock.Fake) session.Canceler // nil: none
		want         string                                                        // the outcome's start
		wantErr      string                                                        // in the outcome, if not ""
	}{
		{name: "penalty", action: "penalty", want: OutcomePenalized},
		{name: "abort cancelled", action: "abort", want: OutcomeCancelled,
			canceler: func(st *session.Statement, clk *clock.Fake) session.Canceler {
				return &fakeCanceler{st: st, now: clk.Now}
			}},
		{name: "abort, the cancel fails", action: "abort", want: OutcomeCancelFailed + ": ", wantErr: "connection refused",
			canceler: func(st *session.Statement, clk *clock.Fake) session.Canceler {
				return &fakeCanceler{st: st, now: clk.Now, err: errors.New("connection refused")}
			}},
		{name: "abort, no way to cancel", action: "abort", want: OutcomeCancelFailed + ": "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk, reg, m := newEvalManager(t, fmt.Sprintf(`CREATE EXCEPT RULE slow WITH (elapsedtime=1, action=%s);
CREATE RESOURCE POOL p WITH (except_rule='slow'); CREATE USER u RESOURCE POOL p`, tt.action))
			s := openAs(reg, "pg", "u", t0)
			st := s.Begin("SELECT pg_sleep(10)", t0)
			if tt.canceler != nil {
				s.SetCanceler(tt.canceler(st, clk))
			}
			st.AddDown(12345)
			m.Rules().Evaluate(context.Background(), t0.Add(time.Second))
			rows := mustExec(t, m, "SELECT rule, action, outcome, bytes, elapsed_s FROM firings").Rows
			if len(rows) != 1 {
				t.Fatalf("firings %v, want one", rows)
			}
			if r := rows[0]; r[0] != "slow" || r[1] != tt.action || !strings.HasPrefix(r[2], tt.want) || !strings.Contains(r[2], tt.wantErr) || r[3] != "12345" || r[4] != "1.000" {
				t.Errorf("firing %v; want slow, %s, outcome %q..., 12345 bytes, 1 s", r, tt.action, tt.want)
			}
		})
	}
}

// TestFiringLogLongQuery: a long statement text is cut within the bound,
// between characters.
func TestFiringLogLongQuery(t *testing.T) {
	l, _ := NewFiringLog(1, "", slog.New(slog.DiscardHandler))
	l.Record(Firing{Query: "SELECT '" + strings.Repeat("é", maxFiringQuery) + "'"})
	q := l.Entries()[0].Query
	if len(q) > maxFiringQuery+len("...") || !utf8.ValidString(q) || !strings.HasSuffix(q, "é...") {
		t.Errorf("kept %d bytes, valid UTF-8 %v, ending %q", len(q), utf8.ValidString(q), q[len(q)-8:])
	}
}

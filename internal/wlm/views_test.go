package wlm

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// column returns the named column of row 0 of res.
func column(t *testing.T, res Result, name string) string {
	t.Helper()
	for i, c := range res.Columns {
		if c == name {
			if len(res.Rows) == 0 {
				t.Fatalf("no rows for %s", name)
			}
			return res.Rows[0][i]
		}
	}
	t.Fatalf("no column %s in %v", name, res.Columns)
	return ""
}

func TestStatementViews(t *testing.T) {
	clk, reg, m := newEvalManager(t, "CREATE RESOURCE POOL vip WITH (network_priority=high); CREATE USER u RESOURCE POOL vip")
	if err := m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true}); err != nil {
		t.Fatal(err)
	}
	s := reg.Open(session.Info{Route: "pg", Client: "1.2.3.4:5"}, t0)
	s.SetIdentity("u", "db", "app")
	st := s.Begin("COPY t TO STDOUT", t0)
	ctx := context.Background()
	// 10 MB/s for 10 s, then 40 MB/s for 5 s: the 5 s window sees 40.
	for i := 1; i <= 15; i++ {
		rate := 10e6
		if i > 10 {
			rate = 40e6
		}
		st.AddDown(int(rate))
		s.AddDown(int(rate))
		clk.Advance(time.Second)
		m.Rules().Evaluate(ctx, clk.Now())
	}
	res := mustExec(t, m, "SHOW STATEMENTS")
	for k, want := range map[string]string{"state": "running", "class": "high", "pool": "vip", "elapsed": "15.000", "bandwidth_mbps": "40.00", "bytes_down": "300000000", "rows": "", "penalised": "no"} {
		if got := column(t, res, k); got != want {
			t.Errorf("SHOW STATEMENTS %s = %q, want %q", k, got, want)
		}
	}
	st.End(clk.Now(), session.OK, 7, "")
	res = mustExec(t, m, "SELECT queryid, status, duration, bandwidth_mbps, rows FROM gs_wlm_session_history")
	for k, want := range map[string]string{"status": "ok", "duration": "15000", "bandwidth_mbps": "20.00", "rows": "7"} {
		if got := column(t, res, k); got != want {
			t.Errorf("history %s = %q, want %q", k, got, want)
		}
	}
	if res := mustExec(t, m, "SELECT * FROM gs_wlm_session_statistics"); len(res.Rows) != 0 || res.Tag != "SELECT 0" {
		t.Errorf("statistics after the end: %+v", res)
	}
	res = mustExec(t, m, "SELECT * FROM pg_session_wlmstat LIMIT 5")
	for k, want := range map[string]string{"status": "idle", "resource_pool": "vip", "usename": "u", "recv_bytes": "300000000", "client_addr": "1.2.3.4:5"} {
		if got := column(t, res, k); got != want {
			t.Errorf("pg_session_wlmstat %s = %q, want %q", k, got, want)
		}
	}
	if res := mustExec(t, m, "SELECT * FROM pg_session_wlmstat LIMIT 0"); len(res.Rows) != 0 {
		t.Errorf("LIMIT 0 returned %d rows", len(res.Rows))
	}
	res = mustExec(t, m, "SHOW SESSIONS")
	if got := column(t, res, "statements"); got != "1" {
		t.Errorf("statements = %q", got)
	}
	if got := column(t, res, "kind"); got != "client" {
		t.Errorf("kind = %q, want client", got)
	}
	s.SetKind(session.KindBaseBackup)
	res = mustExec(t, m, "SELECT kind FROM sessions")
	if got := column(t, res, "kind"); got != "basebackup" {
		t.Errorf("kind after SetKind = %q, want basebackup", got)
	}
}

// TestConcurrentUse runs statements, bindings, evaluation and views at
// once; it is meant for the race detector.
func TestConcurrentUse(t *testing.T) {
	clk := clock.NewFake(t0)
	reg := session.NewRegistry(session.Options{})
	m := newTestManager(t, ManagerOptions{Clock: clk, Registry: reg, CatalogPath: t.TempDir() + "/c.json"})
	mustExec(t, m, reference)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				switch w {
				case 0:
					name := fmt.Sprintf("p%d", i)
					if _, err := m.Service().Exec(ctx, "CREATE RESOURCE POOL "+name+" WITH (weight=2); ALTER LINK default WITH (delay='1ms'); SET low_priority_bandwidth = '10MB'"); err != nil {
						t.Error(err)
					}
				case 1:
					v := m.Runtime().Version()
					if b := m.Runtime().Bind("pg", "user1"); b.Pool != "rp1" || b.Link == nil {
						t.Errorf("Bind = %+v", b)
					}
					if m.Runtime().Version() < v {
						t.Error("Version went backwards")
					}
				case 2:
					s := openAs(reg, "pg", "user1", t0)
					st := s.Begin("SELECT 1", t0)
					st.AddUp(1000)
					m.Rules().Evaluate(ctx, t0.Add(time.Duration(i)*time.Second))
					s.Close(t0.Add(time.Duration(i) * time.Second))
				case 3:
					for _, q := range []string{"SHOW STATEMENTS", "SHOW LINKS", "SHOW POOLS", "SELECT * FROM pg_session_wlmstat"} {
						if _, err := m.Service().Exec(ctx, q); err != nil {
							t.Error(err)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := len(m.Service().Catalog().Pools); n != 31 {
		t.Errorf("%d pools, want 31", n)
	}
}

func BenchmarkBind(b *testing.B) {
	m, err := NewManager(ManagerOptions{Clock: clock.NewFake(t0)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Service().Exec(context.Background(), reference+"ALTER LINK default WITH (delay='5ms'); ALTER RESOURCE POOL rp1 WITH (jitter='1ms')"); err != nil {
		b.Fatal(err)
	}
	if err := m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if m.Runtime().Bind("pg", "user1").Pool == "" {
			b.Fatal("no pool")
		}
	}
}

func BenchmarkVersion(b *testing.B) {
	m, err := NewManager(ManagerOptions{Clock: clock.NewFake(t0)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.ReportAllocs()
	var v uint64
	for b.Loop() {
		v += m.Runtime().Version()
	}
	_ = strings.TrimSpace(fmt.Sprint(v))
}

func BenchmarkExecDDL(b *testing.B) {
	m, err := NewManager(ManagerOptions{Clock: clock.NewFake(t0)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Service().Exec(context.Background(), reference); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Service().Exec(context.Background(), "ALTER EXCEPT RULE bandwidth_rule1 WITH (bandwidth=100)"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestShowBudget(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	if res := mustExec(t, m, "SHOW BUDGET"); len(res.Rows) != 0 || res.Columns[0] != "instance" {
		t.Fatalf("SHOW BUDGET without a fleet = %+v", res)
	}
	state := views.BudgetState{Budget: 30e6, Unreachable: true, Rows: []views.BudgetRow{
		{Instance: "a", Allocator: true, Mode: "grant", Want: 30e6, Rate: 15e6, Version: 4},
		{Instance: "b", Self: true, Mode: "fallback", Want: 30e6, Rate: 10e6, Version: 2},
	}}
	m.Views().Register("budget", views.BudgetSource(func() views.BudgetState { return state }))
	res := mustExec(t, m, "SHOW BUDGET")
	want := [][]string{
		{"a", "no", "yes", "grant", "30000000", "15000000", "4", "30000000", ""},
		{"b", "yes", "no", "fallback", "30000000", "10000000", "2", "30000000", "unreachable"},
	}
	if !reflect.DeepEqual(res.Rows, want) {
		t.Errorf("SHOW BUDGET rows %v, want %v", res.Rows, want)
	}
	res = mustExec(t, m, "SELECT instance, rate FROM budget")
	if len(res.Rows) != 2 || res.Rows[1][0] != "b" || res.Rows[1][1] != "10000000" {
		t.Errorf("SELECT from budget = %+v", res)
	}
	m.Views().Register("budget", nil)
	if res := mustExec(t, m, "SHOW BUDGET"); len(res.Rows) != 0 {
		t.Errorf("SHOW BUDGET after its source is removed = %+v", res)
	}
}

package wlm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

func TestAuditLogBounded(t *testing.T) {
	l := NewAuditLog(3)
	a := Actor{Surface: SurfaceConsole, User: "admin", Addr: "127.0.0.1:5000"}
	for i := range 5 {
		var err error
		if i%2 == 1 {
			err = ddl.Errorf(sqlstate.UndefinedObject, 0, "no %d", i)
		}
		l.Record(t0.Add(time.Duration(i)*time.Second), a, fmt.Sprintf("S%d", i), err)
	}
	got := l.Entries()
	if len(got) != 3 {
		t.Fatalf("%d entries, want the last 3", len(got))
	}
	for k, e := range got {
		i := k + 2
		if e.Statement != fmt.Sprintf("S%d", i) || !e.Time.Equal(t0.Add(time.Duration(i)*time.Second)) || entryActor(e) != a {
			t.Errorf("entry %d = %+v, want statement S%d", k, e, i)
		}
		wantCode, wantOutcome := "", "ok"
		if i%2 == 1 {
			wantCode, wantOutcome = sqlstate.UndefinedObject, "error"
		}
		if e.Code != wantCode || e.Outcome() != wantOutcome {
			t.Errorf("entry %d: code %q outcome %q, want %q %q", k, e.Code, e.Outcome(), wantCode, wantOutcome)
		}
	}
	c := l.Counts()
	if c[AuditCount{SurfaceConsole, "ok"}] != 3 || c[AuditCount{SurfaceConsole, "error"}] != 2 {
		t.Errorf("counts %v, want 3 ok and 2 errors: the ring's drops are counted", c)
	}
	// A plain error is an internal error.
	if e := l.Record(t0, a, "x", errors.New("boom")); e.Code != sqlstate.InternalError || e.Error != "boom" {
		t.Errorf("plain error recorded as %+v", e)
	}
	if n := len(NewAuditLog(0).Entries()); n != 0 {
		t.Errorf("new log has %d entries", n)
	}
}

func TestAuditLogConcurrent(t *testing.T) {
	const writers, each, size = 8, 200, 100
	l := NewAuditLog(size)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				l.Record(t0, Actor{Surface: SurfaceHTTP}, fmt.Sprintf("%d/%d", w, i), nil)
				_ = l.Entries()
			}
		})
	}
	wg.Wait()
	if n := len(l.Entries()); n != size {
		t.Errorf("%d entries, want %d", n, size)
	}
	if n := l.Counts()[AuditCount{SurfaceHTTP, "ok"}]; n != writers*each {
		t.Errorf("counted %d, want %d", n, writers*each)
	}
}

// auditManager returns a manager logging to buf at INFO.
func auditManager(t *testing.T, buf *testenv.Buffer) *Manager {
	t.Helper()
	return newTestManager(t, ManagerOptions{Clock: clock.NewFake(t0), Logger: slog.New(slog.NewTextHandler(buf, nil))})
}

func TestManagerAudit(t *testing.T) {
	var buf testenv.Buffer
	m := auditManager(t, &buf)
	console := Actor{Surface: SurfaceConsole, User: "admin", Addr: "127.0.0.1:40000"}
	ctx := WithActor(context.Background(), console)
	run := func(sql string) error { _, err := m.Service().Exec(ctx, sql); return err }
	if err := run("CREATE RESOURCE POOL p WITH (delay='1ms')"); err != nil {
		t.Fatal(err)
	}
	if err := run("CREATE USER u RESOURCE POOL 'p' PASSWORD 'hunter2-secret'"); err != nil {
		t.Fatal(err)
	}
	if err := run("SHOW POOLS; SELECT * FROM pg_session_wlmstat; SHOW AUDIT"); err != nil {
		t.Fatal(err)
	}
	if err := run("ALTER RESOURCE POOL nosuch WITH (weight=2)"); err == nil {
		t.Fatal("altering a missing pool succeeded")
	}
	// A statement built without text (the HTTP API's) is written out,
	// its password masked.
	built := &ddl.Create{Kind: ddl.User, Name: ddl.Name{Name: "v"}, Options: []ddl.Option{
		{Name: "resource_pool", Value: ddl.Value{Kind: ddl.String, Text: "p"}},
		{Name: "password", Value: ddl.Value{Kind: ddl.String, Text: "built-secret"}},
	}}
	httpCtx := WithActor(context.Background(), Actor{Surface: SurfaceHTTP, User: "token", Addr: "127.0.0.1:40001"})
	if _, err := m.Service().ExecStatement(httpCtx, built); err != nil {
		t.Fatal(err)
	}
	fwdCtx := WithActor(context.Background(), Actor{Surface: SurfaceForward, User: "dba", Addr: "127.0.0.1:40002"})
	if _, took, err := m.Service().ForwardUser(fwdCtx, "ALTER USER w RESOURCE POOL 'p' PASSWORD 'fwd-secret'", ddl.PostgreSQL); !took || err != nil {
		t.Fatalf("forward: took %v, err %v", took, err)
	}
	cfgCtx := WithActor(context.Background(), Actor{Surface: SurfaceConfig, Addr: "/etc/sluice.yaml"})
	if err := m.Service().DefineLink(cfgCtx, "wan", map[string]string{"delay": "5ms"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Service().Set(cfgCtx, "low_priority_bandwidth", "bogus"); err == nil {
		t.Fatal("a bad setting was accepted")
	}

	want := []struct {
		actor     Actor
		statement string
		code      string
	}{
		{console, "CREATE RESOURCE POOL p WITH (delay='1ms')", ""},
		{console, "CREATE USER u RESOURCE POOL 'p' PASSWORD '***'", ""},
		{console, "ALTER RESOURCE POOL nosuch WITH (weight=2)", sqlstate.UndefinedObject},
		{actorIn(httpCtx), "CREATE USER v RESOURCE POOL 'p' PASSWORD '***'", ""},
		{actorIn(fwdCtx), "ALTER USER w RESOURCE POOL 'p' PASSWORD '***'", ""},
		{actorIn(cfgCtx), "CREATE OR ALTER LINK wan WITH (delay='5ms')", ""},
		{actorIn(cfgCtx), "SET low_priority_bandwidth = 'bogus'", sqlstate.InvalidParameterValue},
	}
	got := m.Service().Audit()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d (SHOW and SELECT are not audited): %+v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		if entryActor(e) != w.actor || e.Statement != w.statement || e.Code != w.code || !e.Time.Equal(t0) {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
	}
	res := mustExec(t, m, "SHOW AUDIT")
	sel := mustExec(t, m, "SELECT statement, outcome, error FROM audit")
	if len(res.Rows) != len(want) || len(sel.Rows) != len(want) {
		t.Fatalf("SHOW AUDIT has %d rows, SELECT %d, want %d", len(res.Rows), len(sel.Rows), len(want))
	}
	if r := sel.Rows[2]; r[1] != "error" || !strings.HasPrefix(r[2], "42704: ") {
		t.Errorf("failed entry shows as %q", r)
	}
	if r := res.Rows[0]; r[1] != "console" || r[2] != "admin" || r[3] != "127.0.0.1:40000" || r[5] != "ok" {
		t.Errorf("first entry shows as %q", r)
	}
	if n := m.Service().AuditCounts()[AuditCount{SurfaceConsole, "error"}]; n != 1 {
		t.Errorf("console errors counted %d, want 1", n)
	}
	log := buf.String()
	for _, secret := range []string{"hunter2-secret", "built-secret", "fwd-secret"} {
		if strings.Contains(log, secret) || strings.Contains(fmt.Sprint(got), secret) {
			t.Errorf("password %s leaked into the audit trail", secret)
		}
	}
	if n := strings.Count(log, "level=INFO msg=\"catalog change\""); n != len(want) {
		t.Errorf("%d INFO lines, want %d:\n%s", n, len(want), log)
	}
	if !strings.Contains(log, "surface=forward user=dba client_addr=127.0.0.1:40002") {
		t.Errorf("forward line missing:\n%s", log)
	}
}

// actorIn returns the Actor ctx carries.
func actorIn(ctx context.Context) Actor { a, _ := ActorFrom(ctx); return a }

func entryActor(e AuditEntry) Actor { return Actor{Surface: e.Surface, User: e.User, Addr: e.Addr} }

// TestSessionCommandOfNoSessionAudited: a cancel or terminate of a
// session that does not exist is audited with 42704, the code the
// console's CANCEL STATEMENT and TERMINATE SESSION answer it with.
func TestSessionCommandOfNoSessionAudited(t *testing.T) {
	var buf testenv.Buffer
	m := auditManager(t, &buf)
	ctx := WithActor(context.Background(), Actor{Surface: SurfaceConsole, User: "admin"})
	if done, err := m.Runtime().CancelSession(ctx, 999999); done || err != nil {
		t.Fatalf("CancelSession of no session: %v, %v", done, err)
	}
	if m.Runtime().TerminateSession(ctx, 999998) {
		t.Fatal("TerminateSession of no session: done")
	}
	got := map[string]string{}
	for _, e := range m.Service().Audit() {
		got[e.Statement] = e.Code
	}
	for _, st := range []string{"CANCEL STATEMENT 999999", "TERMINATE SESSION 999998"} {
		if got[st] != sqlstate.UndefinedObject {
			t.Errorf("%s audited with %q, want 42704", st, got[st])
		}
	}
}

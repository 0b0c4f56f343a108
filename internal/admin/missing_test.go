package admin

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// stubFleet is a fleet of this instance, a, and b, whose sessions are
// the ids in has; a command forwarded to b finds nothing to act on.
type stubFleet struct{ has map[uint64]bool }

func (stubFleet) Name() string                               { return "a" }
func (stubFleet) Instances(context.Context) []fleet.Instance { return nil }
func (stubFleet) Tables(context.Context, []string) (map[string]views.Table, []string) {
	return nil, nil
}

func (f stubFleet) Forward(_ context.Context, instance string, id uint64, _ bool) (fleet.SessionAnswer, error) {
	if instance != "b" {
		return fleet.SessionAnswer{}, fleet.ErrUnknownInstance
	}
	return fleet.SessionAnswer{Instance: instance, Session: id, Missing: !f.has[id]}, nil
}

// TestSessionFunctionMissingWarns: pg_cancel_backend and
// pg_terminate_backend of an id that names no session answer f with a
// WARNING (SQLSTATE 01000) naming the id, as PostgreSQL's do for a pid
// that is no backend, read here through pgx's OnNotice; of an id that
// names a session with nothing to act on, f without one. Whether the id
// names a session is asked of the instance that holds it: a command run
// on instance b warns as b answers, whatever this instance's own
// sessions are.
func TestSessionFunctionMissingWarns(t *testing.T) {
	// b holds session 1001, numbered as none here, and none numbered as
	// the one here.
	const onB = 1001
	c := startConsole(t, Options{AllowNoPassword: true, Fleet: stubFleet{has: map[uint64]bool{onB: true}}})
	local := c.reg.Open(session.Info{Route: "pg", Protocol: "postgres"}, time.Now())
	t.Cleanup(func() { local.Close(time.Now()) })
	if local.ID == onB {
		t.Fatalf("the local session is %d, as b's", local.ID)
	}

	var mu sync.Mutex
	var warned []*pgconn.Notice
	cfg, err := pgx.ParseConfig("postgres://admin@" + c.addr.String() + "/sluice?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		warned = append(warned, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := testenv.ConnectPGConfig(t, cfg)

	const missing = 999999
	cases := []struct {
		call string
		warn string // "" for none
	}{
		{fmt.Sprintf("pg_cancel_backend(%d)", missing), fmt.Sprintf("session %d is not a sluice session", missing)},
		{fmt.Sprintf("pg_terminate_backend(%d)", missing), fmt.Sprintf("session %d is not a sluice session", missing)},
		{fmt.Sprintf("pg_terminate_backend(%d)", local.ID), ""},
		{fmt.Sprintf("pg_cancel_backend(%d, 'a')", missing), fmt.Sprintf("session %d is not a sluice session on instance a", missing)},
		{fmt.Sprintf("pg_cancel_backend(%d, 'b')", local.ID), fmt.Sprintf("session %d is not a sluice session on instance b", local.ID)},
		{fmt.Sprintf("pg_terminate_backend(%d, 'b')", local.ID), fmt.Sprintf("session %d is not a sluice session on instance b", local.ID)},
		{fmt.Sprintf("pg_cancel_backend(%d, 'b')", onB), ""},
		{fmt.Sprintf("pg_terminate_backend(%d, 'b')", onB), ""},
	}
	for _, tc := range cases {
		t.Run(tc.call, func(t *testing.T) {
			mu.Lock()
			warned = nil
			mu.Unlock()
			var ok bool
			if err := conn.QueryRow(ctx, "SELECT "+tc.call).Scan(&ok); err != nil || ok {
				t.Fatalf("SELECT %s = %v, %v; want false", tc.call, ok, err)
			}
			mu.Lock()
			got := warned
			mu.Unlock()
			var warnings []string
			for _, n := range got {
				if n.Severity == "WARNING" {
					if n.Code != "01000" {
						t.Errorf("WARNING %q has SQLSTATE %s, want 01000", n.Message, n.Code)
					}
					warnings = append(warnings, n.Message)
				}
			}
			switch {
			case tc.warn == "" && len(warnings) != 0:
				t.Errorf("warnings %q, want none", warnings)
			case tc.warn != "" && (len(warnings) != 1 || warnings[0] != tc.warn):
				t.Errorf("warnings %q, want %q", warnings, tc.warn)
			}
		})
	}
}

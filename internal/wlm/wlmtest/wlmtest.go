// Package wlmtest builds a workload manager for the tests of the
// packages that read one (the HTTP API's metrics and dashboard): in
// virtual time, over a registry of its own, with an in-memory catalog,
// closed when the test ends. It holds no state of its own.
package wlmtest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm"
)

// Env is a Manager with the fake clock and the registry it was made
// with.
type Env struct {
	Clock    *clock.Fake // starts at 2026-01-01 00:00 UTC
	Registry *session.Registry
	Manager  *wlm.Manager
}

// New returns an Env whose catalog has had the console statements of
// ddl run on it ("" for none); any error fails the test.
func New(t testing.TB, ddl string) *Env {
	t.Helper()
	e := &Env{
		Clock:    clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Registry: session.NewRegistry(session.Options{}),
	}
	mgr, err := wlm.NewManager(wlm.ManagerOptions{Clock: e.Clock, Registry: e.Registry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	e.Manager = mgr
	if ddl != "" {
		if _, err := mgr.Service().Exec(context.Background(), ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	return e
}

// SetRoute adds route name; an error fails the test.
func (e *Env) SetRoute(t testing.TB, name string, r wlm.Route) {
	t.Helper()
	if err := e.Manager.Runtime().SetRoute(name, r); err != nil {
		t.Fatal(err)
	}
}

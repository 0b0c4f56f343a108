package wlm

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

func TestForwardUser(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "CREATE RESOURCE POOL p1; CREATE RESOURCE POOL \"P2\"")
	ctx := context.Background()
	steps := []struct {
		sql      string
		d        ddl.Dialect
		rest     string
		took     bool
		code     string // SQLSTATE of the error, "" for none
		user     string // user whose binding is checked after the step
		pool     string // that user's pool; "-" for no binding at all
		position int    // error position
	}{
		{"SELECT 1", ddl.PostgreSQL, "SELECT 1", false, "", "u1", "-", 0},
		{"CREATE USER u1 RESOURCE POOL 'p1' PASSWORD 'pw'", ddl.PostgreSQL, "CREATE USER u1 PASSWORD 'pw'", true, "", "u1", "p1", 0},
		// Again: the database decides whether the user exists, the
		// binding is simply replaced.
		{"CREATE USER u1 RESOURCE POOL P1", ddl.PostgreSQL, "CREATE USER u1", true, "", "u1", "p1", 0},
		{"ALTER USER u1 RESOURCE POOL \"P2\"", ddl.PostgreSQL, "ALTER USER u1", true, "", "u1", "P2", 0},
		{"ALTER USER u1 RESOURCE POOL default_pool", ddl.PostgreSQL, "ALTER USER u1", true, "", "u1", "", 0},
		{"ALTER USER u9 RESOURCE POOL 'nope' LOGIN", ddl.PostgreSQL, "", true, ddl.CodeUndefinedObject, "u9", "-", 29},
		{"ALTER USER U3 RESOURCE POOL 'p1' PASSWORD 'x'", ddl.MySQL, "ALTER USER U3 IDENTIFIED BY 'x'", true, "", "U3", "p1", 0},
	}
	for _, s := range steps {
		rest, took, err := m.ForwardUser(ctx, s.sql, s.d)
		var code string
		var pos int
		if err != nil {
			var e *ddl.Error
			if !errors.As(err, &e) {
				t.Fatalf("ForwardUser(%q) error %T, want *ddl.Error", s.sql, err)
			}
			code, pos = e.Code, e.Position
		}
		if rest != s.rest || took != s.took || code != s.code || pos != s.position {
			t.Fatalf("ForwardUser(%q) = %q, %v, %v; want %q, %v, %s at %d", s.sql, rest, took, err, s.rest, s.took, s.code, s.position)
		}
		u := m.Catalog().Users[s.user]
		switch {
		case s.pool == "-" && u != nil:
			t.Fatalf("after %q: user %s bound to %q, want no binding", s.sql, s.user, u.Pool)
		case s.pool != "-" && (u == nil || u.Pool != s.pool):
			t.Fatalf("after %q: user %s = %+v, want pool %q", s.sql, s.user, u, s.pool)
		}
	}
	if e := execErr(t, m, "DROP RESOURCE POOL p1"); e.Code != ddl.CodeDependentObjects {
		t.Fatalf("DROP of a pool a forwarded binding uses: %v", e)
	}
}

func TestBindUserPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	m := newTestManager(t, ManagerOptions{CatalogPath: path})
	mustExec(t, m, "CREATE RESOURCE POOL p1")
	v := m.Version()
	if err := m.BindUser(context.Background(), "u1", ddl.Value{Kind: ddl.String, Text: "p1"}); err != nil {
		t.Fatal(err)
	}
	if m.Version() == v {
		t.Fatal("Version did not move")
	}
	v = m.Version()
	if err := m.BindUser(context.Background(), "u1", ddl.Value{Kind: ddl.String, Text: "p1"}); err != nil || m.Version() != v {
		t.Fatalf("binding again: err %v, version %d -> %d; want no change", err, v, m.Version())
	}
	m.Close()
	again := newTestManager(t, ManagerOptions{CatalogPath: path})
	if u := again.Catalog().Users["u1"]; u == nil || u.Pool != "p1" {
		t.Fatalf("reloaded binding = %+v", u)
	}
	if b := again.Bind("any", "u1"); b.Pool != "p1" {
		t.Fatalf("Bind = %+v", b)
	}
}

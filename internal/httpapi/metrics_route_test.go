package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestRouteAndPoolMetrics sends statements through a real postgres
// route and reads the per-route and per-pool counters, the bounded user
// label and the catalog change counter from a real scrape.
func TestRouteAndPoolMetrics(t *testing.T) {
	url := testenv.PostgresURL(t)
	ensureRole(t, url)
	s := newStack(t, stackOptions{})
	s.must(t, 201, "POST", "/api/pools", map[string]any{"name": "mp"})
	s.must(t, 201, "POST", "/api/users", map[string]any{"name": lowUser, "resource_pool": "mp"})
	if code, _ := s.do(t, "POST", "/api/pools", map[string]any{"name": "mp"}); code != 409 {
		t.Fatalf("creating pool mp twice: status %d", code)
	}
	via := s.addPGRoute(t, url, "mr", "")

	// run sends n simple queries as user and returns the bytes of their
	// Query messages: a lower bound of what the route carried up.
	const query = "SELECT repeat('x', 1000)"
	run := func(connURL string, n int) float64 {
		t.Helper()
		ctx := context.Background()
		c, err := pgx.Connect(ctx, connURL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		for range n {
			if _, err := c.PgConn().Exec(ctx, query).ReadAll(); err != nil {
				t.Fatal(err)
			}
		}
		return float64(n * (1 + 4 + len(query) + 1))
	}
	const n = 20
	upBound := run(withUser(t, via, lowUser, lowPassword), n)
	testenv.Eventually(t, 5*time.Second, "the session to close", func() bool { return len(s.reg.Sessions()) == 0 })

	fams := s.scrape(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"sluice_route_bytes_total", map[string]string{"route": "mr", "direction": "up"}, upBound},
		{"sluice_route_bytes_total", map[string]string{"route": "mr", "direction": "down"}, n * 1000},
		{"sluice_pool_bytes_total", map[string]string{"pool": "mp", "direction": "up"}, upBound},
		{"sluice_pool_bytes_total", map[string]string{"pool": "mp", "direction": "down"}, n * 1000},
		{"sluice_route_statements_total", map[string]string{"route": "mr", "outcome": "ok"}, n},
		{"sluice_pool_statements_total", map[string]string{"pool": "mp", "outcome": "ok"}, n},
		{"sluice_statements_total", map[string]string{"route": "mr", "user": "other", "pool": "mp", "outcome": "ok"}, n},
		{"sluice_catalog_changes_total", map[string]string{"surface": "http", "outcome": "ok"}, 2},
		{"sluice_catalog_changes_total", map[string]string{"surface": "http", "outcome": "error"}, 1},
	} {
		if v := counterValue(fams, c.name, c.labels); v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
	if v := counterValue(fams, "sluice_catalog_changes_total", map[string]string{"surface": "http", "outcome": "error"}); v != 1 {
		t.Errorf("failed http changes counted %v, want 1", v)
	}
	if find(fams, "sluice_statements_total", map[string]string{"user": lowUser}) != nil {
		t.Errorf("metrics_user_labels 0 still labels user %s", lowUser)
	}

	// With room for one user, the first user seen keeps its name and the
	// next is "other".
	s.must(t, 200, "PATCH", "/api/settings/metrics_user_labels", map[string]any{"value": 1})
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	run(withUser(t, via, lowUser, lowPassword), 3)
	run(via, 2)
	fams = s.scrape(t)
	if v := counterValue(fams, "sluice_statements_total", map[string]string{"route": "mr", "user": lowUser, "outcome": "ok"}); v != 3 {
		t.Errorf("statements of %s under its own label: %v, want 3", lowUser, v)
	}
	if find(fams, "sluice_statements_total", map[string]string{"user": cfg.User}) != nil {
		t.Errorf("user %s has a label of its own beyond metrics_user_labels 1", cfg.User)
	}
	if v := counterValue(fams, "sluice_route_statements_total", map[string]string{"route": "mr", "outcome": "ok"}); v < n+5 {
		t.Errorf("route statements %v, want at least %d", v, n+5)
	}
}

package stack_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm"
)

// startFleetStack starts the instance name as sluice serve does from a
// configuration file whose catalog is in etcd at prefix on eps: a
// console and an HTTP API on free loopback ports, an instance_ttl of
// 3 s. It is closed when the test ends.
func startFleetStack(t *testing.T, eps []string, prefix, name string) *stack.Stack {
	t.Helper()
	yaml := fmt.Sprintf(`catalog: etcd://%s%s
instance_name: %s
instance_ttl: 3s
admin:
  listen: 127.0.0.1:0
http:
  listen: 127.0.0.1:0
`, strings.Join(eps, ","), prefix, name)
	cfg, err := config.Parse(name+".yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Etcd == nil {
		t.Fatalf("%s: a catalog of %q gives no etcd configuration", name, cfg.Catalog)
	}
	return newStack(t, 15*time.Second, stack.Options{Config: cfg, Version: "test", Logger: testenv.Logger(0)})
}

// budgetRow is one row of SHOW BUDGET.
type budgetRow struct {
	instance, mode, etcd string
	rate, budget         int64
}

// showBudget reads SHOW BUDGET on the console c, by instance.
func showBudget(ctx context.Context, c *pgx.Conn) (map[string]budgetRow, error) {
	rs, err := c.Query(ctx, "SELECT instance, mode, rate, budget, etcd FROM budget")
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[string]budgetRow{}
	for rs.Next() {
		var r budgetRow
		if err := rs.Scan(&r.instance, &r.mode, &r.rate, &r.budget, &r.etcd); err != nil {
			return nil, err
		}
		out[r.instance] = r
	}
	return out, rs.Err()
}

// TestFleetBudgetAlone: one instance whose catalog is in etcd runs the
// shared budget with no call but stack.New; once the console sets
// cluster_low_priority_bandwidth, SHOW BUDGET shows it the allocator
// with a grant of the whole budget, its default link's Low class is
// held to it, and the metrics say so.
func TestFleetBudgetAlone(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	st := startFleetStack(t, eps, testenv.EtcdPrefix(t, eps), "solo")
	ctx := context.Background()
	console := testenv.ConnectPG(t, fmt.Sprintf("postgres://admin@%s/sluice?sslmode=disable", st.AdminAddr()))
	defer console.Close(ctx)
	if rows, err := showBudget(ctx, console); err != nil || rows["solo"].mode == "grant" {
		t.Fatalf("SHOW BUDGET before the budget is set: %v, %v; want no grant", rows, err)
	}
	if _, err := console.Exec(ctx, "SET cluster_low_priority_bandwidth = '8MB'"); err != nil {
		t.Fatal(err)
	}
	var row budgetRow
	testenv.Eventually(t, 20*time.Second, "a grant in SHOW BUDGET", func() bool {
		rows, err := showBudget(ctx, console)
		row = rows["solo"]
		return err == nil && row.mode == "grant" && row.rate > 0
	})
	if row.rate != 8_000_000 || row.budget != 8_000_000 || row.etcd != "ok" {
		t.Errorf("SHOW BUDGET: %+v; want a grant of the whole budget, 8000000, etcd ok", row)
	}
	if got := st.Manager().Runtime().Link(wlm.DefaultLink).Config().LowPriorityBandwidth; got != row.rate {
		t.Errorf("default link's Low class at %d, want the grant %d", got, row.rate)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+st.HTTPAddr().String()+"/metrics", nil)
	code, body := testenv.Fetch(t, req)
	for _, want := range []string{"sluice_budget_rate_bytes_per_second 8e+06", "sluice_budget_allocator 1", `sluice_budget_mode{mode="grant"} 1`} {
		if code != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("metrics (%d) lack %q", code, want)
		}
	}
}

// TestFleetBudgetTwoInstances: two instances started from
// configurations naming one etcd catalog share the budget with no
// extra call. The pool and cluster_low_priority_bandwidth are set once,
// on a; b applies them from the catalog. With bulk low-priority COPY
// sessions from the shared PostgreSQL through both, both get a grant,
// SHOW BUDGET on either lists both, and the sum of the grants (and of
// the rates the links are held to) is within the budget.
func TestFleetBudgetTwoInstances(t *testing.T) {
	testenv.SkipShort(t, "takes 4s here")
	const budget = 4_000_000
	eps := testenv.EtcdEndpoints(t)
	prefix := testenv.EtcdPrefix(t, eps)
	pg := testenv.PostgresConfig(t)
	a := startFleetStack(t, eps, prefix, "a")
	b := startFleetStack(t, eps, prefix, "b")
	ctx := context.Background()
	ca := testenv.ConnectPG(t, fmt.Sprintf("postgres://admin@%s/sluice?sslmode=disable", a.AdminAddr()))
	defer ca.Close(ctx)
	cb := testenv.ConnectPG(t, fmt.Sprintf("postgres://admin@%s/sluice?sslmode=disable", b.AdminAddr()))
	defer cb.Close(ctx)
	for _, q := range []string{
		"CREATE RESOURCE POOL fleetbudget_low WITH (network_priority=low)",
		fmt.Sprintf("SET cluster_low_priority_bandwidth = '%d'", budget),
	} {
		if _, err := ca.Exec(ctx, q); err != nil {
			t.Fatalf("a: %s: %v", q, err)
		}
	}
	rev := a.Manager().Service().AppliedRevision()
	testenv.Eventually(t, 10*time.Second, "b applies a's catalog", func() bool { return b.Manager().Service().AppliedRevision() >= rev })
	if got := b.Manager().Service().Catalog().Settings.ClusterLowPriorityBandwidth; got != budget {
		t.Fatalf("b's cluster_low_priority_bandwidth is %d, want %d", got, budget)
	}

	upstream := testenv.PostgresAddr(t)
	bctx, stopBulk := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopBulk(); wg.Wait() }()
	errs := make(chan error, 4)
	for _, in := range []struct {
		name string
		st   *stack.Stack
	}{{"a", a}, {"b", b}} {
		addr, err := in.st.AddRoute(stack.Route{Route: config.Route{Name: "pg", Listen: "127.0.0.1:0", Upstream: upstream, Protocol: "postgres"}, Pool: "fleetbudget_low"})
		if err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		url := "postgres://" + pg.User + ":" + pg.Password + "@" + addr.String() + "/" + pg.Database + "?sslmode=disable"
		for range 2 {
			c := testenv.ConnectPG(t, url)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close(context.Background())
				// Rows streamed as they are made (a set-returning
				// function in the select list), far more than the
				// budget lets through before the test ends.
				_, err := c.PgConn().CopyTo(bctx, io.Discard, "COPY (SELECT generate_series(1, 100000000), repeat('x', 8000)) TO STDOUT")
				if err != nil && bctx.Err() == nil && !errors.Is(err, context.Canceled) {
					errs <- fmt.Errorf("%s: bulk COPY: %w", in.name, err)
				}
			}()
		}
	}

	consoles := map[string]*pgx.Conn{"a": ca, "b": cb}
	views := map[string]map[string]budgetRow{}
	read := func() {
		for name, c := range consoles {
			rows, err := showBudget(ctx, c)
			if err != nil {
				t.Fatalf("SHOW BUDGET on %s: %v", name, err)
			}
			views[name] = rows
		}
	}
	testenv.Eventually(t, 30*time.Second, "grants for a and b in SHOW BUDGET on both", func() bool {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		read()
		for _, rows := range views {
			for _, in := range []string{"a", "b"} {
				if r := rows[in]; r.mode != "grant" || r.rate <= 0 {
					return false
				}
			}
		}
		return true
	})
	// What the links are held to is the budget's invariant at every
	// instant: sampled over a few grant rounds, the two never add up to
	// more than the budget.
	for range 40 {
		held := a.Manager().Runtime().Link(wlm.DefaultLink).Config().LowPriorityBandwidth + b.Manager().Runtime().Link(wlm.DefaultLink).Config().LowPriorityBandwidth
		if held > budget {
			t.Fatalf("the links' Low classes are held to %d in all, over the budget %d", held, budget)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// SHOW BUDGET lists the other instance as of its last report (up to
	// a period old) beside this one as of now; once both consoles agree
	// on each instance's rate, the grants they list fit the budget.
	testenv.Eventually(t, 10*time.Second, "a and b agree on the grants in SHOW BUDGET", func() bool {
		read()
		return views["a"]["a"].rate == views["b"]["a"].rate && views["a"]["b"].rate == views["b"]["b"].rate
	})
	for name, rows := range views {
		if len(rows) != 2 {
			t.Errorf("SHOW BUDGET on %s lists %v, want a and b", name, rows)
		}
		if sum := rows["a"].rate + rows["b"].rate; sum > budget || rows["a"].budget != budget {
			t.Errorf("SHOW BUDGET on %s: grants %d + %d = %d of a budget of %d, want at most %d", name, rows["a"].rate, rows["b"].rate, sum, rows["a"].budget, budget)
		}
	}
	select {
	case err := <-errs:
		t.Error(err)
	default:
	}
}

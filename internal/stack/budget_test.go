package stack_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestStartBudget runs the shared budget of one stack on the shared etcd
// cluster and reads it back through the admin console and the metrics.
func TestStartBudget(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	ecfg := etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(t, eps)}
	ctx := context.Background()
	cli, err := etcd.Dial(ctx, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cfg := &config.Config{Admin: config.Admin{Listen: "127.0.0.1:0"}, HTTP: config.HTTP{Listen: "127.0.0.1:0"}}
	st, err := stack.New(ctx, stack.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.StartBudget(stack.BudgetOptions{Client: cli, Key: ecfg.Key, Name: "solo"}); err != nil {
		t.Fatal(err)
	}
	console := testenv.ConnectPG(t, fmt.Sprintf("postgres://admin@%s/sluice?sslmode=disable", st.AdminAddr()))
	defer console.Close(ctx)
	if _, err := console.Exec(ctx, "SET cluster_low_priority_bandwidth = '8MB'"); err != nil {
		t.Fatal(err)
	}
	var mode, etcdState string
	var rate, budget int64
	testenv.Eventually(t, 20*time.Second, "a grant of the whole budget in SHOW BUDGET", func() bool {
		row := console.QueryRow(ctx, "SELECT mode, rate, budget, etcd FROM budget WHERE instance = 'solo'")
		if err := row.Scan(&mode, &rate, &budget, &etcdState); err != nil {
			return false
		}
		return mode == "grant" && rate == 8_000_000
	})
	if budget != 8_000_000 || etcdState != "ok" {
		t.Errorf("SHOW BUDGET: budget %d, etcd %q", budget, etcdState)
	}
	if got := st.Manager().Link("default").Config().LowPriorityBandwidth; got != 8_000_000 {
		t.Errorf("default link's Low class at %d, want the grant", got)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+st.HTTPAddr().String()+"/metrics", nil)
	code, body := testenv.Fetch(t, req)
	for _, want := range []string{"sluice_budget_rate_bytes_per_second 8e+06", "sluice_budget_allocator 1", `sluice_budget_mode{mode="grant"} 1`} {
		if code != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("metrics (%d) lack %q", code, want)
		}
	}
}

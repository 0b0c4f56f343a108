package budget

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm"
)

// member is one in-process instance for the etcd tests: a workload
// manager whose default link carries bulk Low-class traffic, its own
// etcd client and lease (closing the client is the instance's crash:
// the lease is not revoked, it expires) and a Budget.
type member struct {
	name   string
	lease  clientv3.LeaseID
	mgr    *wlm.Manager
	cli    *clientv3.Client
	b      *Budget
	cancel context.CancelFunc
	done   chan struct{}
}

// testBudget is the fleet's Low-class budget in the tests, in bytes/s.
const testBudget = 20_000_000

// etcdConfig is a client configuration for the test etcd cluster under
// a prefix of this test's own, removed when the test ends.
func etcdConfig(t *testing.T) etcd.Config {
	t.Helper()
	eps := testenv.EtcdEndpoints(t)
	return etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(t, eps)}
}

func startMember(t *testing.T, cfg etcd.Config, name string, budget int64) *member {
	t.Helper()
	mgr, err := wlm.NewManager(wlm.ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cli, err := etcd.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()
	b, err := New(Options{Client: cli, Key: cfg.Key, Name: name, Lease: lease.ID, Links: mgr.Runtime(),
		Budget: func() int64 { return budget }, GrantTTL: 3 * time.Second, Logger: testenv.Logger(slog.LevelInfo).With("instance", name)})
	if err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, lease: lease.ID, mgr: mgr, cli: cli, b: b, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		b.Run(ctx)
	}()
	// bulk Low-class traffic on the default link, down
	for range 2 {
		f := mgr.Runtime().Link(wlm.DefaultLink).Flow(link.Down, "bulk")
		go func() {
			defer f.Close()
			for {
				if _, err := f.Send(ctx, 16<<10, link.Low); err != nil {
					return
				}
			}
		}()
	}
	t.Cleanup(m.kill)
	return m
}

// kill ends the instance as a crash would: no resignation, no revoke;
// its lease expires in etcd.
func (m *member) kill() {
	m.cli.Close()
	m.cancel()
	<-m.done
}

// cap is the Low-class rate the member's default link runs at.
func (m *member) cap() int64 {
	return m.mgr.Runtime().Link(wlm.DefaultLink).Config().LowPriorityBandwidth
}

func TestBudgetFailover(t *testing.T) {
	testenv.SkipShort(t, "takes 6s here")
	cfg := etcdConfig(t)
	ctx := context.Background()
	watcher := testenv.DialEtcd(t, cfg)

	// Poll the grants throughout: their sum never exceeds the budget.
	var (
		mu     sync.Mutex
		maxSum int64
		polls  int
	)
	pctx, stop := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		prefix := cfg.Key("budget", "grant") + "/"
		for pctx.Err() == nil {
			resp, err := watcher.Get(pctx, prefix, clientv3.WithPrefix())
			if err == nil {
				var sum int64
				now := time.Now()
				for _, kv := range resp.Kvs {
					var g Grant
					if json.Unmarshal(kv.Value, &g) == nil && g.Valid(now) {
						sum += g.Rate
					}
				}
				mu.Lock()
				maxSum, polls = max(maxSum, sum), polls+1
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	a := startMember(t, cfg, "a", testBudget)
	testenv.Eventually(t, 20*time.Second, "a granted the whole budget", func() bool {
		return a.cap() == testBudget && a.b.State().Mode == ModeGrant
	})
	b := startMember(t, cfg, "b", testBudget)
	half := func(m *member) func() bool {
		return func() bool { c := m.cap(); return c >= testBudget/2-1 && c <= testBudget/2+1 }
	}
	testenv.Eventually(t, 20*time.Second, "a at half the budget", half(a))
	testenv.Eventually(t, 20*time.Second, "b at half the budget", half(b))

	leader, other := a, b
	if b.b.State().Allocator {
		leader, other = b, a
	}
	if !leader.b.State().Allocator || other.b.State().Allocator {
		t.Fatalf("allocator: a %v, b %v", a.b.State().Allocator, b.b.State().Allocator)
	}
	st := other.b.State()
	if st.Live != 2 || len(st.Peers) != 2 || st.Want != testBudget {
		t.Errorf("state of %s: %+v", other.name, st)
	}
	leader.kill()
	testenv.Eventually(t, 20*time.Second, other.name+" elected allocator", func() bool { return other.b.State().Allocator })
	testenv.Eventually(t, 20*time.Second, other.name+" granted the whole budget", func() bool { return other.cap() == testBudget })
	stop()
	pwg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if polls == 0 {
		t.Fatal("no grant listing succeeded")
	}
	if maxSum > testBudget {
		t.Errorf("grants summed to %d at one reading, over the budget %d", maxSum, testBudget)
	}
	t.Logf("%d readings of the grants, largest sum %d", polls, maxSum)
}

func TestBudgetFailStatic(t *testing.T) {
	testenv.SkipShort(t, "takes 10s here")
	c := testenv.StartEtcdCluster(t, 1)
	if c == nil {
		return
	}
	cfg := etcd.Config{Endpoints: c.Endpoints(), Prefix: "/failstatic"}
	ctx := context.Background()
	cli := testenv.DialEtcd(t, cfg)
	// A second instance that wants little, so the equal share differs
	// from a's grant: grants a 15, ghost 5; the fallback is 20/2.
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(Report{Demand: Demand{Want: 5_000_000}, Mode: ModeGrant})
	if _, err := cli.Put(ctx, cfg.Key("budget", "demand", "ghost"), string(v), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	a := startMember(t, cfg, "a", testBudget)
	testenv.Eventually(t, 20*time.Second, "a granted 15 MB/s", func() bool {
		st := a.b.State()
		return st.Mode == ModeGrant && a.cap() == 15_000_000 && st.Live == 2
	})
	c.Stop(0)
	testenv.Eventually(t, 20*time.Second, "a unreachable", func() bool { return !a.b.State().Unreachable.IsZero() })
	if st := a.b.State(); st.Mode == ModeGrant && a.cap() != 15_000_000 {
		t.Errorf("a before its grant expired: cap %d, state %+v", a.cap(), st)
	}
	testenv.Eventually(t, 20*time.Second, "a falls back to an equal share", func() bool {
		return a.b.State().Mode == ModeFallback && a.cap() == testBudget/2
	})
	c.Start(0)
	c.WaitHealthy(30 * time.Second)
	testenv.Eventually(t, 30*time.Second, "a granted again", func() bool {
		st := a.b.State()
		return st.Mode == ModeGrant && st.Unreachable.IsZero() && a.cap() == 15_000_000
	})
}

func TestBudgetOwnLeaseAfterExpiry(t *testing.T) {
	testenv.SkipShort(t, "takes 5s here")
	cfg := etcdConfig(t)
	ctx := context.Background()
	a := startMember(t, cfg, "a", testBudget)
	testenv.Eventually(t, 20*time.Second, "a granted", func() bool { return a.b.State().Mode == ModeGrant && a.cap() == testBudget })
	// The instance's lease goes (membership lost it): the demand key goes
	// with it and comes back under a lease of the budget's own.
	if _, err := a.cli.Revoke(ctx, a.lease); err != nil {
		t.Fatal(err)
	}
	key := cfg.Key("budget", "demand", "a")
	testenv.Eventually(t, 20*time.Second, "the demand under a new lease", func() bool {
		resp, err := a.cli.Get(ctx, key)
		return err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].Lease != 0 && clientv3.LeaseID(resp.Kvs[0].Lease) != a.lease
	})
	testenv.Eventually(t, 20*time.Second, "a allocator and granted again", func() bool {
		st := a.b.State()
		return st.Allocator && st.Mode == ModeGrant && a.cap() == testBudget
	})
}

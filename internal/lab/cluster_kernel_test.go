package lab

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestRunKernelCluster is `sluice lab --network kernel --backend
// postgres --experiment cluster` at a small scale: four servers in
// namespaces of their own, a sluice per node on a shared etcd catalog,
// the data nodes' answers crossing the router's tbf queue; then
// nothing is left: namespaces, servers' directories, keys in etcd.
func TestRunKernelCluster(t *testing.T) {
	if !needFDW(t, "40s") {
		return
	}
	eps, prefix := kernelClusterEtcd(t)
	if eps == nil {
		return
	}
	out := t.TempDir()
	tmp := privateTmp(t)
	plan := Plan{Name: "tiny", Cluster: ClusterPlan{Kernel: KernelClusterPlan{Ns: []int{0, 3}, Reps: 3, Settle: 500 * time.Millisecond, LowRows: 1500, HighRows: 300}}}
	o := Options{Backend: BackendPostgres, Plan: plan, Out: out, Logger: testLogger(),
		Network: NetworkKernel, NetRate: 100e6 / 8, NetQueue: 100 * time.Millisecond, Etcd: etcd.Scheme + strings.Join(eps, ",") + prefix}
	rep, progress := runProgress(t, 4*time.Minute, o)
	checkNoNamespaces(t)
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
	cli := testenv.DialEtcd(t, etcd.Config{Endpoints: eps})
	if res, err := cli.Get(context.Background(), prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || res.Count != 0 {
		t.Errorf("keys left under %s: %v, %v", prefix, res, err)
	}

	k := rep.KernelCluster
	if k == nil || k.Skipped != "" || rep.Cluster != nil {
		t.Fatalf("kernel cluster report %+v, emulated %v", k, rep.Cluster != nil)
	}
	// One high-priority join moves wt3's wide columns, 8000 bytes a
	// row, from the data nodes to the coordinator: through the queue.
	oneJoin := int64(k.HighRows) * 8000
	for _, set := range kernelSettings() {
		for _, n := range []int{0, 3} {
			r := kernelRow(k.Rows, set, n)
			if r == nil {
				t.Fatalf("no point for %s at N=%d: %+v", set, n, k.Rows)
			}
			if r.QdiscBytes < int64(k.Reps)*oneJoin {
				t.Errorf("%s, N=%d: the router's queue sent %d bytes while %d joins of %d bytes were measured", set, n, r.QdiscBytes, k.Reps, oneJoin)
			}
		}
		if r := kernelRow(k.Rows, set, 3); r.BulkMBps <= 0 && set != SettingOn {
			t.Errorf("%s, N=3: the low-priority joins moved nothing while measured", set)
		}
	}
	off, capa, on := kernelRow(k.Rows, SettingOff, 3), kernelRow(k.Rows, SettingCapacity, 3), kernelRow(k.Rows, SettingOn, 3)
	t.Logf("slowdown at N=3: off %.2fx, on %.2fx, capacity %.2fx", off.Slowdown, on.Slowdown, capa.Slowdown)
	if off.Slowdown <= capa.Slowdown {
		t.Errorf("slowdown at N=3: off %.2fx, with capacity %.2fx; want off > capacity", off.Slowdown, capa.Slowdown)
	}
	for _, want := range []string{"== Experiment 5: cluster, kernel network ==", "a sluice per node, a fleet on the catalog " + etcd.Scheme,
		"off, N=3: high-priority join", "capacity, N=3: high-priority join", "network removed", "low-priority joins N  off: elapsed (ms)"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
}

// kernelClusterEtcd checks this host can make the kernel cluster's
// network (needTestbed) and returns the endpoints of the test etcd and
// a key prefix of the test's own; nil endpoints when there is no etcd
// (testenv.EtcdEndpoints).
func kernelClusterEtcd(t *testing.T) (eps []string, prefix string) {
	t.Helper()
	needTestbed(t)
	if eps = testenv.EtcdEndpoints(t); eps == nil {
		return nil, ""
	}
	return eps, testenv.EtcdPrefix(t, eps)
}

// TestKernelClusterSkipped: on the embedded backend, or without etcd,
// the kernel cluster experiment says why it does not run.
func TestKernelClusterSkipped(t *testing.T) {
	e := &env{db: &database{kind: BackendEmbedded}}
	if why := kernelClusterSkip(e); !strings.Contains(why, "--backend postgres") {
		t.Errorf("embedded: %q", why)
	}
	e.db.kind = BackendPostgres
	if why := kernelClusterSkip(e); !strings.Contains(why, "--etcd") {
		t.Errorf("no etcd: %q", why)
	}
	e.etcd = &etcd.Config{Endpoints: []string{"127.0.0.1:2379"}}
	if why := kernelClusterSkip(e); why != "" {
		t.Errorf("postgres with etcd: %q", why)
	}
}

// TestRunKernelClusterCancelled: a kernel cluster run interrupted while
// its low-priority joins load the port stops the servers and removes
// the namespaces and the run's keys in etcd.
func TestRunKernelClusterCancelled(t *testing.T) {
	if _, ok := needPostgres(t, "25s"); !ok {
		return
	}
	eps, prefix := kernelClusterEtcd(t)
	if eps == nil {
		return
	}
	tmp := privateTmp(t)
	plan := Plan{Name: "tiny", Cluster: ClusterPlan{Kernel: KernelClusterPlan{Ns: []int{0, 2}, Reps: 2, LowRows: 1500, HighRows: 300}}}
	o := Options{Backend: BackendPostgres, Plan: plan, Logger: testLogger(), Network: NetworkKernel, Etcd: etcd.Scheme + strings.Join(eps, ",") + prefix}
	cli := testenv.DialEtcd(t, etcd.Config{Endpoints: eps})
	keys := func() int64 {
		res, err := cli.Get(context.Background(), prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return res.Count
	}
	progress, err := cancelRun(t, o, "off, N=2: started 2 low-priority joins", 3*time.Minute, time.Minute, func() {
		if keys() == 0 {
			t.Error("no catalog keys in etcd while running")
		}
	})
	if err == nil {
		t.Fatal("cancelled Run returned no error")
	}
	if !strings.Contains(progress, "network removed") {
		t.Errorf("no removal after cancel:\n%s", progress)
	}
	checkNoNamespaces(t)
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
	if n := keys(); n != 0 {
		t.Errorf("%d keys left under %s", n, prefix)
	}
}

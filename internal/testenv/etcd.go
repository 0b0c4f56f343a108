package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicelab/sluice/internal/etcd"
)

// DefaultEtcd is the shared cluster's client addresses, as scripts/testdb
// sets it up.
const DefaultEtcd = "127.0.0.1:12379,127.0.0.1:12389,127.0.0.1:12399"

// EtcdEndpoints returns the client addresses (host:port) of the shared
// test cluster (SLUICE_TEST_ETCD, comma-separated, with or without
// http://) after checking that it answers. Tests share the cluster:
// each keeps its keys under a prefix of its own (EtcdPrefix).
func EtcdEndpoints(t testing.TB) []string {
	t.Helper()
	s := os.Getenv("SLUICE_TEST_ETCD")
	if s == "" {
		s = DefaultEtcd
	}
	var eps []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimPrefix(strings.TrimSpace(e), "http://"); e != "" {
			eps = append(eps, e)
		}
	}
	if err := etcdHealthy(eps); err != nil {
		Missing(t, "etcd at %s: %v (run scripts/testdb start)", s, err)
		return nil
	}
	return eps
}

// EtcdPrefix returns a key prefix unique to this test ("/test/<name>-<ns>"),
// whose keys are deleted when the test ends.
func EtcdPrefix(t testing.TB, endpoints []string) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	p := fmt.Sprintf("/test/%s-%d", name, time.Now().UnixNano())
	t.Cleanup(func() {
		cli, err := etcdClient(endpoints)
		if err != nil {
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cli.Delete(ctx, p+"/", clientv3.WithPrefix())
	})
	return p
}

// DialEtcd connects a client with cfg (etcd.Dial), within 10 s; it
// closes when the test ends. A failure to connect fails t.
func DialEtcd(t testing.TB, cfg etcd.Config) *clientv3.Client {
	t.Helper()
	return openWithin(t, 10*time.Second,
		func(ctx context.Context) (*clientv3.Client, error) { return etcd.Dial(ctx, cfg) },
		func(cli *clientv3.Client) { cli.Close() })
}

func etcdClient(eps []string) (*clientv3.Client, error) {
	urls := make([]string, len(eps))
	for i, e := range eps {
		urls[i] = "http://" + e
	}
	return clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
}

// etcdHealthy reports whether a quorum of eps answers a linearizable read.
func etcdHealthy(eps []string) error {
	if len(eps) == 0 {
		return fmt.Errorf("no endpoint")
	}
	cli, err := etcdClient(eps)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "/health-check")
	return err
}

// EtcdCluster is an etcd cluster of one test's own (the etcd binary of
// Debian's etcd-server package, on free loopback ports, data in a
// temporary directory), for tests that stop and restart members. It is
// stopped when the test ends. Its methods are safe for concurrent use.
type EtcdCluster struct {
	t       testing.TB
	bin     string
	dir     string
	cluster string   // --initial-cluster
	client  []string // host:port per member
	peer    []string

	mu    sync.Mutex
	procs []*exec.Cmd // guarded by mu; nil for a stopped member
}

// StartEtcdCluster starts an n-member cluster and waits until it has a
// leader.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	bin := Program(t, "etcd")
	if bin == "" {
		return nil
	}
	c := &EtcdCluster{t: t, bin: bin, dir: t.TempDir(), procs: make([]*exec.Cmd, n)}
	var parts []string
	for i := range n {
		c.client = append(c.client, DeadAddr(t))
		c.peer = append(c.peer, DeadAddr(t))
		parts = append(parts, fmt.Sprintf("m%d=http://%s", i, c.peer[i]))
	}
	c.cluster = strings.Join(parts, ",")
	t.Cleanup(func() {
		for i := range n {
			c.Stop(i)
		}
	})
	for i := range n {
		c.Start(i)
	}
	if err := c.waitHealthy(c.client, 60*time.Second); err != nil {
		t.Fatalf("etcd cluster did not start: %v\n%s", err, c.logs())
	}
	return c
}

// Endpoints returns every member's client address, host:port.
func (c *EtcdCluster) Endpoints() []string { return append([]string(nil), c.client...) }

// Start starts member i (again, after Stop, with its data kept). It does
// not wait for the member to rejoin.
func (c *EtcdCluster) Start(i int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs[i] != nil {
		return
	}
	name := "m" + strconv.Itoa(i)
	state := "new"
	if _, err := os.Stat(filepath.Join(c.dir, name)); err == nil {
		state = "existing"
	}
	log, err := os.OpenFile(filepath.Join(c.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatalf("etcd log: %v", err)
	}
	cmd := exec.Command(c.bin, "--name", name, "--data-dir", filepath.Join(c.dir, name),
		"--listen-client-urls", "http://"+c.client[i], "--advertise-client-urls", "http://"+c.client[i],
		"--listen-peer-urls", "http://"+c.peer[i], "--initial-advertise-peer-urls", "http://"+c.peer[i],
		"--initial-cluster", c.cluster, "--initial-cluster-state", state,
		"--initial-cluster-token", "sluice-"+filepath.Base(c.dir), "--unsafe-no-fsync")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		c.t.Fatalf("start etcd member %d: %v", i, err)
	}
	log.Close()
	c.procs[i] = cmd
}

// Stop kills member i and waits for it to exit; a stopped member is a
// no-op.
func (c *EtcdCluster) Stop(i int) {
	c.mu.Lock()
	cmd := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// Wipe stops member i and removes its data directory, as a member
// restarted on an empty disk has lost it; Start then starts it anew.
func (c *EtcdCluster) Wipe(i int) {
	c.t.Helper()
	c.Stop(i)
	if err := os.RemoveAll(filepath.Join(c.dir, "m"+strconv.Itoa(i))); err != nil {
		c.t.Fatalf("wipe etcd member %d: %v", i, err)
	}
}

// WaitHealthy waits up to timeout for a quorum to answer a read through
// every running member.
func (c *EtcdCluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	var eps []string
	for i, p := range c.procs {
		if p != nil {
			eps = append(eps, c.client[i])
		}
	}
	c.mu.Unlock()
	if err := c.waitHealthy(eps, timeout); err != nil {
		c.t.Fatalf("etcd cluster not healthy: %v\n%s", err, c.logs())
	}
}

func (c *EtcdCluster) waitHealthy(eps []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		ok := true
		for _, e := range eps {
			if err = etcdHealthy([]string{e}); err != nil {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// logs returns the tail of every member's log, for a failure message.
func (c *EtcdCluster) logs() string {
	var b strings.Builder
	for i := range c.client {
		data, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("m%d.log", i)))
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- member %d ---\n%s\n", i, data)
	}
	return b.String()
}

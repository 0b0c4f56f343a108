package fleet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/testenv"
)

// running joins as name with record rec and runs the membership until
// the returned stop is called (or the test ends).
func running(t *testing.T, cli *clientv3.Client, c etcd.Config, rec func() Member, ttl time.Duration) (*Membership, func()) {
	t.Helper()
	m, err := Join(context.Background(), Options{Client: cli, Etcd: c, Self: rec, TTL: ttl, Refresh: 50 * time.Millisecond, Logger: testenv.Logger(0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return m, stop
}

func names(in []Instance) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.Name)
	}
	return out
}

func has(in []Instance, name string) (Instance, bool) {
	for _, i := range in {
		if i.Name == name {
			return i, true
		}
	}
	return Instance{}, false
}

// TestMembershipJoinWatchLeave: two instances see each other; a second
// one of a taken name is refused; a changed record reaches the other
// instance; one that stops leaves at once.
func TestMembershipJoinWatchLeave(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	c := etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(t, eps)}
	cli := testenv.DialEtcd(t, c)
	var rev atomic.Uint64
	_, stopA := running(t, cli, c, func() Member { return Member{Name: "a", HTTPAddr: "127.0.0.1:1", Revision: rev.Load()} }, 0)
	b, _ := running(t, cli, c, func() Member { return Member{Name: "b"} }, 0)
	testenv.Eventually(t, 5*time.Second, "b sees a and b", func() bool { return len(b.Members()) == 2 })
	if got := names(b.Members()); got[0] != "a" || got[1] != "b" {
		t.Fatalf("members = %v", got)
	}
	if ttls := b.TTLs(context.Background()); ttls["a"] <= 0 || ttls["a"] > DefaultTTL.Seconds() {
		t.Fatalf("TTLs = %v, want a's within (0, %v]", ttls, DefaultTTL.Seconds())
	}

	_, err := Join(context.Background(), Options{Client: cli, Etcd: c, Self: func() Member { return Member{Name: "a"} }})
	var taken *NameTakenError
	if !errors.As(err, &taken) || taken.Holder.HTTPAddr != "127.0.0.1:1" {
		t.Fatalf("second a: %v, want a NameTakenError naming the holder", err)
	}

	rev.Store(42)
	testenv.Eventually(t, 5*time.Second, "b sees a's new revision", func() bool {
		a, ok := has(b.Members(), "a")
		return ok && a.Revision == 42
	})

	stopA()
	testenv.Eventually(t, 5*time.Second, "a leaves at once", func() bool {
		_, ok := has(b.Members(), "a")
		return !ok
	})
}

// TestMembershipRegistersAgain: with etcd down longer than the lease's
// TTL the instance loses its lease; once etcd is back it registers
// again under a new lease, and the others see it.
func TestMembershipRegistersAgain(t *testing.T) {
	testenv.SkipShort(t, "takes 10s here")
	ec := testenv.StartEtcdCluster(t, 1)
	c := etcd.Config{Endpoints: ec.Endpoints(), Prefix: "/sluice"}
	cli := testenv.DialEtcd(t, c)
	m, _ := running(t, cli, c, func() Member { return Member{Name: "a"} }, 2*time.Second)
	first := m.Lease()
	if first == 0 {
		t.Fatal("no lease after Join")
	}
	ec.Stop(0)
	testenv.Eventually(t, 10*time.Second, "the lease is lost", func() bool { return m.Lease() == 0 })
	ec.Start(0)
	ec.WaitHealthy(30 * time.Second)
	testenv.Eventually(t, 20*time.Second, "registered again", func() bool { l := m.Lease(); return l != 0 && l != first })
	other := testenv.DialEtcd(t, c)
	resp, err := other.Get(context.Background(), c.Key("instances", "a"))
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != m.Lease() {
		t.Fatalf("record after registering again: %v %v, want it under lease %x", resp, err, m.Lease())
	}
	testenv.Eventually(t, 10*time.Second, "the watch lists a again", func() bool {
		_, ok := has(m.Members(), "a")
		return ok
	})
}

// TestMembershipRefusesGarbage: records written under the instances'
// prefix by hand or by a buggy peer, without a lease, or naming an
// instance other than their key, or not JSON, are refused (counted, and
// never shown as members), whether they are there when the watch lists
// the prefix or arrive while it watches.
func TestMembershipRefusesGarbage(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	c := etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(t, eps)}
	cli := testenv.DialEtcd(t, c)
	ctx := context.Background()
	prefix := c.Key("instances") + "/"
	if _, err := cli.Put(ctx, prefix+"early", `{"name":"early"}`); err != nil { // no lease
		t.Fatal(err)
	}
	b, _ := running(t, cli, c, func() Member { return Member{Name: "b"} }, 0)
	testenv.Eventually(t, 5*time.Second, "the listed garbage refused", func() bool { return b.Refused() >= 1 })
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range map[string]string{
		"nolease":  `{"name":"nolease"}`,
		"impostor": `{"name":"b"}`,
		"junk":     `not json`,
	} {
		opts := []clientv3.OpOption{clientv3.WithLease(lease.ID)}
		if key == "nolease" {
			opts = nil
		}
		if _, err := cli.Put(ctx, prefix+key, value, opts...); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 5*time.Second, "the watched garbage refused", func() bool { return b.Refused() >= 4 })
	if got := names(b.Members()); len(got) != 1 || got[0] != "b" {
		t.Fatalf("members %v, want b alone", got)
	}
}

package etcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/testenv"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, endpoints, prefix, err string
	}{
		{in: "etcd://h1:2379,h2:2380/fleet", endpoints: "h1:2379,h2:2380", prefix: "/fleet"},
		{in: "etcd://h1/a/b/", endpoints: "h1:2379", prefix: "/a/b"},
		{in: "etcd://h1:1", endpoints: "h1:1", prefix: "/sluice"},
		{in: "etcd://[::1]:2379,[::1]/p", endpoints: "[::1]:2379,[::1]:2379", prefix: "/p"},
		{in: "etcd:///p", err: "no etcd endpoint"},
		{in: "etcd://u:secret@h1/p", err: "credentials"},
		{in: "/var/lib/sluice/catalog.json", err: "not an etcd:// URL"},
	} {
		c, err := etcd.ParseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) = %v, want error with %q", tc.in, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ParseURL(%q) error shows the password: %v", tc.in, err)
			}
			continue
		}
		if err != nil || strings.Join(c.Endpoints, ",") != tc.endpoints || c.Prefix != tc.prefix {
			t.Errorf("ParseURL(%q) = %v %q, %v; want %s %s", tc.in, c.Endpoints, c.Prefix, err, tc.endpoints, tc.prefix)
		}
	}
}

func TestKeyAndString(t *testing.T) {
	c := etcd.Config{Endpoints: []string{"a:1", "b:2"}, Password: "hunter2"}
	if got := c.Key("instances", "x"); got != "/sluice/instances/x" {
		t.Errorf("Key = %q", got)
	}
	if s := c.String(); s != "etcd://a:1,b:2/sluice" {
		t.Errorf("String = %q", s)
	}
}

// TestDial connects to the shared test cluster and writes and reads a key.
func TestDial(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	prefix := testenv.EtcdPrefix(t, eps)
	ctx := context.Background()
	cli, err := etcd.Dial(ctx, etcd.Config{Endpoints: eps, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, prefix+"/k", "v"); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Get(ctx, prefix+"/k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get = %v, %v", r, err)
	}
}

// TestDialDead fails within the timeout when no member answers.
func TestDialDead(t *testing.T) {
	addr := testenv.DeadAddr(t)
	_, err := etcd.Dial(context.Background(), etcd.Config{Endpoints: []string{addr}, DialTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("Dial of a dead address succeeded")
	}
}

// TestPrivateCluster stops a member of a three-member cluster (quorum
// stays), then a second (no quorum: writes fail), then restarts them.
func TestPrivateCluster(t *testing.T) {
	testenv.SkipShort(t, "takes 4s here")
	c := testenv.StartEtcdCluster(t, 3)
	ctx := context.Background()
	cli, err := etcd.Dial(ctx, etcd.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "/k", "v")
		return err
	}
	c.Stop(0)
	// If member 0 led, the other two elect a leader first.
	testenv.Eventually(t, 30*time.Second, "a write with two of three members", func() bool { return put() == nil })
	c.Stop(1)
	if err := put(); err == nil {
		t.Fatal("put without quorum succeeded")
	}
	c.Start(0)
	c.Start(1)
	c.WaitHealthy(60 * time.Second)
	testenv.Eventually(t, 30*time.Second, "a write after the restart", func() bool { return put() == nil })
}

package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/store"
)

// etcdStore is a store under a prefix of the test's own on the shared
// cluster, with its client.
func etcdStore(t *testing.T) (*store.Etcd, *clientv3.Client) {
	t.Helper()
	eps := testenv.EtcdEndpoints(t)
	cfg := etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(t, eps)}
	cli := testenv.DialEtcd(t, cfg)
	return store.NewEtcd(cli, cfg.Key("catalog")), cli
}

// privateStore is a store on a one-member cluster of the test's own,
// for tests that compact the history (which the shared cluster's other
// users must not see).
func privateStore(t *testing.T) (*store.Etcd, *clientv3.Client) {
	t.Helper()
	cl := testenv.StartEtcdCluster(t, 1)
	if cl == nil {
		t.FailNow()
	}
	cfg := etcd.Config{Endpoints: cl.Endpoints(), Prefix: "/compact"}
	cli := testenv.DialEtcd(t, cfg)
	return store.NewEtcd(cli, cfg.Key("catalog")), cli
}

// withLink is a default catalog with one more link.
func withLink(name string) *catalog.Catalog {
	c := catalog.New()
	c.Links[name] = &catalog.LinkDef{}
	return c
}

// TestEtcdSaveLoad: a missing key loads as nothing at revision 0; each
// save conditioned on the revision read succeeds with the etcd revision
// of its put, which Load then returns with the catalog; a save on a
// revision that is no longer current is ErrConflict and changes nothing.
func TestEtcdSaveLoad(t *testing.T) {
	ctx := context.Background()
	s, cli := etcdStore(t)
	c, rev, err := s.Load(ctx)
	if err != nil || c != nil || rev != 0 {
		t.Fatalf("empty key: %v, %d, %v", c, rev, err)
	}
	r1, err := s.Save(ctx, withLink("one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cli.Get(ctx, s.Key())
	if err != nil || len(got.Kvs) != 1 || store.Revision(got.Kvs[0].ModRevision) != r1 {
		t.Fatalf("after save at %d: %+v, %v", r1, got, err)
	}
	r2, err := s.Save(ctx, withLink("two"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("second save: %d, %v", r2, err)
	}
	for _, stale := range []store.Revision{0, r1, r2 + 1000} {
		cur, err := s.Save(ctx, withLink("lost"), stale)
		if !errors.Is(err, store.ErrConflict) || cur != r2 {
			t.Errorf("save on revision %d: %d, %v; want %d, ErrConflict", stale, cur, err, r2)
		}
	}
	c, rev, err = s.Load(ctx)
	if err != nil || rev != r2 || c.Links["two"] == nil || c.Links["lost"] != nil {
		t.Fatalf("load: rev %d (want %d), links %v, %v", rev, r2, c.Links, err)
	}
	if _, err := cli.Put(ctx, s.Key(), "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(ctx); err == nil {
		t.Error("a value that is not a catalog loaded")
	}
}

// TestEtcdConcurrentSaves: writers that all read one revision race to
// save; exactly one wins.
func TestEtcdConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	s, _ := etcdStore(t)
	base, err := s.Save(ctx, catalog.New(), 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := string(rune('a' + i))
			_, err := s.Save(ctx, withLink(name), base)
			switch {
			case err == nil:
				mu.Lock()
				wins = append(wins, name)
				mu.Unlock()
			case !errors.Is(err, store.ErrConflict):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	c, _, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(wins) != 1 || c.Links[wins[0]] == nil || len(c.Links) != 2 {
		t.Fatalf("winners %v, stored links %v", wins, catalog.SortedKeys(c.Links))
	}
}

// follower records what Follow applies, like a Manager would.
type follower struct {
	mu      sync.Mutex
	rev     store.Revision
	applied []store.Revision
	stale   []time.Time
	ch      chan store.Revision
}

func newFollower(rev store.Revision) *follower {
	return &follower{rev: rev, ch: make(chan store.Revision, 1000)}
}

func (f *follower) AppliedRevision() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(f.rev)
}

func (f *follower) ApplyStored(c *catalog.Catalog, rev store.Revision) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c == nil || rev <= f.rev {
		return false
	}
	f.rev = rev
	f.applied = append(f.applied, rev)
	f.ch <- rev
	return true
}

// expect waits up to 30 s for the next applied revision and fails t
// unless it is want; what names the step in the failure.
func (f *follower) expect(t *testing.T, want store.Revision, what string) {
	t.Helper()
	select {
	case got := <-f.ch:
		if got != want {
			t.Fatalf("%s: applied %d, want %d", what, got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing applied, want %d", what, want)
	}
}

// save stores c over rev and returns the new revision, failing t on an
// error.
func save(ctx context.Context, t *testing.T, s *store.Etcd, c *catalog.Catalog, rev store.Revision) store.Revision {
	t.Helper()
	r, err := s.Save(ctx, c, rev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *follower) SetStale(since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stale = append(f.stale, since)
}

// TestEtcdFollow: a follower that starts behind gets every revision
// after its own, in order, once each, then each new save as it is made.
func TestEtcdFollow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := etcdStore(t)
	var revs []store.Revision
	rev := store.Revision(0)
	for i := range 6 {
		rev = save(ctx, t, s, withLink(string(rune('a'+i))), rev)
		revs = append(revs, rev)
	}
	f := newFollower(revs[1]) // has the first two
	done := make(chan error, 1)
	go func() { done <- s.Follow(ctx, f, clock.Real{}, testenv.Logger(0)) }()
	for i := range 4 {
		rev = save(ctx, t, s, withLink(string(rune('p'+i))), rev)
		revs = append(revs, rev)
	}
	want := revs[2:]
	deadline := time.After(30 * time.Second)
	for range want {
		select {
		case <-f.ch:
		case <-deadline:
			t.Fatalf("applied %v, want %v", f.applied, want)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow returned %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applied) != len(want) {
		t.Fatalf("applied %v, want %v", f.applied, want)
	}
	for i := range want {
		if f.applied[i] != want[i] {
			t.Fatalf("applied %v, want %v", f.applied, want)
		}
	}
	if len(f.stale) != 0 {
		t.Errorf("the shared cluster was reported stale: %v", f.stale)
	}
}

// TestEtcdFollowCompacted: a follower whose revision was compacted away
// loads the whole key instead, and goes on watching from there.
func TestEtcdFollowCompacted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, cli := privateStore(t)
	r1 := save(ctx, t, s, withLink("a"), 0)
	r2 := save(ctx, t, s, withLink("b"), r1)
	r3 := save(ctx, t, s, withLink("c"), r2)
	if _, err := cli.Compact(ctx, int64(r3)); err != nil {
		t.Fatal(err)
	}
	f := newFollower(r1)
	go s.Follow(ctx, f, clock.Real{}, testenv.Logger(0))
	f.expect(t, r3, "after compaction, the stored revision")
	r4 := save(ctx, t, s, withLink("d"), r3)
	f.expect(t, r4, "the save after the reload")
}

// TestEtcdAuth runs a private one-member cluster with authentication
// on: the root user's password opens the catalog; a wrong password fails
// to dial without showing it; a user with no role on the key is
// refused, and that refusal is not taken for an unreachable cluster.
func TestEtcdAuth(t *testing.T) {
	testenv.SkipShort(t, "starts an etcd cluster of its own with authentication on")
	cl := testenv.StartEtcdCluster(t, 1)
	if cl == nil {
		return
	}
	ctx := context.Background()
	admin, err := etcd.Dial(ctx, etcd.Config{Endpoints: cl.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "nobody", "nobodypw"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := etcd.Config{Endpoints: cl.Endpoints(), Prefix: "/auth", DialTimeout: 3 * time.Second}

	good := cfg
	good.Username, good.Password = "root", "rootpw"
	s := store.NewEtcd(testenv.DialEtcd(t, good), good.Key("catalog"))
	rev := save(ctx, t, s, withLink("authed"), 0)
	if c, got, err := s.Load(ctx); err != nil || got != rev || c.Links["authed"] == nil {
		t.Fatalf("load with credentials: %d, %v", got, err)
	}

	bad := cfg
	bad.Username, bad.Password = "root", "wrong-secret"
	if c, err := etcd.Dial(ctx, bad); err == nil {
		c.Close()
		t.Error("dial with a wrong password succeeded")
	} else if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("the error shows the password: %v", err)
	}

	none := cfg
	none.Username, none.Password = "nobody", "nobodypw"
	ns := store.NewEtcd(testenv.DialEtcd(t, none), none.Key("catalog"))
	_, err = ns.Save(ctx, withLink("x"), rev)
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("save without permission: %v", err)
	}
}

// counter counts the log records whose message starts with a prefix.
type counter struct {
	prefix string
	mu     sync.Mutex
	n      int // guarded by mu
}

func (c *counter) Enabled(context.Context, slog.Level) bool { return true }
func (c *counter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *counter) WithGroup(string) slog.Handler            { return c }
func (c *counter) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, c.prefix) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return nil
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestEtcdFollowCompactedUpToDate: a follower that already holds the
// stored catalog, whose next revision was compacted away (other keys
// moved the cluster's revision on), loads the key once and watches on
// from the revision of that read: later saves are applied from the
// watch, with no second load.
func TestEtcdFollowCompactedUpToDate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, cli := privateStore(t)
	r1 := save(ctx, t, s, withLink("a"), 0)
	var last int64
	for i := range 5 {
		resp, err := cli.Put(ctx, s.Key()+"-other", strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	f := newFollower(r1)
	loads := &counter{prefix: "catalog revisions compacted"}
	go s.Follow(ctx, f, clock.Real{}, slog.New(loads))
	testenv.Eventually(t, 30*time.Second, "the compaction seen", func() bool { return loads.count() >= 1 })
	rev := r1
	for i := range 3 {
		rev = save(ctx, t, s, withLink(string(rune('b'+i))), rev)
		f.expect(t, rev, fmt.Sprintf("save %d", i))
	}
	if n := loads.count(); n != 1 {
		t.Errorf("the whole key was loaded %d times, want once", n)
	}
}

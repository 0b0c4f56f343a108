package wlm

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/store"
)

// etcdManagers returns n managers sharing one catalog key on the shared
// cluster, each with a client and store of its own, and their stores.
func etcdManagers(t *testing.T, n int) ([]*Manager, []*store.Etcd) {
	t.Helper()
	eps := testenv.EtcdEndpoints(t)
	cfg := etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(t, eps)}
	var (
		ms []*Manager
		ss []*store.Etcd
	)
	for range n {
		s := store.NewEtcd(testenv.DialEtcd(t, cfg), cfg.Key("catalog"))
		ms = append(ms, newTestManager(t, ManagerOptions{Store: s, Clock: clock.Real{}}))
		ss = append(ss, s)
	}
	return ms, ss
}

// follow runs s.Follow for m until the test ends.
func follow(t *testing.T, m *Manager, s *store.Etcd) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Follow(ctx, m.Service(), clock.Real{}, testenv.Logger(0))
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitRevision waits until m applies rev.
func waitRevision(t *testing.T, m *Manager, rev uint64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "revision "+strconv.FormatUint(rev, 10)+" applied", func() bool { return m.Service().AppliedRevision() >= rev })
}

// TestEtcdConflictIs40001: B changes the catalog on a revision A has
// since replaced: B's statement fails with 40001 and changes nothing, B
// then holds A's catalog, and B's retry succeeds on top of A's change.
// The file store's behaviour (the statement is rerun) is
// TestStoreConflict's.
func TestEtcdConflictIs40001(t *testing.T) {
	ms, _ := etcdManagers(t, 2)
	a, b := ms[0], ms[1]
	if a.Service().AppliedRevision() == 0 || a.Service().AppliedRevision() != b.Service().AppliedRevision() {
		t.Fatalf("revisions at start: %d, %d", a.Service().AppliedRevision(), b.Service().AppliedRevision())
	}
	mustExec(t, a, "CREATE RESOURCE POOL rp WITH (weight = 2)")
	e := execErr(t, b, "CREATE LINK mine")
	if e.Code != sqlstate.SerializationFailure || !strings.Contains(e.Message, "could not serialize access") {
		t.Fatalf("B's change on a stale catalog: %v", e)
	}
	if b.Service().Catalog().Links["mine"] != nil || b.Service().Catalog().Pools["rp"] == nil || b.Service().AppliedRevision() != a.Service().AppliedRevision() {
		t.Fatalf("after 40001 B holds revision %d (A %d), pools %v, links %v", b.Service().AppliedRevision(), a.Service().AppliedRevision(), b.Service().Catalog().Pools, b.Service().Catalog().Links)
	}
	mustExec(t, b, "ALTER RESOURCE POOL rp WITH (weight = 7)")
	if got := b.Service().Catalog().Pools["rp"].Weight; got != 7 {
		t.Errorf("weight after B's retry: %d", got)
	}
}

// TestEtcdConcurrentAlter: A and B, each following the key, run ALTER
// RESOURCE POOL at the same moment. Each round, either one succeeds and
// the other fails with 40001 and the catalog holds the successful one,
// or (B already saw A's change) both succeed one after the other; no
// update is ever lost, both end on the same revision and catalog, and
// the conflict shows up at least once in the rounds.
func TestEtcdConcurrentAlter(t *testing.T) {
	ms, ss := etcdManagers(t, 2)
	for i, m := range ms {
		follow(t, m, ss[i])
	}
	a, b := ms[0], ms[1]
	mustExec(t, a, "CREATE RESOURCE POOL rp")
	waitRevision(t, b, a.Service().AppliedRevision())
	conflicts := 0
	for round := 0; round < 20 && conflicts < 3; round++ {
		wa, wb := 2*round+2, 2*round+3
		var (
			start  = make(chan struct{})
			wg     sync.WaitGroup
			errA   error
			errB   error
			before = a.Service().AppliedRevision()
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, errA = a.Service().Exec(context.Background(), "ALTER RESOURCE POOL rp WITH (weight = "+strconv.Itoa(wa)+")")
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errB = b.Service().Exec(context.Background(), "ALTER RESOURCE POOL rp WITH (weight = "+strconv.Itoa(wb)+")")
		}()
		close(start)
		wg.Wait()
		want := -1
		switch {
		case errA == nil && is40001(errB):
			want = wa
			conflicts++
		case errB == nil && is40001(errA):
			want = wb
			conflicts++
		case errA == nil && errB == nil:
		default:
			t.Fatalf("round %d: A %v, B %v", round, errA, errB)
		}
		testenv.Eventually(t, 30*time.Second, "A and B on one revision", func() bool {
			return a.Service().AppliedRevision() == b.Service().AppliedRevision() && a.Service().AppliedRevision() > before
		})
		ca, cb := a.Service().Catalog(), b.Service().Catalog()
		if !reflect.DeepEqual(ca, cb) {
			t.Fatalf("round %d: catalogs differ at revision %d:\nA %+v\nB %+v", round, a.Service().AppliedRevision(), ca.Pools["rp"], cb.Pools["rp"])
		}
		got := ca.Pools["rp"].Weight
		if want >= 0 && got != want {
			t.Fatalf("round %d: the catalog holds weight %d, want the successful %d", round, got, want)
		}
		if want < 0 && got != wa && got != wb {
			t.Fatalf("round %d: weight %d is neither %d nor %d", round, got, wa, wb)
		}
	}
	if conflicts == 0 {
		t.Error("no round produced a conflict")
	}
	t.Logf("%d conflicts", conflicts)
}

func is40001(err error) bool {
	var e *ddl.Error
	return errors.As(err, &e) && e.Code == sqlstate.SerializationFailure
}

// TestStaleRefusesChanges: while the store is reported unreachable,
// every change is refused with 58030 naming etcd and nothing changes;
// once it is reported back, changes go through again.
func TestStaleRefusesChanges(t *testing.T) {
	ms, _ := etcdManagers(t, 1)
	m := ms[0]
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.Service().SetStale(since)
	if !m.Service().StaleSince().Equal(since) {
		t.Fatalf("StaleSince %v", m.Service().StaleSince())
	}
	rev, v := m.Service().AppliedRevision(), m.Runtime().Version()
	for _, sql := range []string{"CREATE LINK l", "SET low_priority_bandwidth = '1MB'"} {
		e := execErr(t, m, sql)
		if e.Code != sqlstate.IOError || !strings.Contains(e.Message, "etcd") || !strings.Contains(e.Message, "read-only") {
			t.Errorf("%s while stale: %v", sql, e)
		}
	}
	if err := m.Service().Set(context.Background(), "low_priority_bandwidth", "1MB"); err == nil {
		t.Error("the configuration's SET went through while stale")
	}
	if m.Service().AppliedRevision() != rev || m.Runtime().Version() != v || m.Service().Catalog().Links["l"] != nil {
		t.Fatalf("a refused change changed the catalog")
	}
	m.Service().SetStale(time.Time{})
	mustExec(t, m, "CREATE LINK l")
	if m.Service().AppliedRevision() <= rev {
		t.Errorf("revision %d after the change, was %d", m.Service().AppliedRevision(), rev)
	}
}

// TestEtcdDataLoss: etcd restarted on an empty data directory restarts
// its revisions near 1 while the instances had applied far more. Each
// instance notices (its checks see etcd's revision below the applied
// one), counts it, reloads, and from then on applies the others'
// changes again, where a watch from the old revision would wait for
// ever.
func TestEtcdDataLoss(t *testing.T) {
	testenv.SkipShort(t, "wipes and restarts an etcd cluster of its own")
	cl := testenv.StartEtcdCluster(t, 1)
	cfg := etcd.Config{Endpoints: cl.Endpoints(), Prefix: "/sluice-dataloss"}
	var (
		ms []*Manager
		ss []*store.Etcd
	)
	for range 2 {
		s := store.NewEtcd(testenv.DialEtcd(t, cfg), cfg.Key("catalog"))
		s.CheckInterval = 100 * time.Millisecond
		ms = append(ms, newTestManager(t, ManagerOptions{Store: s, Clock: clock.Real{}}))
		ss = append(ss, s)
	}
	a, b := ms[0], ms[1]
	for i := range ms {
		follow(t, ms[i], ss[i])
	}
	// Enough revisions that the new cluster's stay below them.
	for i := range 40 {
		mustExec(t, a, "SET low_priority_bandwidth = '"+strconv.Itoa(i+1)+"MB'")
	}
	waitRevision(t, b, a.Service().AppliedRevision())
	before := b.Service().AppliedRevision()

	cl.Wipe(0)
	cl.Start(0)
	cl.WaitHealthy(60 * time.Second)
	testenv.Eventually(t, 30*time.Second, "both instances noticed etcd's reset", func() bool {
		return ss[0].Resets() >= 1 && ss[1].Resets() >= 1
	})
	if b.Service().AppliedRevision() >= before {
		t.Fatalf("b's applied revision %d after the reset, was %d: it still waits for the old history", b.Service().AppliedRevision(), before)
	}
	// a's next change reaches b.
	testenv.Eventually(t, 30*time.Second, "a's change after the reset", func() bool {
		_, err := a.Service().Exec(context.Background(), "CREATE LINK after_reset")
		return err == nil || strings.Contains(err.Error(), "already exists")
	})
	testenv.Eventually(t, 30*time.Second, "b applied a's change after the reset", func() bool {
		return b.Service().Catalog().Links["after_reset"] != nil
	})
	for i, s := range ss {
		if n := s.Resets(); n != 1 {
			t.Errorf("instance %d reset %d times for one loss of etcd's data", i, n)
		}
	}
}

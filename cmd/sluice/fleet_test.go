package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// fleetApp is one sluice of a fleet: a postgres route to its own
// upstream and an admin console, the catalog in etcd.
type fleetApp struct {
	*stack.Stack
	name, route, admin string
	applied            *appliedLog
}

// appliedLog records the revisions a sluice applied from etcd, in order,
// from its log's "catalog change applied" lines.
type appliedLog struct {
	slog.Handler
	mu   *sync.Mutex
	revs *[]uint64 // guarded by mu
}

func newAppliedLog(next slog.Handler) *appliedLog {
	return &appliedLog{Handler: next, mu: &sync.Mutex{}, revs: new([]uint64)}
}

func (h *appliedLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "catalog change applied" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "revision" {
				h.mu.Lock()
				*h.revs = append(*h.revs, a.Value.Uint64())
				h.mu.Unlock()
			}
			return true
		})
	}
	return h.Handler.Handle(ctx, r)
}

func (h *appliedLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.Handler.Enabled(ctx, l)
}

func (h *appliedLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &appliedLog{Handler: h.Handler.WithAttrs(as), mu: h.mu, revs: h.revs}
}

func (h *appliedLog) WithGroup(g string) slog.Handler {
	return &appliedLog{Handler: h.Handler.WithGroup(g), mu: h.mu, revs: h.revs}
}

// since returns the revisions applied after the first n.
func (h *appliedLog) since(n int) []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), (*h.revs)[n:]...)
}

func (h *appliedLog) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(*h.revs)
}

// startFleetApp starts sluice name in front of the PostgreSQL at pgURL
// with the catalog at the etcd URL catalog.
func startFleetApp(t *testing.T, name, catalog, pgURL string) *fleetApp {
	t.Helper()
	ec, err := etcd.ParseURL(catalog)
	if err != nil {
		t.Fatal(err)
	}
	fa := &fleetApp{name: name, route: freeAddr(t), admin: freeAddr(t)}
	c := &config.Config{
		Catalog: catalog, Etcd: &ec, Grace: time.Second,
		Admin: config.Admin{Listen: fa.admin, Password: "adminpw"},
		Routes: []config.Route{{Name: "pg", Listen: fa.route, Protocol: "postgres",
			Upstream: testenv.PostgresAddrOf(t, pgURL)}},
	}
	fa.applied = newAppliedLog(testenv.Logger(slog.LevelInfo).With("instance", name).Handler())
	fa.Stack = runAppLogging(t, c, slog.New(fa.applied))
	return fa
}

// psql runs sql through the real psql against the admin console.
func (fa *fleetApp) psql(t *testing.T, sql string) string {
	t.Helper()
	return psqlConsole(t, fa.admin, "on "+fa.name, sql)
}

// console opens a pgx connection to the admin console.
func (fa *fleetApp) console(t *testing.T) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), "postgres://admin:adminpw@"+fa.admin+"/sluice?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// exec runs sql on c and returns its error.
func execConsole(c *pgconn.PgConn, sql string) error {
	_, err := c.Exec(context.Background(), sql).ReadAll()
	return err
}

// detail is the detail of a PostgreSQL error, for failure messages.
func detail(err error) string { return testenv.PGError(err).Detail }

// waitSameRevision waits until every app applies the revision of the
// first.
func waitSameRevision(t *testing.T, apps ...*fleetApp) uint64 {
	t.Helper()
	want := apps[0].Manager().Service().AppliedRevision()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("every instance at revision %d", want), func() bool {
		for _, a := range apps {
			if a.Manager().Service().AppliedRevision() != want {
				return false
			}
		}
		return true
	})
	return want
}

// startPostgres starts n throwaway PostgreSQL servers at once.
func startPostgres(t *testing.T, n int) []*pgtemp.Server {
	t.Helper()
	srvs := make([]*pgtemp.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srvs[i], errs[i] = pgtemp.Start(context.Background(), pgtemp.Options{})
		}()
	}
	wg.Wait()
	for i, s := range srvs {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
		if errors.Is(errs[i], pgtemp.ErrNotInstalled) {
			testenv.Missing(t, "PostgreSQL server binaries: %v", errs[i])
			return nil
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	return srvs
}

// TestFleetCatalog is the fleet's acceptance test: three sluice
// instances A, B and C, each in front of a PostgreSQL of its own
// (throwaway servers of the installed binaries), share one catalog in
// the shared etcd cluster. The reference statements run once on A, in
// psql, are in force on B and C: SHOW POOLS and SHOW USERS there list
// them, and a session of user1 opened through B before they ran is bound
// to rp1 without reconnecting. Then A and B run ALTER RESOURCE POOL at
// the same moment, over pgx: when the two decided on one revision, one
// succeeds and the other fails with 40001, and every instance ends with
// the successful weight.
func TestFleetCatalog(t *testing.T) {
	testenv.SkipShort(t, "takes 8s here")
	eps := testenv.EtcdEndpoints(t)
	url := "etcd://" + strings.Join(eps, ",") + testenv.EtcdPrefix(t, eps)
	pgs := startPostgres(t, 3)
	var apps []*fleetApp
	for i, name := range []string{"A", "B", "C"} {
		ensureRole(t, pgs[i].URL(), "user1", "xxxxxxxx")
		apps = append(apps, startFleetApp(t, name, url, pgs[i].URL()))
	}
	a, b, c := apps[0], apps[1], apps[2]
	waitSameRevision(t, apps...)

	ctx := context.Background()
	sess := testenv.ConnectPG(t, "postgres://user1:xxxxxxxx@"+b.route+"/postgres?sslmode=disable")
	var port int
	if err := sess.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil {
		t.Fatal(err)
	}
	if want := pgs[1].URL(); !strings.Contains(want, ":"+strconv.Itoa(port)+"/") {
		t.Fatalf("B's session reached port %d, not B's own server %s", port, want)
	}

	a.psql(t, `CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty');
CREATE RESOURCE POOL rp1 WITH(EXCEPT_RULE='bandwidth_rule1');
CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';`)
	rev := waitSameRevision(t, apps...)
	for _, o := range []*fleetApp{b, c} {
		if out := o.psql(t, "SHOW POOLS"); !strings.Contains(out, "rp1") || !strings.Contains(out, "bandwidth_rule1") {
			t.Errorf("SHOW POOLS on %s at revision %d:\n%s", o.name, rev, out)
		}
		if out := o.psql(t, "SHOW USERS"); !lineHas(out, "user1", "rp1") {
			t.Errorf("SHOW USERS on %s:\n%s", o.name, out)
		}
		if got := o.Manager().Runtime().Bind("pg", "user1"); got.Pool != "rp1" {
			t.Errorf("binding of user1 on %s: %+v", o.name, got)
		}
	}
	if err := sess.QueryRow(ctx, "SELECT 1").Scan(new(int)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "B's open session re-bound to rp1", func() bool {
		res, err := b.Manager().Service().Exec(ctx, "SHOW SESSIONS")
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range res.Rows {
			if strings.Join(row, "|") != "" && row[2] == "user1" && row[4] == "rp1" {
				return true
			}
		}
		sess.QueryRow(ctx, "SELECT 1").Scan(new(int))
		return false
	})

	ca, cb := a.console(t), b.console(t)
	conflicts := 0
	for round := 0; round < 30 && conflicts == 0; round++ {
		wa, wb := 10+2*round, 11+2*round
		var errA, errB error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			errA = execConsole(ca, fmt.Sprintf("ALTER RESOURCE POOL rp1 WITH (weight = %d)", wa))
		}()
		go func() {
			defer wg.Done()
			<-start
			errB = execConsole(cb, fmt.Sprintf("ALTER RESOURCE POOL rp1 WITH (weight = %d)", wb))
		}()
		close(start)
		wg.Wait()
		want := 0
		switch {
		case errA == nil && pgCode(errB) == sqlstate.SerializationFailure:
			want = wa
		case errB == nil && pgCode(errA) == sqlstate.SerializationFailure:
			want = wb
		case errA == nil && errB == nil:
			// One saw the other's change before deciding: both apply in turn.
		default:
			t.Fatalf("round %d: A %v, B %v", round, errA, errB)
		}
		waitSameRevision(t, apps...)
		for _, o := range apps {
			got := o.Manager().Service().Catalog().Pools["rp1"].Weight
			if want != 0 && got != want || got != wa && got != wb {
				t.Fatalf("round %d: %s holds weight %d (A %d: %v, B %d: %v)", round, o.name, got, wa, errA, wb, errB)
			}
		}
		if want != 0 {
			conflicts++
			msg := fmt.Sprint(errA, errB)
			if !strings.Contains(msg, "could not serialize access: the catalog changed since it was read; retry") {
				t.Errorf("the 40001's message: %s", msg)
			}
			t.Logf("round %d: one OK, one 40001; the catalog holds weight %d", round, want)
		}
	}
	if conflicts == 0 {
		t.Error("no round of concurrent ALTERs produced a conflict")
	}
	if !reflect.DeepEqual(a.Manager().Service().Catalog(), c.Manager().Service().Catalog()) {
		t.Error("A's and C's catalogs differ")
	}
}

// lineHas reports whether a line of out holds every word.
func lineHas(out string, words ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestFleetCatalogFaults runs two instances A and B (before the shared
// PostgreSQL) on a private three-member etcd cluster and takes members
// away. With one member stopped, sessions and DDL go on. With two
// stopped (no quorum), B's open session still runs statements, both
// instances report StaleSince, and DDL is refused with 58030 naming etcd
// while the catalog stays as it was. Once the members are back, both
// become fresh again; ten changes made on A at once are each applied by
// B exactly once, in order, and B's catalog equals A's.
func TestFleetCatalogFaults(t *testing.T) {
	testenv.SkipShort(t, "takes 8s here")
	cl := testenv.StartEtcdCluster(t, 3)
	if cl == nil {
		return
	}
	url := "etcd://" + strings.Join(cl.Endpoints(), ",") + "/faults"
	pg := testenv.PostgresURL(t)
	a, b := startFleetApp(t, "A", url, pg), startFleetApp(t, "B", url, pg)
	ctx := context.Background()
	ensureRole(t, pg, "fleetfault_u", "pw")
	a.psql(t, "CREATE RESOURCE POOL rp1; CREATE USER fleetfault_u RESOURCE POOL rp1")
	waitSameRevision(t, a, b)
	sess := testenv.ConnectPG(t, "postgres://fleetfault_u:pw@"+b.route+"/sluice?sslmode=disable")
	query := func(when string) {
		t.Helper()
		var n int
		if err := sess.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 1000)").Scan(&n); err != nil || n != 1000 {
			t.Fatalf("B's session %s: %d, %v", when, n, err)
		}
	}
	query("before the faults")
	ca := a.console(t)

	cl.Stop(0)
	query("with one member stopped")
	if err := execConsole(ca, "ALTER RESOURCE POOL rp1 WITH (weight = 3)"); err != nil {
		t.Fatalf("DDL with one member stopped: %v (%s)", err, detail(err))
	}
	waitSameRevision(t, a, b)
	if !a.Manager().Service().StaleSince().IsZero() || !b.Manager().Service().StaleSince().IsZero() {
		t.Error("stale with a quorum")
	}

	cl.Stop(1)
	testenv.Eventually(t, 30*time.Second, "both instances stale", func() bool {
		return !a.Manager().Service().StaleSince().IsZero() && !b.Manager().Service().StaleSince().IsZero()
	})
	query("without quorum")
	rev := a.Manager().Service().AppliedRevision()
	err := execConsole(ca, "ALTER RESOURCE POOL rp1 WITH (weight = 4)")
	if pgCode(err) != sqlstate.IOError || !strings.Contains(err.Error(), "etcd") || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("DDL without quorum: %v", err)
	}
	if got := a.Manager().Service().Catalog().Pools["rp1"].Weight; got != 3 || a.Manager().Service().AppliedRevision() != rev {
		t.Fatalf("a refused change changed A: weight %d, revision %d (was %d)", got, a.Manager().Service().AppliedRevision(), rev)
	}
	if b.Manager().Runtime().Bind("pg", "fleetfault_u").Pool != "rp1" {
		t.Error("B lost its catalog without quorum")
	}
	t.Logf("stale since: A %v, B %v", a.Manager().Service().StaleSince(), b.Manager().Service().StaleSince())

	cl.Start(0)
	cl.Start(1)
	cl.WaitHealthy(60 * time.Second)
	testenv.Eventually(t, 30*time.Second, "both instances fresh", func() bool {
		return a.Manager().Service().StaleSince().IsZero() && b.Manager().Service().StaleSince().IsZero()
	})
	n := b.applied.count()
	var want []uint64
	for i := range 10 {
		if err := execConsole(ca, fmt.Sprintf("ALTER RESOURCE POOL rp1 WITH (weight = %d)", 10+i)); err != nil {
			t.Fatalf("change %d after quorum returned: %v (%s)", i, err, detail(err))
		}
		want = append(want, a.Manager().Service().AppliedRevision())
	}
	waitSameRevision(t, a, b)
	if got := b.applied.since(n); !reflect.DeepEqual(got, want) {
		t.Fatalf("B applied %v, want A's %v, each once", got, want)
	}
	if !reflect.DeepEqual(a.Manager().Service().Catalog(), b.Manager().Service().Catalog()) {
		t.Fatal("B's catalog differs from A's")
	}
	query("after the faults")
}

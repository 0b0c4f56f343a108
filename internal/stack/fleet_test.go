package stack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// fleetToken is the test fleet's token; each instance's API has a
// token of its own besides.
const fleetToken = "fleet-secret-token"

// fleetInstance is one in-process sluice of a test fleet.
type fleetInstance struct {
	name string
	st   *stack.Stack
}

// startInstance builds a sluice named name in the fleet whose catalog
// is in etcd at ecfg: a postgres route to the shared PostgreSQL, a
// console and an HTTP API on free loopback ports.
func startInstance(t testing.TB, ecfg etcd.Config, name string, ttl time.Duration) (*fleetInstance, error) {
	t.Helper()
	cfg := &config.Config{
		Catalog: "etcd://" + strings.Join(ecfg.Endpoints, ",") + ecfg.Prefix, Etcd: &ecfg,
		Admin: config.Admin{Listen: "127.0.0.1:0"},
		HTTP:  config.HTTP{Listen: "127.0.0.1:0", Token: "api-token-" + name},
		Fleet: config.Fleet{Name: name, Token: fleetToken, TTL: ttl, Timeout: time.Second},
		Routes: []config.Route{{Name: "pg", Listen: "127.0.0.1:0", Protocol: "postgres",
			Upstream: testenv.PostgresAddr(t)}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := stack.New(ctx, stack.Options{Config: cfg, Version: "test", Logger: testenv.Logger(0)})
	if err != nil {
		return nil, err
	}
	in := &fleetInstance{name: name, st: st}
	t.Cleanup(in.close)
	return in, nil
}

// startFleet starts an instance of each of names, in order, with the
// default instance_ttl, in the fleet whose catalog is in etcd at ecfg;
// an instance that fails to start fails t.
func startFleet(t testing.TB, ecfg etcd.Config, names ...string) []*fleetInstance {
	t.Helper()
	fl := make([]*fleetInstance, 0, len(names))
	for _, n := range names {
		in, err := startInstance(t, ecfg, n, 0)
		if err != nil {
			t.Fatalf("instance %s: %v", n, err)
		}
		fl = append(fl, in)
	}
	return fl
}

// close stops the instance.
func (in *fleetInstance) close() { in.st.Close() }

// routeURL is the URL of a session through the instance's route.
func (in *fleetInstance) routeURL(t testing.TB) string {
	pg := testenv.PostgresConfig(t)
	return "postgres://" + pg.User + ":" + pg.Password + "@" + in.st.Proxy().Routes()[0].Listen + "/" + pg.Database + "?sslmode=disable"
}

// notices collects the NoticeResponses of a console connection.
type notices struct {
	mu   sync.Mutex
	msgs []string
}

func (n *notices) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.msgs
	n.msgs = nil
	return out
}

// fleetConsole connects to in's console in the simple protocol and
// collects its notices.
func fleetConsole(t testing.TB, in *fleetInstance) (*pgx.Conn, *notices) {
	t.Helper()
	cc, err := pgx.ParseConfig("postgres://admin@" + in.st.AdminAddr().String() + "/sluice?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	n := &notices{}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cc.OnNotice = func(_ *pgconn.PgConn, m *pgconn.Notice) {
		n.mu.Lock()
		n.msgs = append(n.msgs, m.Message)
		n.mu.Unlock()
	}
	return testenv.ConnectPGConfig(t, cc), n
}

// rows runs q on c and returns its rows as maps of column to text.
func rows(t testing.TB, c *pgx.Conn, q string) []map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rs, err := c.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rs.Close()
	var out []map[string]string
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for i, fd := range rs.FieldDescriptions() {
			if vals[i] != nil {
				m[fd.Name] = toText(vals[i])
			}
		}
		out = append(out, m)
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func toText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// column returns the values of col in rs.
func column(rs []map[string]string, col string) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r[col])
	}
	return out
}

// instancesOf returns the instance names of SHOW INSTANCES on c.
func instancesOf(t *testing.T, c *pgx.Conn) []string {
	return column(rows(t, c, "SHOW INSTANCES"), "instance")
}

// TestFleetThreeInstances: three instances sharing a catalog in etcd
// see each other in SHOW INSTANCES and GET /api/instances, each at the
// catalog revision it applies; SHOW CLUSTER SESSIONS on one lists the
// sessions of all three; a fourth with a name in use is refused; CANCEL
// STATEMENT ... ON INSTANCE issued on a cancels a statement running
// through b (the client reads 57014) and b's audit trail names a; an
// instance whose HTTP API never answers is named in a NOTICE and its
// rows are missing; one that closes leaves at once; one that ended
// without leaving is named in a NOTICE until its lease expires.
func TestFleetThreeInstances(t *testing.T) {
	testenv.SkipShort(t, "takes 8s here")
	eps := testenv.EtcdEndpoints(t)
	ecfg := etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(t, eps)}
	tc := testenv.DialEtcd(t, ecfg)
	fl := startFleet(t, ecfg, "a", "b", "c")
	a, b, c := fl[0], fl[1], fl[2]
	ca, na := fleetConsole(t, a)
	testenv.Eventually(t, 10*time.Second, "a lists a, b and c", func() bool {
		return slices.Equal(instancesOf(t, ca), []string{"a", "b", "c"})
	})
	inst := rows(t, ca, "SHOW INSTANCES")
	for _, r := range inst {
		if r["version"] != "test" || r["http_addr"] == "" || r["admin_addr"] == "" || !strings.Contains(r["routes"], "pg postgres 127.0.0.1:") {
			t.Errorf("SHOW INSTANCES row %v: want version, addresses and the pg route", r)
		}
		if (r["self"] == "yes") != (r["instance"] == "a") {
			t.Errorf("SHOW INSTANCES row %v: only a is self", r)
		}
		if r["instance"] != "a" && r["lease_ttl_left"] == "" {
			t.Errorf("SHOW INSTANCES row %v: no lease TTL left", r)
		}
	}

	// A catalog change on a reaches every record's revision.
	if _, err := ca.Exec(context.Background(), "CREATE RESOURCE POOL fleet_rp WITH(weight=2)"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "every instance applies the new revision", func() bool {
		revs := column(rows(t, ca, "SHOW INSTANCES"), "catalog_revision")
		return len(revs) == 3 && revs[0] != "0" && revs[0] == revs[1] && revs[1] == revs[2]
	})

	// The same over HTTP, with the fleet's token.
	req, _ := http.NewRequest("GET", "http://"+b.st.HTTPAddr().String()+"/api/instances", nil)
	req.Header.Set("Authorization", "Bearer "+fleetToken)
	status, body := testenv.Fetch(t, req)
	var list []fleet.Instance
	if err := json.Unmarshal(body, &list); status != 200 || err != nil {
		t.Fatalf("GET /api/instances = %d %s (%v)", status, body, err)
	}
	if len(list) != 3 || !list[1].Self || list[1].Name != "b" {
		t.Fatalf("GET /api/instances on b = %s, want a, b (self), c", body)
	}

	// A second b is refused.
	if _, err := startInstance(t, ecfg, "b", 0); !errors.As(err, new(*fleet.NameTakenError)) {
		t.Fatalf("a second instance named b: %v, want a NameTakenError", err)
	}

	// One session through each instance; b's runs pg_sleep.
	for _, in := range fl {
		conn := testenv.ConnectPG(t, in.routeURL(t))
		if _, err := conn.Exec(context.Background(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	sleeper := testenv.ConnectPG(t, b.routeURL(t))
	slept := make(chan error, 1)
	sleep := fmt.Sprintf("SELECT pg_sleep(60), 'fleet-%d'", time.Now().UnixNano())
	go func() {
		_, err := sleeper.Exec(context.Background(), sleep)
		slept <- err
	}()
	// A CancelRequest that reaches PostgreSQL before the backend began
	// the query cancels nothing: wait until the server runs it.
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	testenv.Eventually(t, 10*time.Second, "PostgreSQL runs b's pg_sleep", func() bool {
		var n int
		err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1", sleep).Scan(&n)
		return err == nil && n == 1
	})
	var id string
	testenv.Eventually(t, 10*time.Second, "a sees b's pg_sleep", func() bool {
		rs := rows(t, ca, "SELECT session FROM cluster_statements WHERE instance = 'b' AND state = 'running' AND sql LIKE '%pg_sleep%'")
		if len(rs) == 1 {
			id = rs[0]["session"]
		}
		return id != ""
	})
	per := sessionsByInstance(t, ca)
	if per["a"] != 1 || per["b"] != 2 || per["c"] != 1 {
		t.Fatalf("SHOW CLUSTER SESSIONS on a: sessions by instance %v, want a 1, b 2, c 1", per)
	}
	if n := na.take(); len(n) != 0 {
		t.Fatalf("notices with every instance answering: %q", n)
	}
	// The GaussDB form has the instance column too.
	if rs := rows(t, ca, "SELECT instance, sessionid FROM pgxc_session_wlmstat WHERE status = 'active' AND query LIKE '%pg_sleep%'"); len(rs) != 1 || rs[0]["instance"] != "b" || rs[0]["sessionid"] != id {
		t.Fatalf("pgxc_session_wlmstat on a = %v, want b's session %s", rs, id)
	}

	// An unknown instance is 42704; then the cancel reaches b.
	if _, err := ca.Exec(context.Background(), "CANCEL STATEMENT "+id+" ON INSTANCE 'nope'"); pgCode(err) != "42704" {
		t.Fatalf("CANCEL ON INSTANCE 'nope' = %v, want 42704", err)
	}
	if _, err := ca.Exec(context.Background(), "CANCEL STATEMENT "+id+" ON INSTANCE 'b'"); err != nil {
		t.Fatalf("CANCEL STATEMENT %s ON INSTANCE 'b': %v", id, err)
	}
	select {
	case err := <-slept:
		if pgCode(err) != "57014" {
			t.Fatalf("pg_sleep on b ended with %v, want 57014", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("pg_sleep on b still runs after the cancel")
	}
	cb, _ := fleetConsole(t, b)
	audited := false
	for _, r := range rows(t, cb, "SHOW AUDIT") {
		if r["statement"] == "CANCEL STATEMENT "+id && r["surface"] == "http" && r["user"] == "instance:a" && r["outcome"] == "ok" {
			audited = true
		}
	}
	if !audited {
		t.Fatalf("b's audit trail has no CANCEL STATEMENT %s from instance a: %v", id, rows(t, cb, "SHOW AUDIT"))
	}
	// The function form ends the session on b (its client reads FATAL
	// 57P01, or a closed connection once pgx has seen it).
	if rs := rows(t, ca, "SELECT pg_terminate_backend("+id+", 'b')"); len(rs) != 1 || rs[0]["pg_terminate_backend"] != "true" {
		t.Fatalf("pg_terminate_backend(%s, 'b') on a = %v, want true", id, rs)
	}
	if _, err := sleeper.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("b's terminated session still answers")
	}
	testenv.Eventually(t, 10*time.Second, "b's session is gone", func() bool {
		return len(rows(t, ca, "SELECT 1 FROM cluster_sessions WHERE instance = 'b' AND id = "+id)) == 0
	})
	// b, not a, says whether it has the session: an id b no longer has
	// answers f with a WARNING naming b, b's idle session f without one,
	// whatever sessions a itself holds.
	na.take()
	if rs := rows(t, ca, "SELECT pg_cancel_backend("+id+", 'b') AS done"); len(rs) != 1 || rs[0]["done"] != "false" {
		t.Fatalf("pg_cancel_backend(%s, 'b') of an ended session = %v, want false", id, rs)
	}
	if n := na.take(); len(n) != 1 || n[0] != "session "+id+" is not a sluice session on instance b" {
		t.Fatalf("notices of pg_cancel_backend(%s, 'b') of an ended session: %q, want one WARNING naming b", id, n)
	}
	idle := rows(t, ca, "SELECT id FROM cluster_sessions WHERE instance = 'b'")
	if len(idle) != 1 {
		t.Fatalf("b's sessions after the terminate: %v, want one", idle)
	}
	if rs := rows(t, ca, "SELECT pg_cancel_backend("+idle[0]["id"]+", 'b') AS done"); len(rs) != 1 || rs[0]["done"] != "false" {
		t.Fatalf("pg_cancel_backend(%s, 'b') of b's idle session = %v, want false", idle[0]["id"], rs)
	}
	if n := na.take(); len(n) != 0 {
		t.Fatalf("notices of pg_cancel_backend(%s, 'b') of b's idle session: %q, want none", idle[0]["id"], n)
	}

	// d is registered but its HTTP API accepts and never answers.
	silent := testenv.Serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	registerRaw(t, tc, ecfg, fleet.Member{Name: "d", Version: "test", HTTPAddr: silent, StartedAt: time.Now()}, 30)
	testenv.Eventually(t, 10*time.Second, "a lists d", func() bool { return slices.Contains(instancesOf(t, ca), "d") })
	na.take()
	per = sessionsByInstance(t, ca)
	if n := na.take(); len(n) != 1 || !strings.Contains(n[0], "instance d did not answer") {
		t.Fatalf("notices with d silent: %q, want one naming d", n)
	}
	if per["a"] != 1 || per["b"] != 1 || per["c"] != 1 || per["d"] != 0 {
		t.Fatalf("sessions by instance with d silent: %v", per)
	}

	// c closes: it leaves at once (it revokes its lease).
	cHTTP := c.st.HTTPAddr().String()
	c.close()
	testenv.Eventually(t, 5*time.Second, "c leaves", func() bool { return !slices.Contains(instancesOf(t, ca), "c") })
	// A c that ended without leaving (its process killed) leaves its
	// record until its lease expires: a names it in a NOTICE.
	registerRaw(t, tc, ecfg, fleet.Member{Name: "c", Version: "test", HTTPAddr: cHTTP, StartedAt: time.Now()}, 3)
	testenv.Eventually(t, 5*time.Second, "a lists the dead c", func() bool { return slices.Contains(instancesOf(t, ca), "c") })
	na.take()
	per = sessionsByInstance(t, ca)
	n := na.take()
	if !slices.ContainsFunc(n, func(s string) bool { return strings.Contains(s, "instance c did not answer") }) || per["c"] != 0 || per["a"] != 1 || per["b"] != 1 {
		t.Fatalf("with c dead: notices %q, sessions %v; want c named and a's and b's sessions", n, per)
	}
	testenv.Eventually(t, 15*time.Second, "the dead c's record expires", func() bool { return !slices.Contains(instancesOf(t, ca), "c") })
}

// registerRaw puts m under a lease of its own of ttl seconds, as an
// instance that registered would, and revokes it when the test ends.
func registerRaw(t *testing.T, cli *clientv3.Client, ecfg etcd.Config, m fleet.Member, ttl int64) {
	t.Helper()
	ctx := context.Background()
	g, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	if _, err := cli.Put(ctx, ecfg.Key("instances", m.Name), string(b), clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Revoke(context.Background(), g.ID) })
}

// sessionsByInstance counts the rows of SHOW CLUSTER SESSIONS on c by
// instance.
func sessionsByInstance(t *testing.T, c *pgx.Conn) map[string]int {
	t.Helper()
	per := map[string]int{}
	for _, r := range rows(t, c, "SHOW CLUSTER SESSIONS") {
		per[r["instance"]]++
	}
	return per
}

// pgCode is err's SQLSTATE, "" for none.
func pgCode(err error) string { return testenv.PGError(err).Code }

// TestFleetAlone: without etcd, SHOW INSTANCES is this instance alone,
// named after the host and the console's port; the cluster forms answer
// its own rows with the instance column; a command ON INSTANCE of its
// own name runs here, of another name is 42704; SHOW CLUSTER of a
// setting is refused.
func TestFleetAlone(t *testing.T) {
	cfg := &config.Config{Admin: config.Admin{Listen: "127.0.0.1:0"}}
	st := newStack(t, 0, stack.Options{Config: cfg, Version: "test"})
	c, n := fleetConsole(t, &fleetInstance{st: st})
	inst := rows(t, c, "SHOW INSTANCES")
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(st.AdminAddr().String())
	if len(inst) != 1 || inst[0]["instance"] != host+":"+port || inst[0]["self"] != "yes" || inst[0]["lease_ttl_left"] != "" || inst[0]["catalog_stale"] != "no" {
		t.Fatalf("SHOW INSTANCES = %v, want one row named %s:%s", inst, host, port)
	}
	rs := rows(t, c, "SELECT instance, name FROM cluster_routes")
	if len(rs) != 0 {
		t.Fatalf("cluster_routes of a stack without routes = %v", rs)
	}
	if rs := rows(t, c, "SELECT count(*) AS n FROM instances"); len(rs) != 1 || rs[0]["n"] != "1" {
		t.Fatalf("SELECT count(*) FROM instances = %v", rs)
	}
	if len(n.take()) != 0 {
		t.Fatal("notices from a fleet of one")
	}
	self := inst[0]["instance"]
	for sql, code := range map[string]string{
		"CANCEL STATEMENT 5 ON INSTANCE '" + self + "'": "42704", // runs here: no session 5
		"TERMINATE SESSION 5 ON INSTANCE 'other'":       "42704", // no such instance
		"SHOW CLUSTER low_priority_bandwidth":           "42704",
		"SHOW CLUSTER ALL":                              "42704",
	} {
		if _, err := c.Exec(context.Background(), sql); pgCode(err) != code {
			t.Errorf("%s: %v, want %s", sql, err, code)
		}
	}
	if rs := rows(t, c, "SELECT pg_cancel_backend(5, '"+self+"') AS done"); len(rs) != 1 || rs[0]["done"] != "false" {
		t.Fatalf("pg_cancel_backend(5, self) = %v, want false", rs)
	}
	// The manager alone does not answer SHOW CLUSTER.
	if _, err := st.Manager().Service().Exec(context.Background(), "SHOW CLUSTER SESSIONS"); err == nil {
		t.Fatal("the manager answered SHOW CLUSTER")
	}
}

// BenchmarkShowClusterSessions times SHOW CLUSTER SESSIONS on a in a
// fleet of three on the shared etcd, each instance holding 10 sessions:
// a's own reading and two HTTP round trips, concurrently.
func BenchmarkShowClusterSessions(b *testing.B) {
	eps := testenv.EtcdEndpoints(b)
	ecfg := etcd.Config{Endpoints: eps, Prefix: testenv.EtcdPrefix(b, eps)}
	fl := startFleet(b, ecfg, "a", "b", "c")
	for _, in := range fl {
		for range 10 {
			conn := testenv.ConnectPG(b, in.routeURL(b))
			if _, err := conn.Exec(context.Background(), "SELECT 1"); err != nil {
				b.Fatal(err)
			}
		}
	}
	c, _ := fleetConsole(b, fl[0])
	testenv.Eventually(b, 10*time.Second, "a lists three", func() bool { return len(rows(b, c, "SHOW INSTANCES")) == 3 })
	b.ReportAllocs()
	for b.Loop() {
		if n := len(rows(b, c, "SHOW CLUSTER SESSIONS")); n != 30 {
			b.Fatalf("%d sessions, want 30", n)
		}
	}
}

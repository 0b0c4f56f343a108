package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// distShards is how many shards the distributed tests' coordinator has.
const distShards = 3

// distCluster is a coordinator database whose table parted is hash
// partitioned by c1 into foreign tables (postgres_fdw) on distShards
// shard databases, all on the test PostgreSQL; the coordinator reaches
// shard i through the sluice route "shard<i>", and the client reaches the
// coordinator through route "coord".
type distCluster struct {
	st      *stack.Stack
	console *pgx.Conn
	client  *pgx.ConnConfig // to the coordinator through route coord
	direct  *pgx.Conn       // to the test PostgreSQL, not through sluice
	coordDB string
}

// startDist builds a distCluster whose shards hold rows rows each, of
// about 200 bytes, with databases and catalog objects named dist_<ns>_...,
// all dropped when the test ends.
func startDist(t *testing.T, rows int) *distCluster {
	t.Helper()
	pc := testenv.PostgresConfig(t)
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var super bool
	if err := direct.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		t.Fatal(err)
	}
	var fdw int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_available_extensions WHERE name = 'postgres_fdw'").Scan(&fdw); err != nil {
		t.Fatal(err)
	}
	if !super || fdw == 0 {
		testenv.Missing(t, "a superuser on the test PostgreSQL (%v) with postgres_fdw available (%v)", super, fdw > 0)
	}

	upstream := testenv.PostgresAddr(t)
	addrs := map[string]string{"coord": testenv.DeadAddr(t)}
	body := "catalog: \"\"\nadmin:\n  listen: 127.0.0.1:0\nhttp:\n  listen: 127.0.0.1:0\nroutes:\n"
	for i := 0; i <= distShards; i++ {
		name := "coord"
		if i > 0 {
			name = fmt.Sprintf("shard%d", i)
			addrs[name] = testenv.DeadAddr(t)
		}
		body += "  - name: " + name + "\n    listen: " + addrs[name] + "\n    upstream: " + upstream + "\n    protocol: postgres\n"
	}
	st, _ := configStack(t, body)

	ns := fmt.Sprintf("dist_%d", time.Now().UnixNano())
	dbs := []string{ns + "_coord"}
	for i := 1; i <= distShards; i++ {
		dbs = append(dbs, fmt.Sprintf("%s_s%d", ns, i))
	}
	t.Cleanup(func() {
		// Cleanups run last-registered first: close the stack here, so
		// its sessions end before the databases they use are dropped.
		st.Close()
		for _, db := range dbs {
			if _, err := direct.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
				t.Errorf("drop %s: %v", db, err)
			}
		}
	})
	for _, db := range dbs {
		if _, err := direct.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			t.Fatal(err)
		}
	}
	at := func(db string) *pgx.Conn {
		cfg := testenv.PostgresConfig(t)
		cfg.Database = db
		return testenv.ConnectPGConfig(t, cfg)
	}
	for i := 1; i <= distShards; i++ {
		c := at(dbs[i])
		for _, q := range []string{
			"CREATE TABLE t_part (c1 int, c2 text)",
			// Rows of shard i have c1 ≡ i-1 (mod distShards); what the
			// coordinator's hash partitioning would route there does not
			// matter to a scan without a condition on c1.
			fmt.Sprintf("INSERT INTO t_part SELECT g*%d+%d, repeat(md5(g::text), 6) FROM generate_series(1, %d) g", distShards, i-1, rows),
			"ANALYZE t_part",
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("shard %d: %s: %v", i, q, err)
			}
		}
		c.Close(ctx)
	}
	coord := at(dbs[0])
	qs := []string{
		"CREATE EXTENSION postgres_fdw",
		"CREATE TABLE parted (c1 int, c2 text) PARTITION BY HASH (c1)",
	}
	for i := 1; i <= distShards; i++ {
		host, port, _ := strings.Cut(addrs[fmt.Sprintf("shard%d", i)], ":")
		qs = append(qs,
			// application_name 'fdw %p': postgres_fdw (PostgreSQL 15)
			// expands %p to the coordinator backend's pid.
			fmt.Sprintf("CREATE SERVER shard%d FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname '%s', application_name 'fdw %%p', fetch_size '2000', async_capable 'true')", i, host, port, dbs[i]),
			fmt.Sprintf("CREATE USER MAPPING FOR CURRENT_USER SERVER shard%d OPTIONS (user '%s', password '%s')", i, pc.User, pc.Password),
			fmt.Sprintf("CREATE FOREIGN TABLE parted_%d PARTITION OF parted FOR VALUES WITH (MODULUS %d, REMAINDER %d) SERVER shard%d OPTIONS (table_name 't_part')", i, distShards, i-1, i),
		)
	}
	for _, q := range qs {
		if _, err := coord.Exec(ctx, q); err != nil {
			t.Fatalf("coordinator: %s: %v", q, err)
		}
	}
	coord.Close(ctx)

	execManager(t, st,
		"CREATE RESOURCE POOL dist_coord",
		"CREATE RESOURCE POOL dist_shard",
		"ALTER ROUTE coord WITH (pool='dist_coord')",
	)
	for i := 1; i <= distShards; i++ {
		execManager(t, st, fmt.Sprintf("ALTER ROUTE shard%d WITH (pool='dist_shard')", i))
	}
	client := pgVia(t, addrs["coord"], "dist_client")
	client.Database = dbs[0]
	return &distCluster{st: st, console: console(t, st, ""), client: client, direct: direct, coordDB: dbs[0]}
}

// exec runs the console statements qs.
func (d *distCluster) exec(t *testing.T, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := d.console.Exec(context.Background(), q); err != nil {
			t.Fatalf("console: %s: %v", q, err)
		}
	}
}

// shardLink puts every shard route on link dist_shards, created first
// with the options opts (empty: none).
func (d *distCluster) shardLink(t *testing.T, opts string) {
	t.Helper()
	q := "CREATE LINK dist_shards"
	if opts != "" {
		q += " WITH (" + opts + ")"
	}
	d.exec(t, q)
	for i := 1; i <= distShards; i++ {
		d.exec(t, fmt.Sprintf("ALTER ROUTE shard%d WITH (link='dist_shards')", i))
	}
}

// ruleOnCoordinator binds the coordinator's pool to a new exception rule
// name, of bandwidth 1 and action, checked every second, with the shards
// on a 4 MB/s link of their own.
func (d *distCluster) ruleOnCoordinator(t *testing.T, name, action string) {
	t.Helper()
	d.exec(t,
		"SET except_check_period = '1s'",
		fmt.Sprintf("CREATE EXCEPT RULE %s WITH (bandwidth=1, action='%s')", name, action),
		fmt.Sprintf("ALTER RESOURCE POOL dist_coord WITH (except_rule='%s')", name),
	)
	d.shardLink(t, "capacity='4MB'")
}

// distQuery is the distributed statement: it scans every shard whole.
const distQuery = "SELECT count(*), sum(length(c2)) FROM parted"

// statementRows returns SHOW STATEMENTS, read through the console.
func (d *distCluster) statementRows(t *testing.T) []map[string]string {
	t.Helper()
	return rows(t, d.console, "SHOW STATEMENTS")
}

// int64Of reads column col of r as an integer.
func int64Of(t *testing.T, r map[string]string, col string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r[col], 10, 64)
	if err != nil {
		t.Fatalf("column %s = %q: %v", col, r[col], err)
	}
	return n
}

// parseNodes reads the nodes column: route -> {up, down}.
func parseNodes(t *testing.T, s string) (order []string, bytes map[string][2]int64) {
	t.Helper()
	bytes = map[string][2]int64{}
	for _, e := range strings.Split(s, ",") {
		route, ud, ok := strings.Cut(e, ":")
		up, down, ok2 := strings.Cut(ud, "/")
		u, err1 := strconv.ParseInt(up, 10, 64)
		dn, err2 := strconv.ParseInt(down, 10, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			t.Fatalf("nodes %q: bad entry %q", s, e)
		}
		order = append(order, route)
		bytes[route] = [2]int64{u, dn}
	}
	return order, bytes
}

// TestDistributedStatementBytes: a query over a table partitioned into
// foreign tables on three shards, each reached through its own sluice
// route, is one distributed statement in SHOW STATEMENTS: its nodes
// cover the coordinator's route and the three shard routes, each
// shard's bytes are the sum of that route's shard statements (which
// name it as parent), and its totals are its own bytes plus every
// node's. The shard sessions name the coordinator's session in SHOW
// SESSIONS, and hold at least the bytes their statements counted. The
// coordinator's pool is high priority and the shards' normal: the
// shard connections' bytes go in the high class of their link, as their
// coordinator's.
func TestDistributedStatementBytes(t *testing.T) {
	const rowsPerShard = 2000
	d := startDist(t, rowsPerShard)
	d.exec(t, "ALTER RESOURCE POOL dist_coord WITH (network_priority='high')")
	d.shardLink(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := testenv.ConnectPGConfig(t, d.client)
	var count, chars int64
	if err := c.QueryRow(ctx, distQuery).Scan(&count, &chars); err != nil {
		t.Fatal(err)
	}
	if count != distShards*rowsPerShard {
		t.Fatalf("count = %d, want %d", count, distShards*rowsPerShard)
	}

	var top map[string]string
	all := d.statementRows(t)
	for _, r := range all {
		if r["route"] == "coord" && r["sql"] == distQuery {
			top = r
		}
	}
	if top == nil {
		t.Fatalf("no statement %q on route coord in SHOW STATEMENTS", distQuery)
	}
	if top["parent"] != "" {
		t.Errorf("the coordinator statement has parent %q", top["parent"])
	}
	order, nodes := parseNodes(t, top["nodes"])
	if len(order) != distShards+1 || order[0] != "coord" {
		t.Fatalf("nodes %q: want coord first, then the %d shard routes", top["nodes"], distShards)
	}
	if own := nodes["coord"]; own[0] != int64Of(t, top, "bytes_up") || own[1] != int64Of(t, top, "bytes_down") {
		t.Errorf("coord node %v, want the statement's own bytes %s/%s", own, top["bytes_up"], top["bytes_down"])
	}
	// The shard statements under it, from the same view.
	sum := map[string][2]int64{}
	children := 0
	for _, r := range all {
		if r["parent"] != top["id"] {
			continue
		}
		children++
		s := sum[r["route"]]
		sum[r["route"]] = [2]int64{s[0] + int64Of(t, r, "bytes_up"), s[1] + int64Of(t, r, "bytes_down")}
	}
	totalUp, totalDown := int64Of(t, top, "bytes_up"), int64Of(t, top, "bytes_down")
	for i := 1; i <= distShards; i++ {
		route := fmt.Sprintf("shard%d", i)
		n, ok := nodes[route]
		if !ok {
			t.Fatalf("nodes %q: no %s", top["nodes"], route)
		}
		if n != sum[route] {
			t.Errorf("node %s = %v, its shard statements' bytes sum to %v", route, n, sum[route])
		}
		// Each shard sent at least its rows' text.
		if n[1] < rowsPerShard*192 {
			t.Errorf("node %s received %d bytes, fewer than its %d rows hold", route, n[1], rowsPerShard)
		}
		totalUp += n[0]
		totalDown += n[1]
	}
	if children == 0 {
		t.Fatal("no shard statement names the coordinator statement as parent")
	}
	t.Logf("statement %s: nodes %s, total %s/%s, %d shard statements", top["id"], top["nodes"], top["total_bytes_up"], top["total_bytes_down"], children)
	if int64Of(t, top, "total_bytes_up") != totalUp || int64Of(t, top, "total_bytes_down") != totalDown {
		t.Errorf("totals %s/%s, want own + nodes = %d/%d", top["total_bytes_up"], top["total_bytes_down"], totalUp, totalDown)
	}
	// The HTTP API shows the same statement alike.
	req, _ := http.NewRequest(http.MethodGet, "http://"+d.st.HTTPAddr().String()+"/api/statements/"+top["id"], nil)
	code, body := testenv.Fetch(t, req)
	var js httpapi.Statement
	if err := json.Unmarshal(body, &js); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/statements/%s: %d %s (%v)", top["id"], code, body, err)
	}
	if js.Parent != nil || js.TotalBytesUp != totalUp || js.TotalBytesDown != totalDown || len(js.Nodes) != distShards {
		t.Errorf("/api/statements: parent %v totals %d/%d nodes %+v; want none, %d/%d and %d nodes", js.Parent, js.TotalBytesUp, js.TotalBytesDown, js.Nodes, totalUp, totalDown, distShards)
	}
	for _, n := range js.Nodes {
		if b := nodes[n.Route]; b != [2]int64{n.BytesUp, n.BytesDown} || n.Statements == 0 {
			t.Errorf("/api/statements node %+v, SHOW STATEMENTS says %v", n, b)
		}
	}

	shardBytes := totalUp + totalDown - int64Of(t, top, "bytes_up") - int64Of(t, top, "bytes_down")
	for _, r := range rows(t, d.console, "SHOW LINKS") {
		if r["name"] != "dist_shards" {
			continue
		}
		if high, normal := int64Of(t, r, "bytes_high"), int64Of(t, r, "bytes_normal"); high < shardBytes || normal != 0 {
			t.Errorf("shard link: %d bytes high, %d normal; want the shards' %d (at least) high, none normal", high, normal, shardBytes)
		}
	}

	// The shard sessions, linked to the client's session, each hold at
	// least what its statements counted (startup and authentication
	// belong to no statement).
	var coordID string
	shards := map[string]map[string]string{}
	for _, r := range rows(t, d.console, "SHOW SESSIONS") {
		switch {
		case r["route"] == "coord":
			coordID = r["id"]
		case strings.HasPrefix(r["route"], "shard"):
			shards[r["route"]] = r
		}
	}
	if top["session"] != coordID {
		t.Fatalf("statement's session %s, route coord's session %s", top["session"], coordID)
	}
	for i := 1; i <= distShards; i++ {
		route := fmt.Sprintf("shard%d", i)
		r := shards[route]
		if r == nil {
			t.Fatalf("no session on %s (postgres_fdw keeps its connection open)", route)
		}
		if r["coordinator"] != coordID {
			t.Errorf("session on %s: coordinator %q, want %s", route, r["coordinator"], coordID)
		}
		if int64Of(t, r, "bytes_down") < nodes[route][1] || int64Of(t, r, "bytes_up") < nodes[route][0] {
			t.Errorf("session on %s moved %s/%s, less than its node's %v", route, r["bytes_up"], r["bytes_down"], nodes[route])
		}
	}

	// The what-if table counts the coordinator's client, not its shard
	// connections: their round trips are inside its statement.
	var coordApp bool
	for _, r := range rows(t, d.console, "SHOW WHATIF RTT '10ms'") {
		if strings.HasPrefix(r["application"], "fdw ") {
			t.Errorf("SHOW WHATIF lists shard connections as an application: %v", r)
		}
		coordApp = coordApp || r["database"] == d.coordDB
	}
	if !coordApp {
		t.Errorf("SHOW WHATIF has no application of the coordinator's database %s", d.coordDB)
	}
}

// linkedShards returns the open sessions linked to coord.
func linkedShards(st *stack.Stack, coord *session.Session) []*session.Session {
	var out []*session.Session
	for _, s := range st.Registry().Sessions() {
		if s.Coordinator() == coord {
			out = append(out, s)
		}
	}
	return out
}

// coordSession returns the open session of route coord (the test has
// one client there).
func coordSession(t *testing.T, st *stack.Stack) *session.Session {
	t.Helper()
	for _, s := range st.Registry().Sessions() {
		if s.Info.Route == "coord" {
			return s
		}
	}
	t.Fatal("no session on route coord")
	return nil
}

// linkBytesLow reads SHOW LINKS' bytes_low of link name.
func linkBytesLow(t *testing.T, d *distCluster, name string) int64 {
	t.Helper()
	for _, r := range rows(t, d.console, "SHOW LINKS") {
		if r["name"] == name {
			return int64Of(t, r, "bytes_low")
		}
	}
	t.Fatalf("no link %s", name)
	return 0
}

// TestDistributedStatementPenalty: a bandwidth penalty rule on the
// coordinator's pool, whose threshold the coordinator statement's own
// bytes never reach but its shards' do, fires once for the distributed
// statement and demotes its flows on all three shard routes while it
// runs: every linked session reads Penalized, and the shard link's Low
// class carries the shards' bytes.
func TestDistributedStatementPenalty(t *testing.T) {
	testenv.SkipShort(t, "takes 7s here")
	d := startDist(t, 25000) // about 5 MB per shard
	d.ruleOnCoordinator(t, "dist_fat", "penalty")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := testenv.ConnectPGConfig(t, d.client)
	coord := coordSession(t, d.st)
	lowBefore := linkBytesLow(t, d, "dist_shards")

	done := make(chan error, 1)
	go func() {
		var n, chars int64
		done <- c.QueryRow(ctx, distQuery).Scan(&n, &chars)
	}()
	var top *session.Statement
	testenv.Eventually(t, 60*time.Second, "the distributed statement to be penalised", func() bool {
		for _, st := range coord.Active() {
			if st.SQL == distQuery && st.Penalized() {
				top = st
				return true
			}
		}
		return false
	})
	// While it runs: every flow working for it is demoted.
	var shards []*session.Session
	testenv.Eventually(t, 30*time.Second, "three linked shard sessions", func() bool {
		shards = linkedShards(d.st, coord)
		return len(shards) == distShards
	})
	routes := map[string]bool{}
	for _, s := range shards {
		routes[s.Info.Route] = true
		if !s.Penalized() {
			t.Errorf("shard session on %s is not demoted while the distributed statement runs", s.Info.Route)
		}
	}
	if len(routes) != distShards {
		t.Errorf("linked sessions on routes %v, want one on each shard route", routes)
	}
	if !coord.Penalized() {
		t.Error("the coordinator session is not demoted")
	}
	if top.Outcome() != session.Running {
		t.Fatalf("the statement ended (%v) before the checks: make it longer", top.Outcome())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := d.st.Manager().Rules().Stats().RuleFirings("dist_fat"); n != 1 {
		t.Errorf("dist_fat fired %d times, want once (for the distributed statement only)", n)
	}
	snap := top.Snapshot()
	if len(snap.Except) != 1 || !strings.Contains(snap.Except[0], "dist_fat") {
		t.Errorf("except_info %q, want the one firing", snap.Except)
	}
	// The coordinator's own bytes are far below the threshold; the
	// shards' went in the Low class.
	own := snap.BytesUp + snap.BytesDown
	low := linkBytesLow(t, d, "dist_shards") - lowBefore
	var nodes int64
	for _, n := range snap.Nodes {
		nodes += n.BytesUp + n.BytesDown
	}
	if own >= 1e6 || nodes < 10e6 {
		t.Fatalf("own bytes %d, shard bytes %d: the test's premise (own < 1 MB, shards > 10 MB) does not hold", own, nodes)
	}
	if low < nodes/4 {
		t.Errorf("the shard link's Low class carried %d bytes of the shards' %d", low, nodes)
	}
	for _, s := range linkedShards(d.st, coord) {
		if s.Penalized() {
			t.Errorf("shard session on %s still demoted after the statement ended", s.Info.Route)
		}
	}
}

// TestDistributedStatementAbort: an abort rule on the coordinator's pool
// that only the distributed total reaches cancels the statement at the
// coordinator: the client gets 57014 and keeps its session, and
// PostgreSQL cancels the remote scans itself.
func TestDistributedStatementAbort(t *testing.T) {
	testenv.SkipShort(t, "takes 3s here")
	d := startDist(t, 25000)
	d.ruleOnCoordinator(t, "dist_stop", "abort")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := testenv.ConnectPGConfig(t, d.client)
	var n, chars int64
	err := c.QueryRow(ctx, distQuery).Scan(&n, &chars)
	if code := testenv.PGError(err).Code; code != "57014" {
		t.Fatalf("distributed statement: %v (SQLSTATE %q), want 57014", err, code)
	}
	if got := d.st.Manager().Rules().Stats().RuleFirings("dist_stop"); got != 1 {
		t.Errorf("dist_stop fired %d times, want once", got)
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("the session after the cancel: %v", err)
	}
	var top map[string]string
	for _, r := range d.statementRows(t) {
		if r["route"] == "coord" && r["sql"] == distQuery {
			top = r
		}
	}
	if top == nil || top["state"] != "cancelled" || !strings.Contains(top["except_info"], "dist_stop") {
		t.Fatalf("the statement's row %v, want cancelled by dist_stop", top)
	}
	if int64Of(t, top, "total_bytes_down") <= int64Of(t, top, "bytes_down") {
		t.Errorf("totals %s, own %s: no shard bytes counted", top["total_bytes_down"], top["bytes_down"])
	}
}

// TestDistributedLinking: a session whose application_name fits the
// pattern but names no session's backend is not linked and works as any
// other; linked shard connections never wait for admission, so a shard
// pool with active_statements=1 does not deadlock the query (its three
// remote transactions run at once, each keeping its session's slot); with
// distributed_application_name empty the shard connections are not
// linked, and the query is no distributed statement.
func TestDistributedLinking(t *testing.T) {
	testenv.SkipShort(t, "builds a coordinator and three shard databases")
	d := startDist(t, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// pid 1 is never a backend.
	stray := *d.client
	stray.RuntimeParams = map[string]string{"application_name": "fdw 1"}
	sc := testenv.ConnectPGConfig(t, &stray)
	var one int
	if err := sc.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("a session named after no backend: %v", err)
	}
	for _, r := range rows(t, d.console, "SHOW SESSIONS") {
		if r["coordinator"] != "" {
			t.Errorf("session %s on %s linked to %s", r["id"], r["route"], r["coordinator"])
		}
	}
	sc.Close(ctx)

	d.exec(t, "ALTER RESOURCE POOL dist_shard WITH (active_statements=1)")
	lc := testenv.ConnectPGConfig(t, d.client)
	var n, chars int64
	qctx, qcancel := context.WithTimeout(ctx, 20*time.Second)
	err := lc.QueryRow(qctx, distQuery).Scan(&n, &chars)
	qcancel()
	if err != nil {
		t.Fatalf("the distributed query with a shard pool of one slot: %v", err)
	}
	lc.Close(ctx)
	d.exec(t, "ALTER RESOURCE POOL dist_shard WITH (active_statements=-1)")
	// The coordinator backend's end closes its shard connections.
	testenv.Eventually(t, 20*time.Second, "the linked shard sessions to close", func() bool {
		for _, s := range d.st.Registry().Sessions() {
			if s.Coordinator() != nil {
				return false
			}
		}
		return true
	})
	var last int64
	for _, r := range d.statementRows(t) {
		last = max(last, int64Of(t, r, "id"))
	}

	d.exec(t, "SET distributed_application_name = ''")
	c := testenv.ConnectPGConfig(t, d.client)
	if err := c.QueryRow(ctx, distQuery).Scan(&n, &chars); err != nil {
		t.Fatal(err)
	}
	shards := 0
	for _, r := range rows(t, d.console, "SHOW SESSIONS") {
		if strings.HasPrefix(r["route"], "shard") {
			shards++
		}
		if r["coordinator"] != "" {
			t.Errorf("linking off: session %s on %s linked to %s", r["id"], r["route"], r["coordinator"])
		}
	}
	if shards != distShards {
		t.Errorf("%d shard sessions, want %d", shards, distShards)
	}
	for _, r := range d.statementRows(t) {
		if int64Of(t, r, "id") > last && (r["parent"] != "" || r["nodes"] != "") {
			t.Errorf("linking off: statement %s has parent %q nodes %q", r["id"], r["parent"], r["nodes"])
		}
	}
}

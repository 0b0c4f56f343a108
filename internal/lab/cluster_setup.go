package lab

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/redact"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/units"
)

// clusterSettings are the servers' settings: small, for a 2-core
// machine running four of them. jit is off so a plan's compile time
// does not land in the measured join.
var clusterSettings = []string{
	"shared_buffers=32MB", "max_connections=40", "work_mem=16MB", "maintenance_work_mem=32MB",
	"jit=off", "max_wal_size=256MB", "autovacuum=off", "max_parallel_workers_per_gather=0",
}

// coordinatorSettings are the coordinator's own: shard connections name
// the coordinator's backend (so a sluice that links distributed
// statements sees them), and a backend whose client went away stops
// within a second.
var coordinatorSettings = []string{
	"postgres_fdw.application_name=fdw %p", "client_connection_check_interval=1s",
}

// startNodes starts the coordinator and the data nodes, in parallel.
func (r *clusterRun) startNodes(ctx context.Context) error {
	r.p.step("starting %d throwaway PostgreSQL servers (a coordinator and %d data nodes)", clusterDataNodes+1, clusterDataNodes)
	r.nodes = make([]*pgtemp.Server, clusterDataNodes+1)
	errs := make([]error, len(r.nodes))
	var wg sync.WaitGroup
	for i := range r.nodes {
		settings := clusterSettings
		if i == 0 {
			settings = append(append([]string(nil), clusterSettings...), coordinatorSettings...)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := pgtemp.Options{BinDir: r.pgBin, Clock: r.clk, Logger: r.log, Settings: settings}
			if r.nodeStart != nil {
				o.Start = r.nodeStart(i)
			}
			r.nodes[i], errs[i] = pgtemp.Start(ctx, o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		r.stopNodes()
		return err
	}
	return nil
}

// stopNodes stops every server started and removes its directory.
func (r *clusterRun) stopNodes() {
	for _, n := range r.nodes {
		if n != nil {
			if err := n.Close(); err != nil {
				r.log.Warn("cluster node", "err", err)
			}
		}
	}
	r.nodes = nil
}

// addRoutes puts a sluice route in front of every server: one per data
// node on the shard link, for the coordinator's shard connections, and
// one to the coordinator on the default link, for the clients.
func (r *clusterRun) addRoutes() error {
	r.shards, r.shardAddrs = map[string]bool{}, map[int]string{}
	add := func(name, linkName string, srv *pgtemp.Server) (string, error) {
		u, err := url.Parse(srv.URL())
		if err != nil {
			return "", err
		}
		addr, err := r.s.st.AddRoute(stack.Route{Route: config.Route{
			Name: name, Listen: "127.0.0.1:0", Upstream: u.Host, Protocol: protoPostgres, Link: linkName}})
		if err != nil {
			return "", fmt.Errorf("route %s: %w", name, err)
		}
		return addr.String(), nil
	}
	var err error
	if r.coord, err = add(clusterCoord, "default", r.nodes[0]); err != nil {
		return err
	}
	for i := 1; i < len(r.nodes); i++ {
		name := fmt.Sprintf("cluster_dn%d", i)
		addr, err := add(name, clusterLink, r.nodes[i])
		if err != nil {
			return err
		}
		r.shards[name], r.shardAddrs[i] = true, addr
	}
	return nil
}

// adminExec runs statements on server n as its superuser, directly,
// over its Unix socket (which reaches a server in a network namespace
// too).
func adminExec(ctx context.Context, n *pgtemp.Server, stmts ...string) error {
	c, err := pgconn.Connect(ctx, n.SocketURL())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("%s: %w", firstLine(maskPasswords(q)), err)
		}
	}
	return nil
}

// maskPasswords returns q with every password literal masked
// (redact.Mask), as redact.SQL finds them in PostgreSQL's SQL.
func maskPasswords(q string) string { return redact.SQL(q, redact.PostgreSQL) }

// firstLine returns q up to its first newline, at most 100 bytes, for
// error messages.
func firstLine(q string) string {
	q, _, _ = strings.Cut(q, "\n")
	if len(q) > 100 {
		q = q[:100] + "..."
	}
	return q
}

// wtDDL is the reference's table definition.
func wtDDL(name string) string {
	return fmt.Sprintf("%s (c1 int, c2 int, b1 char(1000), b2 char(7000))", name)
}

// build makes the cluster: roles on every server, the tables' data on
// the data nodes, and on the coordinator postgres_fdw, one foreign
// server per data node (through its sluice route), the user mappings,
// and wt1..wt4 hash-partitioned by c1 into foreign partitions. It
// returns the coordinator's statements, passwords masked.
func (r *clusterRun) build(ctx context.Context) ([]string, error) {
	r.p.step("building the cluster: roles, postgres_fdw servers through the sluice routes, wt1..wt4 hash-partitioned by c1 over %d data nodes", clusterDataNodes)
	r.passwords = map[string]string{}
	var roles []string
	for _, u := range []string{clusterLowUser, clusterHighUser, clusterLowShardUser, clusterHighShardUser, clusterSetupUser} {
		pw, err := pgtemp.Password()
		if err != nil {
			return nil, err
		}
		r.passwords[u] = pw
		roles = append(roles, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", u, r.passwords[u]))
	}
	tables := []string{"wt1", "wt2", "wt3", "wt4"}
	var coord, shown []string
	do := func(q string, secret bool) {
		coord = append(coord, q)
		if secret {
			q = maskPasswords(q)
		}
		shown = append(shown, q)
	}
	for _, q := range roles {
		do(q, true)
	}
	do("CREATE EXTENSION postgres_fdw", false)
	for i := 1; i <= clusterDataNodes; i++ {
		addr := r.shardAddrs[i]
		host, port, _ := strings.Cut(addr, ":")
		do(fmt.Sprintf("CREATE SERVER dn%d FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres', sslmode 'disable', fetch_size '%d')",
			i, host, port, clusterFetchSize), false)
		// Each client user reaches the data nodes as its shard role.
		for _, m := range [][2]string{{clusterLowUser, clusterLowShardUser}, {clusterHighUser, clusterHighShardUser}} {
			do(fmt.Sprintf("CREATE USER MAPPING FOR %s SERVER dn%d OPTIONS (user '%s', password '%s'%s)", m[0], i, m[1], r.passwords[m[1]], r.mappingExtra), true)
		}
		// The superuser's mapping, for ANALYZE: a role bound to no pool.
		do(fmt.Sprintf("CREATE USER MAPPING FOR postgres SERVER dn%d OPTIONS (user '%s', password '%s')", i, clusterSetupUser, r.passwords[clusterSetupUser]), true)
	}
	for _, t := range tables {
		do(fmt.Sprintf("CREATE TABLE %s PARTITION BY HASH (c1)", wtDDL(t)), false)
		for i := 1; i <= clusterDataNodes; i++ {
			do(fmt.Sprintf("CREATE FOREIGN TABLE %s_dn%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d) SERVER dn%d OPTIONS (table_name '%s'%s)",
				t, i, t, clusterDataNodes, i-1, i, t, clusterAsync(t)), false)
		}
	}
	do(fmt.Sprintf("GRANT SELECT ON %s TO %s, %s", strings.Join(tables, ", "), clusterLowUser, clusterHighUser), false)
	if err := adminExec(ctx, r.nodes[0], coord...); err != nil {
		return shown, fmt.Errorf("coordinator: %w", err)
	}

	// The data lives on the data nodes. Each node's rows are those of
	// its partition, chosen by the coordinator's own hash
	// (satisfies_hash_partition), and generated on the node.
	rows := map[string]int{"wt1": r.plan.LowRows, "wt2": r.plan.LowRows, "wt3": r.plan.HighRows, "wt4": r.plan.HighRows}
	ids := map[string][]string{} // table -> ids per remainder, as array literals
	c, err := pgconn.Connect(ctx, r.nodes[0].SocketURL())
	if err != nil {
		return shown, fmt.Errorf("coordinator: %w", err)
	}
	for _, t := range tables {
		for k := 0; k < clusterDataNodes; k++ {
			res, err := c.Exec(ctx, fmt.Sprintf("SELECT coalesce(array_agg(i ORDER BY i), '{}')::text FROM generate_series(1, %d) i WHERE satisfies_hash_partition('%s'::regclass, %d, %d, i)",
				rows[t], t, clusterDataNodes, k)).ReadAll()
			if err != nil || len(res) == 0 || len(res[0].Rows) != 1 {
				c.Close(context.WithoutCancel(ctx))
				return shown, fmt.Errorf("coordinator: partition ids of %s: %v", t, err)
			}
			ids[t] = append(ids[t], string(res[0].Rows[0][0]))
		}
	}
	c.Close(context.WithoutCancel(ctx))

	errs := make([]error, clusterDataNodes)
	var wg sync.WaitGroup
	for i := 1; i <= clusterDataNodes; i++ {
		stmts := append([]string(nil), roles...)
		for _, t := range tables {
			// Unlogged: the data is disposable, and no WAL is written.
			stmts = append(stmts, "CREATE UNLOGGED TABLE "+wtDDL(t),
				fmt.Sprintf("INSERT INTO %s SELECT i, i, lpad(i::text, 1000, 'b'), lpad(i::text, 7000, 'w') FROM unnest('%s'::int[]) i", t, ids[t][i-1]))
		}
		stmts = append(stmts,
			fmt.Sprintf("GRANT SELECT ON %s TO %s, %s, %s", strings.Join(tables, ", "), clusterLowShardUser, clusterHighShardUser, clusterSetupUser),
			"VACUUM ANALYZE")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := adminExec(ctx, r.nodes[i], stmts...); err != nil {
				errs[i-1] = fmt.Errorf("data node %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return shown, err
	}
	r.p.step("loaded wt1, wt2 (%d rows each) and wt3, wt4 (%d rows each) on the data nodes; analyzing the foreign tables on the coordinator (every row crosses the unlimited link once)", r.plan.LowRows, r.plan.HighRows)
	// ANALYZE fetches every row of the foreign partitions (through the
	// routes, on the still unlimited link), for the planner's row counts.
	do("ANALYZE "+strings.Join(tables, ", "), false)
	if err := adminExec(ctx, r.nodes[0], coord[len(coord)-1]); err != nil {
		return shown, fmt.Errorf("coordinator: %w", err)
	}
	return shown, nil
}

// explain records what each query's foreign scans fetch, and the
// low-priority join's plan.
func (r *clusterRun) explain(ctx context.Context, rep *ClusterReport) error {
	c, err := pgconn.Connect(ctx, r.nodes[0].SocketURL())
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	plan := func(q string) ([]string, error) {
		res, err := c.Exec(ctx, "EXPLAIN (VERBOSE, COSTS OFF) "+q).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("explain: %w", err)
		}
		var lines []string
		for _, rr := range res {
			for _, row := range rr.Rows {
				lines = append(lines, string(row[0]))
			}
		}
		return lines, nil
	}
	remote := func(lines []string) []string {
		var out []string
		seen := map[string]bool{}
		for _, l := range lines {
			_, sql, ok := strings.Cut(l, "Remote SQL: ")
			if ok && !seen[sql] {
				seen[sql] = true
				out = append(out, sql)
			}
		}
		return out
	}
	for _, q := range []struct {
		sql   string
		fetch *[]string
	}{{clusterRefSQL, &rep.ReferenceFetch}, {clusterLowSQL, &rep.LowFetch}, {clusterHighSQL, &rep.HighFetch}} {
		lines, err := plan(q.sql)
		if err != nil {
			return err
		}
		*q.fetch = remote(lines)
		if q.sql == clusterLowSQL {
			rep.LowPlan = strings.Join(lines, "\n")
		}
		if len(*q.fetch) == 0 {
			return fmt.Errorf("the plan of %q has no foreign scan:\n%s", q.sql, strings.Join(lines, "\n"))
		}
	}
	for _, f := range rep.LowFetch {
		r.p.step("low-priority join fetches: %s", f)
	}
	return nil
}

// clientURL is the URL of a client session of user to the coordinator,
// through its route.
func (r *clusterRun) clientURL(user string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, r.passwords[user]), Host: r.coord, Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// connect opens a client session of user to the coordinator.
func (r *clusterRun) connect(ctx context.Context, user string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(r.clientURL(user))
	if err != nil {
		return nil, err
	}
	if r.dial != nil {
		cfg.DialFunc = pgconn.DialFunc(r.dial)
	}
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect as %s: %w", user, err)
	}
	return c, nil
}

// count runs a count query on c and returns the count.
func count(ctx context.Context, c *pgconn.PgConn, q string) (int64, error) {
	res, err := c.Exec(ctx, q).ReadAll()
	if err != nil {
		return 0, err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 1 {
		return 0, fmt.Errorf("%s: no count", q)
	}
	return strconv.ParseInt(string(res[0].Rows[0][0]), 10, 64)
}

// measureQueries records what one run of the reference's query and of
// the low-priority join moves from the data nodes, on the unlimited
// link, and the low-priority join as sluice saw it: one distributed
// statement.
func (r *clusterRun) measureQueries(ctx context.Context, rep *ClusterReport) error {
	var refRows int64
	var err error
	if rep.ReferenceBytes, refRows, err = r.measureOnce(ctx, clusterLowUser, clusterRefSQL); err != nil {
		return err
	}
	prev := r.watch.lastOf(clusterLowUser)
	if rep.LowBytes, _, err = r.measureOnce(ctx, clusterLowUser, clusterLowSQL); err != nil {
		return err
	}
	waitIdle(ctx, r.clk, func() bool { return r.watch.lastOf(clusterLowUser) != prev })
	if rep.LowStatement = r.watch.lastOf(clusterLowUser); rep.LowStatement == prev {
		return errors.New("the low-priority join was no distributed statement: sluice linked no shard statement to it")
	}
	r.p.step("the low-priority join is one distributed statement: nodes %s", rep.LowStatement.Nodes)
	rep.ShardApplication = r.app
	if refRows != int64(r.plan.LowRows) {
		return fmt.Errorf("the reference join counted %d rows, want %d", refRows, r.plan.LowRows)
	}
	r.p.step("one run moves %s from the data nodes as the reference writes it, %s as it runs here (wide columns fetched)",
		units.FormatBytes(rep.ReferenceBytes), units.FormatBytes(rep.LowBytes))
	return nil
}

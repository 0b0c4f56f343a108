package lab

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// ClusterDistStatement is one distributed statement as sluice showed it:
// a client's statement on the coordinator's route with the shard
// statements that worked for it (SHOW STATEMENTS' parent, nodes and
// total_bytes_* columns).
type ClusterDistStatement struct {
	User string `json:"user"`
	Pool string `json:"pool"`
	SQL  string `json:"sql"`
	// Outcome is the statement's state ("ok", "failed", ...).
	Outcome string `json:"outcome"`
	// ElapsedMs is from its start to its end, in milliseconds.
	ElapsedMs float64 `json:"elapsed_ms"`
	// Nodes is SHOW STATEMENTS' nodes column: route:up/down per node,
	// the coordinator's route (its own bytes) first.
	Nodes string `json:"nodes"`
	// PerNode are its shard statements per shard route, in order of
	// their first statement.
	PerNode []ClusterNode `json:"per_node"`
	// BytesUp and BytesDown are its own bytes; TotalUp and TotalDown
	// its own plus every shard statement's.
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
	TotalUp   int64 `json:"total_bytes_up"`
	TotalDown int64 `json:"total_bytes_down"`
	// Penalised and Except are its penalty and except_info.
	Penalised bool     `json:"penalised"`
	Except    []string `json:"except_info,omitempty"`
}

// ClusterNode is what a distributed statement's shard statements moved
// on one shard route.
type ClusterNode struct {
	Route      string `json:"route"`
	Statements int64  `json:"statements"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
}

// distStatement converts the snapshot of a statement on route.
func distStatement(route string, s *session.Snapshot) *ClusterDistStatement {
	d := &ClusterDistStatement{
		User: s.User, Pool: s.Pool, SQL: s.SQL, Outcome: s.Outcome.String(), Nodes: views.Nodes(route, s),
		BytesUp: s.BytesUp, BytesDown: s.BytesDown, TotalUp: s.TotalUp, TotalDown: s.TotalDown,
		Penalised: s.Penalized, Except: s.Except,
	}
	if !s.Ended.IsZero() {
		d.ElapsedMs = durMs(s.Ended.Sub(s.ExecStarted()))
	}
	for _, n := range s.Nodes {
		d.PerNode = append(d.PerNode, ClusterNode{Route: n.Route, Statements: n.Statements, BytesUp: n.BytesUp, BytesDown: n.BytesDown})
	}
	return d
}

// distCounts counts statements that ended, as distWatch sees them.
type distCounts struct {
	// Distributed is the coordinator statements that had shard
	// statements, both users'.
	Distributed int
	// LowJoins is how many of those were the low-priority user's;
	// LowPenalised how many of these were penalised; LowFirings the
	// rule's firings in their except_info; LowAllNodes how many had
	// shard statements on every shard route.
	LowJoins, LowPenalised, LowFirings, LowAllNodes int
	// Shard is the statements on the shard routes; ShardUnlinked those
	// of the client users' shard roles without a coordinator statement
	// (the setup role's, of ANALYZE on the coordinator directly, are
	// never linked); ShardPenalised those penalised in their own right
	// (by a rule of their own pool).
	Shard, ShardUnlinked, ShardPenalised int
	// UnlinkedKinds counts ShardUnlinked by the statements' first word.
	UnlinkedKinds map[string]int
}

// minus returns c - o, field by field.
func (c distCounts) minus(o distCounts) distCounts {
	return distCounts{
		Distributed: c.Distributed - o.Distributed,
		LowJoins:    c.LowJoins - o.LowJoins, LowPenalised: c.LowPenalised - o.LowPenalised,
		LowFirings: c.LowFirings - o.LowFirings, LowAllNodes: c.LowAllNodes - o.LowAllNodes,
		Shard: c.Shard - o.Shard, ShardUnlinked: c.ShardUnlinked - o.ShardUnlinked, ShardPenalised: c.ShardPenalised - o.ShardPenalised,
	}
}

// kinds writes UnlinkedKinds as "2 ABORT, 1 COMMIT", by word.
func (c distCounts) kinds() string {
	words := make([]string, 0, len(c.UnlinkedKinds))
	for w := range c.UnlinkedKinds {
		words = append(words, w)
	}
	slices.Sort(words)
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = fmt.Sprintf("%d %s", c.UnlinkedKinds[w], w)
	}
	return strings.Join(parts, ", ")
}

// distWatch counts the statements the cluster's routes see end, from the
// registry's StatementEnded events: the registry keeps only its last
// ended statements, far fewer than a point's shard statements. It is a
// session.Watcher, safe for concurrent use (Observe runs in the proxy's
// goroutines and takes only mu, after the statement's own locks are
// released).
type distWatch struct {
	// coord is the coordinator's route, shards the shard routes' names;
	// lowUser the low-priority user, shardUsers the client users' shard
	// roles, rule the penalty rule's name; all immutable.
	coord      string
	shards     map[string]bool
	lowUser    string
	shardUsers map[string]bool
	rule       string

	mu     sync.Mutex
	counts distCounts                       // guarded by mu
	last   map[string]*ClusterDistStatement // guarded by mu; the last distributed statement to end, by user
	// lastPenalised is the last penalised low-priority join to end;
	// guarded by mu; nil if none.
	lastPenalised *ClusterDistStatement
}

// Observe implements session.Watcher.
func (w *distWatch) Observe(e session.Event) {
	if e.Kind != session.StatementEnded || e.Statement == nil {
		return
	}
	route := e.Session.Info.Route
	if w.shards[route] {
		st := e.Statement
		pen := st.Penalized()
		client := w.shardUsers[e.Session.User()]
		w.mu.Lock()
		w.counts.Shard++
		if st.Parent == nil && client {
			w.counts.ShardUnlinked++
			if w.counts.UnlinkedKinds == nil {
				w.counts.UnlinkedKinds = map[string]int{}
			}
			word, _, _ := strings.Cut(strings.TrimSpace(st.SQL), " ")
			w.counts.UnlinkedKinds[strings.ToUpper(word)]++
		}
		if pen {
			w.counts.ShardPenalised++
		}
		w.mu.Unlock()
		return
	}
	if route != w.coord {
		return
	}
	snap := e.Statement.Snapshot()
	if len(snap.Nodes) == 0 {
		return
	}
	d := distStatement(route, &snap)
	all := true
	for s := range w.shards {
		found := false
		for _, n := range snap.Nodes {
			found = found || n.Route == s
		}
		all = all && found
	}
	firings := 0
	for _, x := range snap.Except {
		if strings.Contains(x, w.rule) {
			firings++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts.Distributed++
	if w.last == nil {
		w.last = map[string]*ClusterDistStatement{}
	}
	w.last[snap.User] = d
	if snap.User != w.lowUser {
		return
	}
	w.counts.LowJoins++
	w.counts.LowFirings += firings
	if snap.Penalized {
		w.counts.LowPenalised++
		w.lastPenalised = d
	}
	if all {
		w.counts.LowAllNodes++
	}
}

// snapshot returns the counts so far.
func (w *distWatch) snapshot() distCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.counts
	c.UnlinkedKinds = maps.Clone(c.UnlinkedKinds)
	return c
}

// lastOf returns the last distributed statement of user to end, nil if
// none.
func (w *distWatch) lastOf(user string) *ClusterDistStatement {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[user]
}

// penalised returns the last penalised low-priority join to end, nil if
// none.
func (w *distWatch) penalised() *ClusterDistStatement {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastPenalised
}

// distTable returns what sluice saw of the distributed statements at
// each point: one row per point, off first.
func (c *ClusterReport) distTable() table {
	t := table{head: []string{"network_control", "N", "distributed statements", "low joins ended", "low joins penalised", "rule firings",
		"in their except_info", "low joins on every shard", "shard statements", "shard statements penalised", "high join's shard bytes in high class"}}
	for _, r := range c.Rows {
		t.rows = append(t.rows, []string{r.Control, fmt.Sprint(r.N), fmt.Sprint(r.Distributed), fmt.Sprint(r.LowJoins), fmt.Sprint(r.LowPenalised),
			fmt.Sprint(r.RuleFirings), fmt.Sprint(r.LowFirings), fmt.Sprint(r.LowAllNodes), fmt.Sprint(r.ShardStatements), fmt.Sprint(r.ShardPenalised),
			fmt.Sprintf("%.0f%%", 100*r.HighClassShare)})
	}
	return t
}

// nodeTable returns a distributed statement's bytes per node, its own
// route first.
func (d *ClusterDistStatement) nodeTable() table {
	t := table{head: []string{"route", "statements", "bytes up", "bytes down"}}
	t.rows = append(t.rows, []string{clusterCoord + " (its own)", "1", fmt.Sprint(d.BytesUp), fmt.Sprint(d.BytesDown)})
	stmts := int64(1)
	for _, n := range d.PerNode {
		t.rows = append(t.rows, []string{n.Route, fmt.Sprint(n.Statements), fmt.Sprint(n.BytesUp), fmt.Sprint(n.BytesDown)})
		stmts += n.Statements
	}
	t.rows = append(t.rows, []string{"total", fmt.Sprint(stmts), fmt.Sprint(d.TotalUp), fmt.Sprint(d.TotalDown)})
	return t
}

// writeMarkdown writes one distributed statement: its nodes column and
// its bytes per node.
func (d *ClusterDistStatement) writeMarkdown(w io.Writer) {
	pen := "not penalised"
	if d.Penalised {
		pen = fmt.Sprintf("penalised (except_info `%s`)", strings.Join(d.Except, "; "))
	}
	fmt.Fprintf(w, "user %s, pool %s, %s after %.0f ms, %s; SHOW STATEMENTS' nodes column:\n\n```\n%s\n```\n\n", d.User, d.Pool, d.Outcome, d.ElapsedMs, pen, d.Nodes)
	d.nodeTable().markdown(w)
	fmt.Fprintln(w)
}

// lowFirings sums the on points' low-priority joins: penalised, rule
// firings in their except_info, and the manager's firings.
func (c *ClusterReport) lowFirings(control string) (penalised, inExcept, firings int) {
	for _, r := range c.Rows {
		if r.Control == control {
			penalised += r.LowPenalised
			inExcept += r.LowFirings
			firings += r.RuleFirings
		}
	}
	return penalised, inExcept, firings
}

// writeDistributed writes what sluice saw of the distributed statements:
// their counts in the run and per point, the rule's firings, and one
// penalised low-priority join.
func (c *ClusterReport) writeDistributed(w io.Writer) {
	pen, inExcept, firings := c.lowFirings("on")
	offPen, offExcept, offFirings := c.lowFirings("off")
	unlinked := ""
	if c.ShardUnlinked > 0 {
		unlinked = fmt.Sprintf(" (%s)", c.UnlinkedKinds)
	}
	fmt.Fprintf(w, "\nsluice saw %d distributed statements in the run, with %d shard statements; %d of the client users' shard statements were linked to no coordinator statement%s; a stopped join's remote ABORTs and drained FETCHes, which reach the shards after sluice has seen the coordinator's statement end, belong to that statement "+
		"(the setup role's, of ANALYZE run on the coordinator directly, never are, and are not counted). Per point "+
		"(from the end of its warm-up high-priority join to the end of its last low-priority join; low-priority joins still running at the end are stopped, so a join that had just begun ends unpenalised):\n\n",
		c.Distributed, c.ShardStatements, c.ShardUnlinked, unlinked)
	c.distTable().markdown(w)
	fmt.Fprintf(w, "\nThe rule fired %d times with network_control on for %d penalised low-priority joins, whose except_info holds %d firings; with it off, %d times for %d penalised joins (%d in their except_info). "+
		"No shard statement is penalised in its own right: a shard session is demoted through its coordinator's statement.",
		firings, pen, inExcept, offFirings, offPen, offExcept)
	if r := c.row("on", 0); r != nil {
		fmt.Fprintf(w, " The high-priority join's shard sessions are in the default pool, and %.0f%% of what they received went in the shard link's high class, its coordinator pool's.", 100*r.HighClassShare)
	}
	fmt.Fprintf(w, "\n\n")
	if d := c.PenalisedStatement; d != nil {
		fmt.Fprintf(w, "One penalised low-priority join of the last point with network_control on, stopped at the point's end: ")
		d.writeMarkdown(w)
	}
}

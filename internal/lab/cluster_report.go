package lab

import (
	"fmt"
	"io"
	"strings"

	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/units"
)

// referenceSlowdown is the reference cluster's slowdown of the small
// join under 10 concurrent broadcast joins, network control off.
const referenceSlowdown = 55

// table returns the cluster points, one row per N with both settings
// side by side.
func (c *ClusterReport) table() table {
	t := table{head: []string{"low-priority joins N", "off: elapsed (ms)", "off: FIFO model (ms)", "off: slowdown", "on: elapsed (ms)", "on: slowdown",
		"off: low MB/s", "on: low MB/s", "on: unpenalised"}}
	for _, n := range c.ns() {
		off, on := c.row("off", n), c.row("on", n)
		cells := []string{fmt.Sprint(n), "-", "-", "-", "-", "-", "-", "-", "-"}
		if off != nil {
			cells[1], cells[2], cells[3], cells[6] = f1(off.ElapsedMs), f1(off.ModelMs), x2(off.Slowdown), f1(off.LowMBps)
		}
		if on != nil {
			cells[4], cells[5], cells[7], cells[8] = f1(on.ElapsedMs), x2(on.Slowdown), f1(on.LowMBps), fmt.Sprintf("%.0f%%", 100*on.Unpenalised)
		}
		t.rows = append(t.rows, cells)
	}
	return t
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

// ns returns the Ns measured, in order.
func (c *ClusterReport) ns() []int {
	var out []int
	seen := map[int]bool{}
	for _, r := range c.Rows {
		if !seen[r.N] {
			seen[r.N] = true
			out = append(out, r.N)
		}
	}
	return out
}

// row returns the point for control and n, or nil.
func (c *ClusterReport) row(control string, n int) *ClusterRow {
	for i := range c.Rows {
		if c.Rows[i].Control == control && c.Rows[i].N == n {
			return &c.Rows[i]
		}
	}
	return nil
}

// maxN returns the largest N measured.
func (c *ClusterReport) maxN() int {
	n := 0
	for _, r := range c.Rows {
		n = max(n, r.N)
	}
	return n
}

// SlowdownChart is the chart of the high-priority join's slowdown
// against the number of low-priority joins, with network control off
// and on.
func (c *ClusterReport) SlowdownChart() *svg.Chart {
	ch := &svg.Chart{
		Title:  fmt.Sprintf("Cluster: high-priority join under N low-priority joins (link %s)", c.Capacity),
		XLabel: "concurrent low-priority joins N",
		YLabel: "slowdown (elapsed / elapsed at N = 0)",
		ZeroX:  true, ZeroY: true,
		Guides: []svg.Guide{{Y: referenceSlowdown, Label: fmt.Sprintf("reference, control off, N = 10: %dx", referenceSlowdown)}},
	}
	model := svg.Series{Name: "off: FIFO model", Dashed: true}
	base := c.row("off", 0)
	for _, control := range []string{"off", "on"} {
		s := svg.Series{Name: "network_control " + control}
		for _, r := range c.Rows {
			if r.Control != control {
				continue
			}
			s.Points = append(s.Points, svg.Point{X: float64(r.N), Y: r.Slowdown})
			if control == "off" && base != nil && base.ElapsedMs > 0 && r.ModelMs > 0 {
				model.Points = append(model.Points, svg.Point{X: float64(r.N), Y: r.ModelMs / base.ElapsedMs})
			}
		}
		ch.Series = append(ch.Series, s)
	}
	if len(model.Points) > 0 {
		ch.Series = append(ch.Series, model)
	}
	return ch
}

func (c *ClusterReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Experiment 5: cluster\n\n")
	if c.Skipped != "" {
		fmt.Fprintf(w, "Not measured: %s.\n\n", c.Skipped)
		return
	}
	drain := func(b int64) float64 { return float64(b) / float64(c.CapacityBytes) * 1000 }
	fmt.Fprintf(w, "The flow-control experiment again, on a real cluster: PostgreSQL's own sharding, postgres_fdw. "+
		"A coordinator and %d data nodes, each a throwaway server:\n\n", len(c.Nodes)-1)
	for _, n := range c.Nodes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintf(w, "\nThe reference's tables `wt1..wt4(c1 int, c2 int, b1 char(1000), b2 char(7000))` are hash-partitioned by c1 on the coordinator, "+
		"each partition a foreign table on one data node, where the data lives: wt1 and wt2 have %d rows each, wt3 and wt4 %d (c2 = c1, unique, so each join counts every row once). "+
		"Every shard connection goes through a sluice route, one per data node, the foreign servers pointing at the routes' ports, and the routes share one link, the cluster's network. "+
		"The client's sessions reach the coordinator through a route of their own.\n\n", c.LowRows, c.HighRows)
	fmt.Fprintf(w, "The shard link has a capacity of %s, 10GE scaled down %.0fx, and a device FIFO of %s (%.1f ms to drain at that capacity). ",
		c.Capacity, c.Scale, units.FormatBytes(c.QueueBytes), drain(c.QueueBytes))
	if c.Calibrated {
		fmt.Fprintf(w, "As in experiment 2 the capacity is calibrated: one low-priority join moved %.0f MB/s from the data nodes through an unlimited link, "+
			"and the link is the largest step at most a tenth of that, so that the link, not the processor, is the bottleneck. ", c.StreamMBps)
	}
	fmt.Fprintf(w, "\n\nThe reference's query is\n\n```sql\n%s\n```\n\n", c.ReferenceSQL)
	fmt.Fprintf(w, "but postgres_fdw fetches only the columns a query needs, so as written each foreign scan fetches (EXPLAIN VERBOSE on the coordinator):\n\n```sql\n%s\n```\n\n",
		strings.Join(c.ReferenceFetch, "\n"))
	fmt.Fprintf(w, "and one run moves %s from the data nodes, %.0f bytes per row of wt1: too little to load a link, where the reference's broadcast moves whole rows. "+
		"So the query that runs counts the first table's wide columns, which makes postgres_fdw fetch them, with the same join and the same count:\n\n```sql\n%s\n```\n\n"+
		"Its foreign scans fetch:\n\n```sql\n%s\n```\n\n",
		units.FormatBytes(c.ReferenceBytes), float64(c.ReferenceBytes)/float64(max(c.LowRows, 1)), c.LowSQL, strings.Join(c.LowFetch, "\n"))
	fmt.Fprintf(w, "and one run moves %s (%.0f bytes per row of wt1). The plan:\n\n```\n%s\n```\n\n",
		units.FormatBytes(c.LowBytes), float64(c.LowBytes)/float64(max(c.LowRows, 1)), c.LowPlan)
	if d := c.LowStatement; d != nil {
		fmt.Fprintf(w, "sluice sees that run as one distributed statement: the client's statement on route %s, with postgres_fdw's statements on the shard routes "+
			"(its cursors' DECLARE, FETCH of %d rows each, CLOSE, and the remote transaction) as its shard statements; ", clusterCoord, c.FetchSize)
		d.writeMarkdown(w)
	}
	fmt.Fprintf(w, "N low-priority joins run in a loop, by user %s, while the high-priority join, the same query on wt3 and wt4 by user %s, is measured %d times per point (elapsed is the median); "+
		"one run of it moves %s from the data nodes:\n\n```sql\n%s\n```\n\n",
		clusterLowUser, clusterHighUser, c.Reps, units.FormatBytes(c.HighBytes), c.HighSQL)
	fmt.Fprintf(w, "The pools bind the client users, on the coordinator's route: %s's pool has the penalty exception rule, %s's network_priority high. "+
		"Each client user reaches the data nodes as a shard role of its own (%s, %s), which no pool binds: the shard sessions are in the default pool, with no rule. "+
		"sluice links every shard session to the coordinator session whose backend opened it, so a shard session's bytes go at the class of the coordinator's pool "+
		"(the high-priority join's shard flows are high class), and the rule on %s's pool judges each low-priority join on its total, every shard's bytes included. In sluice:\n\n```sql\n%s;\n```\n\n",
		clusterLowUser, clusterHighUser, clusterLowShardUser, clusterHighShardUser, clusterLowUser, strings.Join(c.Setup, ";\n"))
	fmt.Fprintf(w, "On the coordinator (passwords masked; `postgres_fdw.application_name = 'fdw %%p'` is set too, which names the coordinator backend in each shard session, the name sluice's distributed_application_name matches: "+
		"sluice saw shard sessions named `%s`):\n\n```sql\n%s;\n```\n\n",
		c.ShardApplication, strings.Join(c.ClusterSetup, ";\n"))
	fmt.Fprintf(w, "An exception rule applies to a statement once it has run elapsedtime and, for bandwidth, at least a second. "+
		"A FETCH of postgres_fdw's default fetch_size (%d rows) lasts far less, but the rule is on the coordinator's pool and judges the distributed statement, "+
		"which lasts the whole join: it fires once per low-priority join, and its penalty demotes the coordinator session and every shard session linked to it, "+
		"so each later FETCH of that join starts in the low class. "+
		"Each point waits until every low-priority join is penalised before each measurement; "+
		"a low-priority join that begins during the measured join (its predecessor having ended) runs unpenalised until the rule fires, and the unpenalised column is the share of 20 ms samples during the measured joins that saw one. "+
		"Slowdown is the elapsed time over the elapsed time at N = 0 with the same setting.\n\n", c.FetchSize)
	c.table().markdown(w)
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
	fmt.Fprintf(w, "\n![cluster slowdown vs N](%s)\n\n", FileClusterSlowdown)
	c.writeDiscussion(w)
}

// flatText says, when the slowdown with control off at N = 1 is more
// than half of that at N = n, that one flow makes most of it; "" when
// not.
func (c *ClusterReport) flatText(n int) string {
	one, last := c.row("off", 1), c.row("off", n)
	if one == nil || last == nil || n <= 1 || one.Slowdown <= last.Slowdown/2 {
		return ""
	}
	return fmt.Sprintf(" So one low-priority join makes most of the slowdown (%.2fx at N = 1), and more of them add only their share of the link (%.2fx at N = %d).",
		one.Slowdown, last.Slowdown, n)
}

// oneJoinText says how far one low-priority join fills the FIFO: each of
// its FETCHes is a round trip of fetch_size rows, and when those are
// fewer bytes than the FIFO holds one join alone leaves it partly empty
// between its FETCHes. "" without an N = 1 point or a model.
func (c *ClusterReport) oneJoinText() string {
	one := c.row("off", 1)
	if one == nil || one.ModelMs <= 0 || c.LowRows <= 0 {
		return ""
	}
	fetch := int64(c.FetchSize) * c.LowBytes / int64(c.LowRows)
	if fetch >= c.QueueBytes {
		return ""
	}
	full := ""
	for _, n := range c.ns() {
		if r := c.row("off", n); n > 1 && r != nil && r.ModelMs > 0 && r.ElapsedMs >= 0.8*r.ModelMs {
			full = fmt.Sprintf("; from N = %d on the joins' FETCHes overlap and keep it about full (%.0f%% of the model)", n, 100*r.ElapsedMs/r.ModelMs)
			break
		}
	}
	return fmt.Sprintf(" A low-priority join is itself a chain of round trips: each FETCH brings %d rows, %s of wt1, less than the FIFO holds, "+
		"so one join alone leaves the FIFO partly empty while its next FETCH makes its way, and at N = 1 the high-priority join took %.0f%% of the model (%.2fx)%s.",
		c.FetchSize, units.FormatBytes(fetch), 100*one.ElapsedMs/one.ModelMs, one.Slowdown, full)
}

// unpenalisedText says how often the samples during the measured joins
// of r saw an unpenalised low-priority shard statement.
func unpenalisedText(r *ClusterRow) string {
	if r.Unpenalised == 0 {
		return fmt.Sprintf("at N = %d no sample taken during the measured joins saw one", r.N)
	}
	return fmt.Sprintf("at N = %d the samples taken during the measured joins saw one in %.0f%% of them", r.N, 100*r.Unpenalised)
}

// writeDiscussion says where the figures differ from the reference's and
// why.
func (c *ClusterReport) writeDiscussion(w io.Writer) {
	n := c.maxN()
	off, on, base, onBase := c.row("off", n), c.row("on", n), c.row("off", 0), c.row("on", 0)
	if off == nil || on == nil || base == nil || onBase == nil || n == 0 || c.CapacityBytes <= 0 {
		return
	}
	ms := func(b int64) float64 { return float64(b) / float64(c.CapacityBytes) * 1000 }
	fifo := ms(c.QueueBytes)
	fmt.Fprintf(w, "What the numbers show: with network_control off, at N = %d the high-priority join took %.1f ms against %.1f ms on an idle link, %.2fx; "+
		"with it on, %.1f ms, %.2fx. The reference measured %dx at N = 10 with its network scheduler off.\n\n",
		n, off.ElapsedMs, base.ElapsedMs, off.Slowdown, on.ElapsedMs, on.Slowdown, referenceSlowdown)
	fmt.Fprintf(w, "- **network_control = off**: the high-priority join is a chain of round trips on the shard connections: one run made %d statements there (%s), "+
		"postgres_fdw's transaction, cursor, FETCH and CLOSE for each partition, one partition after another. "+
		"While the low-priority joins keep the shared FIFO full, every answer waits behind it, %s at %s = %.0f ms, "+
		"on top of sharing the capacity with N flows. The FIFO model column is that arithmetic, elapsed at N = 0 plus (N x %s + %d x %s) / capacity; "+
		"at N = %d the join took %.0f%% of it (below it where the FIFO was not full at every round trip, above it by the processor time the bytes cost).%s%s\n",
		c.HighStatements, c.HighStatementKinds, units.FormatBytes(c.QueueBytes), c.Capacity, fifo,
		units.FormatBytes(c.HighBytes), c.HighStatements, units.FormatBytes(c.QueueBytes), n, 100*off.ElapsedMs/max(off.ModelMs, 1e-9), c.oneJoinText(), c.flatText(n))
	lowWait := float64(c.HighStatements) * ms(c.LowQueueBytes)
	lost := on.ElapsedMs - onBase.ElapsedMs
	rest := "which can account for all of it"
	if lost > lowWait {
		rest = "and the rest is processor time, which the low-priority joins take from the same 2 cores"
	}
	fmt.Fprintf(w, "- **network_control = on**: the penalised joins' shard flows are low class, the high-priority join's high, and at most low_priority_queue_bytes (%s, %.1f ms at %s) of the low bytes sit in the FIFO, "+
		"so each round trip of the high-priority join waits behind that much at most: %d x %.1f ms = %.0f ms against the %.0f ms it lost at N = %d, %s. "+
		"The penalty is the distributed statement's, so a low-priority join runs at normal priority only in its first second: %s.\n\n",
		units.FormatBytes(c.LowQueueBytes), ms(c.LowQueueBytes), c.Capacity, c.HighStatements, ms(c.LowQueueBytes), lowWait,
		lost, n, rest, unpenalisedText(on))
	fmt.Fprintf(w, "Why not 55x: with the FIFO full, the slowdown is about 1 + N + R x FIFO / B, R the join's round trips and B its bytes (here 1 + %d + %d x %s / %s = %.0f at N = %d), "+
		"a ratio of the workload's shape, not of the link's speed: the link here is 10GE scaled down %.0fx, the tables are scaled to fit a machine of 2 cores that runs four servers, sluice and every client, "+
		"and the FIFO is the experiments' %s, %.0f ms here where a 10GE link drains it in %.1f ms. "+
		"The reference's 55x comes from its own workload, whose round trips and bytes per small join are not known here, so the figures compare in shape "+
		"(a large slowdown with control off, growing with N; a small one with it on), not in value. "+
		"Its broadcast joins also sent from every data node to every other at once, several flows per join, where postgres_fdw scans the partitions one after another and pulls everything to the coordinator, so each low-priority join is one flow at a time and the high-priority join pays the FIFO once per round trip of a serial plan. "+
		"postgres_fdw also fetches only the columns a query needs: the reference's query as written moves %s here and would not load the link at all.\n\n",
		n, c.HighStatements, units.FormatBytes(c.QueueBytes), units.FormatBytes(c.HighBytes),
		1+float64(n)+float64(c.HighStatements)*float64(c.QueueBytes)/float64(max(c.HighBytes, 1)), n,
		c.Scale, units.FormatBytes(c.QueueBytes), fifo, float64(c.QueueBytes)/tenGE*1000, units.FormatBytes(c.ReferenceBytes))
}

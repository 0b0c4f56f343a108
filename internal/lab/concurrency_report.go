package lab

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/units"
)

// table returns the concurrency points, one row per active_statements.
func (c *ConcurrencyReport) table() table {
	t := table{head: []string{"active_statements", "high p50 (ms)", "high p99 (ms)", "queue bound (ms)", "p50 vs unlimited", "p99 vs unlimited",
		"ordinary MB/s", "ordinary stmts/s", "throughput vs unlimited", "ordinary stmt (ms)", "running max", "waiting mean",
		"device queue mean (kB)", "device queue max (kB)"}}
	for _, r := range c.Rows {
		t.rows = append(t.rows, []string{
			limitName(r.ActiveStatements), f1(r.P50Ms), f1(r.P99Ms), f1(r.BoundMs), x2(r.P50Ratio), x2(r.LatencyRatio),
			f1(r.MBps), f1(r.StatementsPerSec), x2(r.ThroughputRatio), f1(r.OrdinaryMs), counted(r.ActiveStatements, fmt.Sprint(r.RunningMax)), counted(r.ActiveStatements, f1(r.WaitingMean)),
			f1(r.QueueMeanBytes / 1e3), f1(float64(r.QueueMaxBytes) / 1e3),
		})
	}
	return t
}

// counted returns v, or "-" at an unlimited point, where admission does
// not count statements.
func counted(limit int, v string) string {
	if limit <= 0 {
		return "-"
	}
	return v
}

// x is where a point is drawn: its limit, or the number of sessions for
// unlimited (as many statements as there are sessions may run).
func (c *ConcurrencyReport) x(r ConcurrencyRow) float64 {
	if r.ActiveStatements <= 0 || r.ActiveStatements > c.Sessions {
		return float64(c.Sessions)
	}
	return float64(r.ActiveStatements)
}

// xLabel is the charts' x axis title.
func (c *ConcurrencyReport) xLabel() string {
	return fmt.Sprintf("active_statements of the ordinary pool (unlimited drawn at %d, the sessions)", c.Sessions)
}

// LatencyChart is the chart of the high-priority query's p50 and p99
// against the ordinary pool's active_statements, beside the device-queue
// bound.
func (c *ConcurrencyReport) LatencyChart() *svg.Chart {
	ch := &svg.Chart{
		Title:  fmt.Sprintf("High-priority query under %d ordinary sessions (link %s)", c.Sessions, c.Capacity),
		XLabel: c.xLabel(),
		YLabel: "high-priority query elapsed (ms)",
		ZeroX:  true, ZeroY: true,
	}
	p50 := svg.Series{Name: "p50"}
	p99 := svg.Series{Name: "p99"}
	bound := svg.Series{Name: "device-queue bound: min(statements x (window + chunk), queue) / capacity", Dashed: true}
	for _, r := range c.Rows {
		x := c.x(r)
		p50.Points = append(p50.Points, svg.Point{X: x, Y: r.P50Ms})
		p99.Points = append(p99.Points, svg.Point{X: x, Y: r.P99Ms})
		bound.Points = append(bound.Points, svg.Point{X: x, Y: r.BoundMs})
	}
	sortByX(&p50, &p99, &bound)
	ch.Series = []svg.Series{p50, p99, bound}
	return ch
}

// ThroughputChart is the chart of the ordinary sessions' aggregate
// throughput against active_statements, with the 0.85 x unlimited line.
func (c *ConcurrencyReport) ThroughputChart() *svg.Chart {
	ch := &svg.Chart{
		Title:  fmt.Sprintf("Throughput of %d ordinary sessions (link %s)", c.Sessions, c.Capacity),
		XLabel: c.xLabel(),
		YLabel: "ordinary sessions together (MB/s)",
		ZeroX:  true, ZeroY: true,
	}
	if c.CapacityBytes > 0 {
		ch.Guides = append(ch.Guides, svg.Guide{Y: float64(c.CapacityBytes) / 1e6, Label: "link capacity"})
	}
	if base := c.row(0); base != nil && base.MBps > 0 {
		ch.Guides = append(ch.Guides, svg.Guide{Y: 0.85 * base.MBps, Label: "0.85 x unlimited"})
	}
	s := svg.Series{Name: "ordinary MB/s"}
	for _, r := range c.Rows {
		s.Points = append(s.Points, svg.Point{X: c.x(r), Y: r.MBps})
	}
	sortByX(&s)
	ch.Series = []svg.Series{s}
	return ch
}

// sortByX orders each series' points by x, so lines join neighbours.
func sortByX(ss ...*svg.Series) {
	for _, s := range ss {
		pts := s.Points
		for i := 1; i < len(pts); i++ {
			for j := i; j > 0 && pts[j].X < pts[j-1].X; j-- {
				pts[j], pts[j-1] = pts[j-1], pts[j]
			}
		}
	}
}

func (c *ConcurrencyReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Experiment 3: concurrency\n\n")
	if c.Unsupported != "" {
		fmt.Fprintf(w, "Not measured: this build of sluice refuses `active_statements` (%s).\n\n", c.Unsupported)
		return
	}
	drain := func(b int64) float64 { return float64(b) / float64(c.CapacityBytes) * 1000 }
	fmt.Fprintf(w, "The routes' link has a capacity of %s, a device queue of %s (%.1f ms to drain at that capacity) and a round trip of %s; "+
		"each flow may have %s in flight on it, the send buffer a connection fills. ",
		c.Capacity, units.FormatBytes(c.QueueBytes), drain(c.QueueBytes), units.FormatDuration(time.Duration(c.RTTMs*float64(time.Millisecond))), units.FormatBytes(c.WindowBytes))
	if c.Calibrated {
		fmt.Fprintf(w, "The capacity was chosen as in experiment 2, well below what one session streams (%.0f MB/s), so that the link, not the processor, is the bottleneck. ", c.StreamMBps)
	}
	fmt.Fprintf(w, "%d ordinary sessions run, each in a loop, a statement returning about %.0f kB:\n\n```sql\n%s\n```\n\n"+
		"so that together (%d x %s, a window and a chunk each, see below) they fill the device queue, while a session of a high-priority pool runs a small query, measured %d times per point:\n\n```sql\n%s\n```\n\n",
		c.Sessions, float64(c.OrdinaryBytes)/1e3, c.OrdinarySQL, c.Sessions, units.FormatBytes(c.WindowBytes+chunkBytes),
		c.Reps, c.HighSQL)
	fmt.Fprintf(w, "The pools, and network_control on so the high-priority pool's bytes enter the device queue first:\n\n```sql\n%s;\n```\n\n",
		strings.Join(c.Setup, ";\n"))
	fmt.Fprintf(w, "Each point sets the ordinary pool's limit (`ALTER RESOURCE POOL %s WITH (active_statements=N)`, -1 for unlimited); "+
		"a statement beyond the limit is held in sluice, its request unsent, until a running one ends. "+
		"Ratios are to the unlimited point; throughput is what the ordinary sessions received together from the first high-priority query on, over at least %s, "+
		"ordinary stmt (ms) the mean time of one ordinary statement as its client saw it, time held included; "+
		"running max and waiting mean are the pool's statements holding a slot and waiting for one (SHOW POOLS' running and waiting), sampled with the device queue. "+
		"The device queue is sampled every 10 ms over the same time.\n\n", concPool, units.FormatDuration(time.Duration(c.MeasureSeconds*float64(time.Second))))
	c.table().markdown(w)
	fmt.Fprintf(w, "\n![high-priority latency vs active_statements](%s)\n\n![throughput vs active_statements](%s)\n\n", FileConcLatency, FileConcThroughput)
	perFlow := c.WindowBytes + chunkBytes
	fmt.Fprintf(w, "Why limiting concurrency keeps the device queue short: priority decides which byte enters the device queue next, "+
		"but a byte already inside is ahead of every byte that comes after it, however important. "+
		"A streaming flow keeps its window (%s) in flight, and one more chunk (%s) waits in the queue for the window to free, as a TCP connection keeps its send buffer full; "+
		"what the flows hold beyond capacity x RTT waits in the device queue. "+
		"So the queue holds about %s per running statement: %d unlimited statements fill it (%d x %s against %s, %.1f ms ahead of every high-priority byte), "+
		"while with active_statements = N at most N statements stream and the high-priority query waits behind about N x %s instead "+
		"(the queue bound column: min(N x %s, queue) / capacity). "+
		"The link stays busy as long as the N running statements' windows cover the time a slot takes to pass to the next statement, so the ordinary sessions keep their throughput: "+
		"their statements wait their turn in sluice, where a wait costs only the statements that wait, instead of in the device queue, where it costs every byte behind them.",
		units.FormatBytes(c.WindowBytes), units.FormatBytes(chunkBytes), units.FormatBytes(perFlow),
		c.Sessions, c.Sessions, units.FormatBytes(perFlow), units.FormatBytes(c.QueueBytes),
		drain(min(c.QueueBytes, int64(c.Sessions)*perFlow)), units.FormatBytes(perFlow), units.FormatBytes(perFlow))
	if base, lim := c.row(0), c.row(concTargetLimit); base != nil && lim != nil {
		fmt.Fprintf(w, " Here, at active_statements = %d the high-priority query's p50 went from %.1f ms to %.1f ms (%.2fx), its p99 from %.1f ms to %.1f ms (%.2fx), "+
			"and the device queue from %.0f kB to %.0f kB on average, while the ordinary sessions moved %.1f MB/s against %.1f MB/s unlimited (%.2fx). "+
			"With fewer than 100 measurements p99 is the slowest one, so a single stall of the machine sets it; p50 is what the queue costs.",
			concTargetLimit, base.P50Ms, lim.P50Ms, lim.P50Ratio, base.P99Ms, lim.P99Ms, lim.LatencyRatio, base.QueueMeanBytes/1e3, lim.QueueMeanBytes/1e3,
			lim.MBps, base.MBps, lim.ThroughputRatio)
	}
	fmt.Fprintf(w, "\n\n")
}

package lab

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// whatIfTable is the loader's table: sbtest's row shape (two integers,
// 120 and 60 characters).
const whatIfTable = "sluice_lab_whatif_load"

// WhatIfLoad extrapolates a loader to a table of LoadBytes.
type WhatIfLoad struct {
	RowsPerStatement int     `json:"rows_per_statement"`
	BytesPerRow      float64 `json:"bytes_per_row"`
	LoadBytes        float64 `json:"load_bytes"`
	Rows             float64 `json:"rows"`
	// LoadHours are the hours the load takes.
	LoadHours
}

// LoadHours are a loader's hours for a load, by added RTT: the measured
// per-statement time at each RTT of RTTMs scaled to the load's rows, in
// Hours, and the same of sluice's prediction in PredictedHours.
type LoadHours struct {
	RTTMs          []float64 `json:"rtt_ms"`
	Hours          []float64 `json:"hours"`
	PredictedHours []float64 `json:"predicted_hours"`
}

// whatIfLoadBytes is the table size the report extrapolates to.
const whatIfLoadBytes = 4e9

func loaderJob(b int) string {
	if b == 1 {
		return "loader, 1 row per INSERT"
	}
	return fmt.Sprintf("loader, %d rows per INSERT", b)
}

// loadResult is one loader job: what one run sends, and how long it took
// (the mean of runs).
type loadResult struct {
	rows, statements, transactions int
	bytes                          int64 // SQL text of the INSERTs
	seconds                        float64
	runs                           int
}

// loadFor runs the loader job (see load) again until the plan's
// LoaderTime has passed, at least once, and returns one run's figures with
// the mean duration: a short job measured once at a small RTT is mostly
// noise.
func (r *whatIfRun) loadFor(ctx context.Context, setup conn, app string, b int) (loadResult, error) {
	lr, err := r.load(ctx, setup, app, b)
	total := lr.seconds
	for err == nil && total < r.plan.LoaderTime.Seconds() {
		var more loadResult
		if more, err = r.load(ctx, setup, app, b); err == nil {
			total += more.seconds
			lr.runs++
		}
	}
	if lr.runs > 0 {
		lr.seconds = total / float64(lr.runs)
	}
	return lr, err
}

// load empties the loader's table through setup, then runs the loader
// with b rows per INSERT in a session of its own named app.
func (r *whatIfRun) load(ctx context.Context, setup conn, app string, b int) (loadResult, error) {
	if _, err := setup.run(ctx, "DELETE FROM "+whatIfTable, nil); err != nil {
		return loadResult{}, fmt.Errorf("empty %s: %w", whatIfTable, err)
	}
	c, err := r.connect(ctx, app)
	if err != nil {
		return loadResult{}, err
	}
	defer c.close()
	n := r.plan.Statements
	if b > 1 {
		n = r.plan.BatchStatements
	}
	// The statements are built before the clock starts: the loader's
	// time is the network's and the server's, not the lab's.
	stmts := make([]string, n)
	res := loadResult{statements: n}
	for i := range stmts {
		stmts[i] = insertSQL(i*b, b)
		res.bytes += int64(len(stmts[i]))
	}
	res.rows = n * b
	t0 := r.clk.Now()
	for i, q := range stmts {
		if i%r.plan.CommitEvery == 0 {
			if _, err := c.run(ctx, "BEGIN", nil); err != nil {
				return res, err
			}
		}
		if _, err := c.run(ctx, q, nil); err != nil {
			return res, err
		}
		if (i+1)%r.plan.CommitEvery == 0 || i == n-1 {
			if _, err := c.run(ctx, "COMMIT", nil); err != nil {
				return res, err
			}
			res.transactions++
		}
	}
	res.seconds = r.clk.Now().Sub(t0).Seconds()
	res.runs = 1
	return res, nil
}

// loaderDDL creates the loader's table.
const loaderDDL = "CREATE TABLE " + whatIfTable + " (id INTEGER NOT NULL, k INTEGER NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL)"

// insertSQL is an INSERT of the n rows from id first.
func insertSQL(first, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + whatIfTable + " (id, k, c, pad) VALUES ")
	for i := range n {
		id := first + i + 1
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d,%d,'%s','%s')", id, id*7919%100000, digits(id, 120), digits(id*31, 60))
	}
	return b.String()
}

// digits returns n characters of groups of digits derived from seed,
// like sbtest's c and pad columns.
func digits(seed, n int) string {
	var b strings.Builder
	for x := uint64(seed)*2654435761 + 1; b.Len() < n; x = x*6364136223846793005 + 1442695040888963407 {
		if b.Len() > 0 {
			b.WriteByte('-')
		}
		b.WriteString(strconv.FormatUint(x%100000000000, 10))
	}
	return b.String()[:n]
}

// extrapolate scales each loader's measured time per statement at each
// RTT to a table of whatIfLoadBytes.
func extrapolate(rep *WhatIfReport, batches []int) []WhatIfLoad {
	var out []WhatIfLoad
	for _, b := range batches {
		var app *WhatIfApp
		for i := range rep.Baseline {
			if rep.Baseline[i].RowsPerStatement == b {
				app = &rep.Baseline[i]
			}
		}
		if app == nil || app.BytesPerRow <= 0 || app.Statements == 0 {
			continue
		}
		l := WhatIfLoad{RowsPerStatement: b, BytesPerRow: app.BytesPerRow, LoadBytes: whatIfLoadBytes, Rows: whatIfLoadBytes / app.BytesPerRow}
		for _, row := range rep.Rows {
			if row.Job != loaderJob(b) || row.Seconds <= 0 {
				continue
			}
			scale := l.Rows / float64(b) / float64(app.Statements) / 3600 // statements in the load, per statement of a run, in hours
			l.RTTMs = append(l.RTTMs, row.RTTMs)
			l.Hours = append(l.Hours, row.Seconds*scale)
			l.PredictedHours = append(l.PredictedHours, row.PredictedSeconds*scale)
		}
		out = append(out, l)
	}
	return out
}

// loaderRepeats says how the loader's duration is measured when its job
// is repeated, or nothing.
func loaderRepeats(seconds float64) string {
	if seconds <= 0 {
		return ""
	}
	return fmt.Sprintf("A loader job (unshaped too) runs again and again until %s s have passed; its duration is the mean of those runs. ", fmtNum(seconds))
}

// loadTable returns the loaders extrapolated to a 4 GB table.
func (w *WhatIfReport) loadTable() table {
	head := []string{"rows per INSERT", "bytes/row", "rows in 4 GB"}
	var rtts []float64
	for _, l := range w.Loads {
		for _, r := range l.RTTMs {
			if !slices.Contains(rtts, r) {
				rtts = append(rtts, r)
			}
		}
	}
	slices.Sort(rtts)
	for _, r := range rtts {
		head = append(head, fmt.Sprintf("hours at +%s ms", fmtNum(r)))
		if r > 0 {
			head = append(head, fmt.Sprintf("predicted at +%s ms", fmtNum(r)))
		}
	}
	t := table{head: head}
	for _, l := range w.Loads {
		cells := []string{fmt.Sprint(l.RowsPerStatement), f1(l.BytesPerRow), fmt.Sprintf("%.3g", l.Rows)}
		for _, r := range rtts {
			c, pc := "-", "-"
			if i := slices.Index(l.RTTMs, r); i >= 0 {
				c = hours(l.Hours[i])
				if i < len(l.PredictedHours) && l.PredictedHours[i] > 0 {
					pc = hours(l.PredictedHours[i])
				}
			}
			cells = append(cells, c)
			if r > 0 {
				cells = append(cells, pc)
			}
		}
		t.rows = append(t.rows, cells)
	}
	return t
}

// writeLoads writes what the loaders' figures show, scaled to a 4 GB
// table, and their table; with no loader only the end of the list.
func (w *WhatIfReport) writeLoads(out io.Writer) {
	if len(w.Loads) == 0 {
		fmt.Fprintln(out)
		return
	}
	one := w.Loads[0]
	at := func(l WhatIfLoad, rtt float64) (measured, predicted float64) {
		if i := slices.Index(l.RTTMs, rtt); i >= 0 {
			measured = l.Hours[i]
			if i < len(l.PredictedHours) {
				predicted = l.PredictedHours[i]
			}
		}
		return measured, predicted
	}
	m0, _ := at(one, 0)
	m10, p10 := at(one, 10)
	fmt.Fprintf(out, "- A row-at-a-time sync pays one round trip per row. At %.0f bytes per row (the SQL the loader sent) a 4 GB table is %.3g rows", one.BytesPerRow, one.Rows)
	if p10 > 0 {
		fmt.Fprintf(out, ": %.3g rows x 10 ms is %.0f hours of waiting alone, before the server does anything. "+
			"Scaled up from these runs, the load takes %s hours unshaped and %s hours at +10 ms as measured (%s as sluice predicted from the unshaped run)",
			one.Rows, one.Rows*0.010/3600, hours(m0), hours(m10), hours(p10))
	}
	fmt.Fprintf(out, ". Batching buys the round trips back: with k rows per INSERT, k rows share a round trip, and the time goes to the server and to moving the bytes")
	if len(w.Loads) > 1 {
		last := w.Loads[len(w.Loads)-1]
		lm10, lp10 := at(last, 10)
		if lp10 > 0 {
			fmt.Fprintf(out, "; at %d rows per INSERT the same table takes %s hours at +10 ms (%s predicted)", last.RowsPerStatement, hours(lm10), hours(lp10))
		}
	}
	fmt.Fprintf(out, ".\n\n")
	w.loadTable().markdown(out)
	fmt.Fprintf(out, "\nThe hours are each loader's measured time per INSERT at that RTT x the INSERTs a 4 GB table needs "+
		"(4 GB / bytes per row / rows per INSERT), with the same transaction size; bytes per row is the SQL the loader sent.\n\n")
}

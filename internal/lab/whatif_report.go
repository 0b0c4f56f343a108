package lab

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/lab/svg"
)

// FileWhatIf is the what-if experiment's chart.
const FileWhatIf = "whatif_predicted_vs_measured.svg"

// Target names of the what-if experiment.
const (
	TargetWhatIfTPS  = "whatif_tps_at_10ms_vs_prediction"
	TargetWhatIfLoad = "whatif_load_at_10ms_vs_prediction"
)

// validate checks p and fills in its defaults; an empty p is valid (the
// experiment is skipped).
func (p *WhatIfPlan) validate() error {
	if len(p.RTTs) == 0 {
		return nil
	}
	if err := inRange(p.RTTs, 10*time.Second, "added RTT", "0 to 10 s"); err != nil {
		return err
	}
	p.RTTs = withZero(slices.Clone(p.RTTs))
	if len(p.RTTs) < 2 {
		return &UsageError{Msg: "the what-if experiment needs an added RTT above 0"}
	}
	if err := inRange(p.Batches, 10000, "rows per INSERT", "1 to 10000"); err != nil {
		return err
	}
	if slices.Contains(p.Batches, 0) {
		return &UsageError{Msg: "rows per INSERT must be at least 1"}
	}
	p.Batches = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(p.Batches), 1))))
	orDefault(&p.Tables, 1)
	orDefault(&p.TableSize, 10000)
	orDefault(&p.Time, 10*time.Second)
	orDefault(&p.Statements, 200)
	orDefault(&p.BatchStatements, 50)
	orDefault(&p.CommitEvery, 10)
	if p.Threads < 0 {
		return &UsageError{Msg: "threads must be >= 0"}
	}
	return nil
}

// app returns the baseline of job, or nil.
func (w *WhatIfReport) app(job string) *WhatIfApp {
	for i := range w.Baseline {
		if w.Baseline[i].Job == job {
			return &w.Baseline[i]
		}
	}
	return nil
}

// row returns the row of job at rtt ms, or nil.
func (w *WhatIfReport) row(job string, rtt float64) *WhatIfRow {
	for i := range w.Rows {
		if w.Rows[i].Job == job && w.Rows[i].RTTMs == rtt {
			return &w.Rows[i]
		}
	}
	return nil
}

// jobs returns the jobs in the order of the rows.
func (w *WhatIfReport) jobs() []string {
	var out []string
	for _, r := range w.Rows {
		if !slices.Contains(out, r.Job) {
			out = append(out, r.Job)
		}
	}
	return out
}

// targets returns the experiment's targets: the benchmark's TPS and the
// row-at-a-time loader's duration at every added RTT within 10% of the
// predictions, each target's value the largest miss. A nil report
// (experiment not run) leaves them unmeasured.
func (w *WhatIfReport) targets() []Target {
	want := fmt.Sprintf("within %.0f%%", 100*whatIfTarget)
	at := "every added RTT"
	if w != nil {
		if rtts := w.addedRTTs(); len(rtts) > 0 {
			at = "+" + strings.Join(rtts, ", +") + " ms"
		}
	}
	tps := Target{Name: TargetWhatIfTPS, Description: "what-if: oltp_read_write TPS at " + at + " vs sluice's prediction, largest miss", Want: want}
	load := Target{Name: TargetWhatIfLoad, Description: "what-if: row-at-a-time load at " + at + " vs sluice's prediction, largest miss", Want: want}
	if w == nil {
		return []Target{tps, load}
	}
	worst := func(t *Target, job string, ok func(*WhatIfRow) bool) {
		for i := range w.Rows {
			r := &w.Rows[i]
			if r.Job != job || r.RTTMs <= 0 || !ok(r) {
				continue
			}
			if !t.Measured || math.Abs(r.Error) > math.Abs(t.Value) {
				t.Measured, t.Value = true, r.Error
			}
		}
		t.Met = t.Measured && math.Abs(t.Value) <= whatIfTarget
	}
	worst(&tps, jobOLTP, func(r *WhatIfRow) bool { return r.PredictedTPS > 0 && r.TPS > 0 })
	worst(&load, loaderJob(1), func(r *WhatIfRow) bool { return r.PredictedSeconds > 0 && r.Seconds > 0 })
	return []Target{tps, load}
}

// addedRTTs returns the RTTs above 0 of the rows, in ms as printed, in
// order.
func (w *WhatIfReport) addedRTTs() []string {
	var out []string
	for _, r := range w.Rows {
		if v := fmtNum(r.RTTMs); r.RTTMs > 0 && !slices.Contains(out, v) {
			out = append(out, v)
		}
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

// dash formats v with f, or "-" for 0 (not measured or not predicted).
func dash(v float64, f func(float64) string) string {
	if v == 0 {
		return "-"
	}
	return f(v)
}

func f3(v float64) string { return fmt.Sprintf("%.3f", v) }

func pct(v float64) string { return fmt.Sprintf("%+.1f%%", 100*v) }

// table returns the predictions beside the measurements.
func (w *WhatIfReport) table() table {
	t := table{head: []string{"job", "added RTT (ms)", "predicted TPS", "measured TPS", "predicted latency (ms)", "measured latency (ms)",
		"predicted duration (s)", "measured duration (s)", "error", "release late (µs)", "RTT as applied (ms)", "error at applied RTT"}}
	for _, r := range w.Rows {
		e := "-"
		if r.PredictedTPS > 0 {
			e = pct(r.Error)
		}
		late, applied, ae := "-", "-", "-"
		if r.Releases > 0 {
			late = fmt.Sprintf("%+.1f", r.LateUs)
		}
		if r.AppliedRTTMs > 0 {
			applied, ae = f3(r.AppliedRTTMs), pct(r.AppliedError)
		}
		t.rows = append(t.rows, []string{r.Job, fmtNum(r.RTTMs), dash(r.PredictedTPS, f1), dash(r.TPS, f1),
			dash(r.PredictedLatencyMs, f2), dash(r.LatencyMs, f2), dash(r.PredictedSeconds, f3), dash(r.Seconds, f3), e, late, applied, ae})
	}
	return t
}

// baselineTable returns what sluice measured of each job, unshaped.
func (w *WhatIfReport) baselineTable() table {
	t := table{head: []string{"job", "application", "sessions", "transactions", "TPS", "concurrency", "round trips/txn", "round trips p95",
		"latency (ms)", "cycle (ms)", "server (ms)", "client (ms)", "network share", "bytes/row"}}
	for _, a := range w.Baseline {
		t.rows = append(t.rows, []string{a.Job, a.Application, fmt.Sprint(a.Sessions), fmt.Sprint(a.Transactions), f1(a.TPS), f2(a.Concurrency),
			f1(a.RoundTrips), f1(a.RoundTripsP95), f2(a.LatencyMs), f2(a.CycleMs), f2(a.ServerMs), f2(a.ClientMs),
			fmt.Sprintf("%.1f%%", 100*a.NetworkShare), dash(a.BytesPerRow, f1)})
	}
	return t
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

// hours formats a duration in hours with sensible precision.
func hours(h float64) string {
	switch {
	case h >= 10:
		return fmt.Sprintf("%.0f", h)
	case h >= 0.1:
		return fmt.Sprintf("%.2f", h)
	}
	return fmt.Sprintf("%.4f", h)
}

// Chart is measured against predicted, relative to the unshaped run, per
// job: throughput for the benchmark, 1 / duration for the loaders, so
// that every job starts at 1 and its fall with RTT compares on one axis.
func (w *WhatIfReport) Chart() *svg.Chart {
	c := &svg.Chart{
		Title:  "What-if: sluice's predictions from unshaped traffic vs measured at added RTT",
		XLabel: "added round-trip time (ms)",
		YLabel: "throughput relative to unshaped (log scale)",
		ZeroX:  true,
		LogY:   true,
	}
	// The measurements first, each in a colour of its own; each
	// prediction in its measurement's.
	var meas, pred []svg.Series
	for _, job := range w.jobs() {
		base := w.row(job, 0)
		if base == nil {
			continue
		}
		rate := func(r WhatIfRow, predicted bool) float64 {
			switch {
			case job == jobOLTP && predicted:
				return r.PredictedTPS
			case job == jobOLTP:
				return r.TPS
			case predicted && r.PredictedSeconds > 0:
				return 1 / r.PredictedSeconds
			case !predicted && r.Seconds > 0:
				return 1 / r.Seconds
			}
			return 0
		}
		b := rate(*base, false)
		if b <= 0 {
			continue
		}
		m := svg.Series{Name: job + ": measured", Points: []svg.Point{{X: 0, Y: 1}}}
		p := svg.Series{Name: job + ": predicted", Dashed: true, Points: []svg.Point{{X: 0, Y: 1}}}
		for _, r := range w.Rows {
			if r.Job != job || r.RTTMs == 0 {
				continue
			}
			if v := rate(r, false); v > 0 {
				m.Points = append(m.Points, svg.Point{X: r.RTTMs, Y: v / b})
			}
			if v := rate(r, true); v > 0 {
				p.Points = append(p.Points, svg.Point{X: r.RTTMs, Y: v / b})
			}
		}
		meas, pred = append(meas, m), append(pred, p)
	}
	for i := range pred {
		pred[i].Like = i + 1
	}
	c.Series = append(meas, pred...)
	return c
}

func (w *WhatIfReport) writeMarkdown(out io.Writer) {
	fmt.Fprintf(out, "## Experiment 4: what-if\n\n")
	fmt.Fprintf(out, "sluice watches every session's requests and answers and tells, per application, how much of a transaction is waiting on round trips "+
		"and what its transactions and throughput would become at a larger round-trip time, without adding any delay. "+
		"This experiment checks those predictions. Two jobs run unshaped through sluice: `%s` (%s, %s of %d rows, %.0f s after %.0f s of warm-up) "+
		"and a loader in one session that inserts rows in transactions of %d INSERT statements (BEGIN, the INSERTs, COMMIT), "+
		"the shape of a row-at-a-time sync job, once with one row per INSERT and once per batched size. "+
		"Each job's sessions carry their own application name, so sluice's what-if table (what `SHOW WHATIF`, the `whatif` view and `GET /api/whatif` show) "+
		"keeps them apart; right after each job's unshaped run the lab reads its row and predicts it at each RTT.\n\n",
		w.Workload, plural(w.Threads, "thread"), plural(w.Tables, "table"), w.TableSize, w.RunSeconds, w.WarmupSeconds, w.CommitEvery)
	fmt.Fprintf(out, "What sluice measured of each job, unshaped:\n\n")
	w.baselineTable().markdown(out)
	fmt.Fprintf(out, "\nsluice's TPS is over its window, or the time since it first saw the application, and never over less than a second: "+
		"a loader's run is shorter, so its TPS here is not the run's; its predictions use the cycle and round trips, not this figure.\n")
	fmt.Fprintf(out, "\nThen each delay is applied on the link (half the RTT each way, as in experiment 1) and every job runs again. "+
		loaderRepeats(w.LoaderSeconds)+
		"sluice predicts, per application, latency' = L + r x RTT and throughput' = TPS x cycle / (cycle + r x RTT) "+
		"(L the mean transaction latency, r the round trips per transaction, cycle L plus the client's time until its next transaction), "+
		"and a single-stream job of n transactions takes n x (cycle + r x RTT). "+
		"For the benchmark the figure compared is TPS; for a loader, the run's duration. "+
		"The RTT 0 rows compare sluice's own figures with the run's. Error is measured / predicted - 1. "+
		"RTT as applied is what a minimal round trip through the route (SELECT 1 or a MySQL ping, the median of %d before the runs) took more than unshaped: "+
		"the delay line's lateness and the wake-ups after each delayed message included; the last column is the error against the prediction at that RTT.\n\n", pings)
	w.table().markdown(out)
	fmt.Fprintf(out, "\n![predicted vs measured](%s)\n\n", FileWhatIf)
	w.explain(out)
}

// explain writes what the figures show, from the figures.
func (w *WhatIfReport) explain(out io.Writer) {
	fmt.Fprintf(out, "What the numbers show:\n\n")
	var worst *WhatIfRow
	for i := range w.Rows {
		r := &w.Rows[i]
		if r.RTTMs > 0 && r.PredictedTPS > 0 && (worst == nil || math.Abs(r.Error) > math.Abs(worst.Error)) {
			worst = r
		}
	}
	if worst != nil {
		fmt.Fprintf(out, "- The largest miss is %s at +%s ms: %s. ", worst.Job, fmtNum(worst.RTTMs), pct(worst.Error))
		if math.Abs(worst.Error) <= whatIfTarget {
			fmt.Fprintf(out, "Every prediction is within %.0f%% of what the delay really did.\n", 100*whatIfTarget)
		} else {
			fmt.Fprintf(out, "The model counts the round trips the client waited for and adds the RTT to each; what it cannot see from unshaped traffic is "+
				"time per round trip that only the delay brings: ")
			if worst.AppliedRTTMs > 0 {
				fmt.Fprintf(out, "a minimal round trip through the route took %.3f ms more than unshaped, not %s "+
					"(the delay line released its chunks %+.0f µs late on average in that run, and client and server must wake after each delayed message); "+
					"predicted at that RTT the error is %s; ", worst.AppliedRTTMs, fmtNum(worst.RTTMs), worst.LateUs, pct(worst.AppliedError))
			}
			if a := w.app(worst.Job); a != nil && a.RoundTrips > 0 && worst.LatencyMs > 0 {
				rtt := worst.AppliedRTTMs
				if rtt == 0 {
					rtt = worst.RTTMs
				}
				rest := worst.LatencyMs - a.RoundTrips*rtt
				fmt.Fprintf(out, "and the time each transaction spends outside the round trips' added delay, %.2f ms unshaped and %.2f ms in that run "+
					"(measured latency less %.1f round trips x the applied RTT): waking the client, sluice and the server after every delayed message on a busy machine, "+
					"and locks held for the longer transactions", a.LatencyMs, rest, a.RoundTrips)
				if base := w.row(worst.Job, 0); worst.Job == jobOLTP && base != nil && worst.IgnoredErrors > base.IgnoredErrors {
					fmt.Fprintf(out, " (the benchmark met %d ignored errors, deadlocks and lock timeouts, at +%s ms against %d unshaped)",
						worst.IgnoredErrors, fmtNum(worst.RTTMs), base.IgnoredErrors)
				}
			}
			fmt.Fprintf(out, ".\n")
		}
	}
	if w.BenchRoundTrips > 0 {
		if a := w.app(jobOLTP); a != nil && math.Abs(a.RoundTrips/w.BenchRoundTrips-1) > 0.02 {
			fmt.Fprintf(out, "- sluice counted %.1f round trips per %s transaction, the benchmark %.1f: in sluice's table every request outside a transaction "+
				"(each session preparing its statements when it connects, a transaction cut short by a deadlock and retried) is a transaction of its own, "+
				"which lowers the mean of a short run and the latency it predicts.\n",
				a.RoundTrips, jobOLTP, w.BenchRoundTrips)
		}
	}
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

package lab

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/whatif"
)

// predictBasis is what a job's predictions come from: its row of the
// what-if table and, for a loader, the transactions of a run.
type predictBasis struct {
	app  whatif.App
	txns int
}

// headlineError is the row's measured headline figure over the
// predicted one, less 1: duration for a loader, TPS for the benchmark.
func headlineError(row WhatIfRow, predictedTPS, predictedSeconds float64) float64 {
	switch {
	case row.Job != jobOLTP && predictedSeconds > 0:
		return row.Seconds/predictedSeconds - 1
	case row.Job == jobOLTP && predictedTPS > 0:
		return row.TPS/predictedTPS - 1
	}
	return 0
}

// jobRank orders the benchmark first, then the loaders by batch size.
func jobRank(job string) int {
	if job == jobOLTP {
		return 0
	}
	var b int
	fmt.Sscanf(strings.TrimPrefix(job, "loader, "), "%d", &b)
	return 1 + b
}

// whatIfJob is one job of the experiment and its application name.
type whatIfJob struct {
	job, app string
	b        int // rows per INSERT; 0 for the benchmark
}

func (r *whatIfRun) jobs() []whatIfJob {
	jobs := []whatIfJob{{jobOLTP, whatIfOLTPApp, 0}}
	for _, b := range r.plan.Batches {
		jobs = append(jobs, whatIfJob{loaderJob(b), whatIfLoaderApp + strconv.Itoa(b), b})
	}
	return jobs
}

// predict reads job j from sluice's what-if table (what SHOW WHATIF
// shows), right after the job's unshaped run, and adds its baseline and a
// predicted row per RTT to rep. lr is the loader's run (nil for the
// benchmark): its transactions make the predicted durations.
func (r *whatIfRun) predict(ctx context.Context, rep *WhatIfReport, j whatIfJob, lr *loadResult) error {
	a, ok, err := r.s.whatIfApp(ctx, r.clk, r.db, j.app)
	if err != nil {
		return fmt.Errorf("what-if predictions: %w", err)
	}
	if !ok {
		return fmt.Errorf("what-if predictions: sluice's what-if table has no application %q", j.app)
	}
	app := WhatIfApp{Job: j.job, ReportApp: whatif.NewReportApp(a, nil)}
	if lr != nil {
		app.RowsPerStatement, app.RunTransactions, app.Statements = j.b, lr.transactions, lr.statements
		app.BytesPerRow = float64(lr.bytes) / float64(lr.rows)
	}
	rep.Baseline = append(rep.Baseline, app)
	b := predictBasis{app: a}
	if lr != nil {
		b.txns = lr.transactions
	}
	r.basis[j.job] = b
	for _, rtt := range r.plan.RTTs {
		pr := whatif.Predict(a, rtt)
		row := WhatIfRow{Job: j.job, RTTMs: rttMs(rtt), PredictedTPS: pr.TPS, PredictedLatencyMs: durMs(pr.Latency)}
		what := fmt.Sprintf("%.1f TPS", pr.TPS)
		if lr != nil {
			row.PredictedSeconds = whatif.JobDuration(a, int64(lr.transactions), rtt).Seconds()
			if row.PredictedSeconds > 0 {
				// The run's own rate: sluice's TPS is over its window.
				row.PredictedTPS = float64(lr.transactions) / row.PredictedSeconds
			}
			what = fmt.Sprintf("%s in %.3f s", plural(lr.transactions, "transaction"), row.PredictedSeconds)
		}
		rep.Rows = append(rep.Rows, row)
		if rtt > 0 {
			r.p.step("sluice predicts %s at added RTT %s: %s, latency %.2f ms", j.job, fmtRTT(rtt), what, row.PredictedLatencyMs)
		}
	}
	r.p.step("sluice saw %s: %.1f round trips per transaction, latency %.2f ms, cycle %.2f ms, network share %.1f%%",
		j.job, a.RoundTrips, durMs(a.Latency), durMs(a.Cycle), 100*a.NetworkShare)
	return nil
}

// whatIfApp returns application app of db's user and database from the
// stack's what-if table over the window ending at clk's now. It reads
// the table as the consoles do, once the proxy has observed every byte
// the kernel fast path relayed (SyncRegistry): a job whose transactions
// all went through the kernel is in the table only once the journal is
// drained. The error is ctx's, if it ends first.
func (s *sluice) whatIfApp(ctx context.Context, clk clock.Clock, db *database, app string) (whatif.App, bool, error) {
	if err := s.st.Proxy().SyncRegistry(ctx); err != nil {
		return whatif.App{}, false, err
	}
	for _, a := range s.st.WhatIf().Snapshot(clk.Now()) {
		if a.Application == app && a.User == db.user && a.Database == db.dbname {
			return a, true, nil
		}
	}
	return whatif.App{}, false, nil
}

// compare fills each predicted row of rep with what was measured
// (measured, by job and RTT in ms), the error against the prediction,
// the RTT a minimal round trip really added (pingMs, by RTT in ms, less
// its unshaped time, and never less than the RTT) and the error against
// the prediction at that RTT.
func (r *whatIfRun) compare(rep *WhatIfReport, measured map[string]map[float64]WhatIfRow, pingMs map[float64]float64) {
	for i := range rep.Rows {
		row := &rep.Rows[i]
		m := measured[row.Job][row.RTTMs]
		row.TPS, row.LatencyMs, row.Seconds, row.Runs, row.Releases, row.LateUs = m.TPS, m.LatencyMs, m.Seconds, m.Runs, m.Releases, m.LateUs
		row.Error = headlineError(*row, row.PredictedTPS, row.PredictedSeconds)
		row.PingMs, row.IgnoredErrors = pingMs[row.RTTMs], m.IgnoredErrors
		if b, ok := r.basis[row.Job]; ok && row.RTTMs > 0 {
			// A delay line never releases early: a round trip that seems
			// to add less than the RTT had its unshaped one slowed by the
			// machine's load, and the RTT is what was applied at least.
			applied := time.Duration(float64(time.Millisecond) * max(pingMs[row.RTTMs]-pingMs[0], row.RTTMs))
			row.AppliedRTTMs = durMs(applied)
			tps, secs := whatif.Predict(b.app, applied).TPS, 0.0
			if b.txns > 0 {
				secs = whatif.JobDuration(b.app, int64(b.txns), applied).Seconds()
				tps = float64(b.txns) / secs
			}
			row.AppliedError = headlineError(*row, tps, secs)
		}
	}
}

// WhatIfApp is one job as sluice's what-if table showed it at added RTT
// 0 (SHOW WHATIF's columns).
type WhatIfApp struct {
	Job string `json:"job"`
	// ReportApp is the job's application as GET /api/whatif shows it,
	// without predictions: the rows hold them, beside the measurements.
	// Its Transactions is what sluice counted in its window.
	whatif.ReportApp
	// RowsPerStatement is the loader's INSERT size; 0 for the benchmark.
	RowsPerStatement int `json:"rows_per_statement,omitempty"`
	// RunTransactions and Statements are what one loader run sends.
	RunTransactions int `json:"run_transactions,omitempty"`
	Statements      int `json:"statements,omitempty"`
	// BytesPerRow is the SQL text the loader sent per row.
	BytesPerRow float64 `json:"bytes_per_row,omitempty"`
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

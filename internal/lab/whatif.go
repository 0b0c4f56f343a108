package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/lab/svg"
)

// whatIfRTTs are the RTTs, in ms, the quick and full plans check.
var whatIfRTTs = ms(1, 5, 10)

// whatIfTarget is how close (relative error) the predictions at 10 ms
// must come to the measurements.
const whatIfTarget = 0.10

// Application names of the experiment's sessions, so that sluice's
// what-if table keeps each job apart from the rest of the lab.
const (
	whatIfSetupApp  = "sluice-lab-setup"
	whatIfOLTPApp   = "sluice-lab-oltp"
	whatIfLoaderApp = "sluice-lab-loader-" // + rows per INSERT
)

// job names.
const jobOLTP = "oltp_read_write"

// WhatIfReport is the what-if experiment's outcome.
type WhatIfReport struct {
	BenchSetup
	CommitEvery int `json:"commit_every_statements"`
	// LoaderSeconds is WhatIfPlan.LoaderTime.
	LoaderSeconds float64 `json:"loader_seconds,omitempty"`
	// BenchRoundTrips is the round trips per transaction the benchmark
	// itself counted in its unshaped run.
	BenchRoundTrips float64 `json:"bench_round_trips_per_transaction"`
	// Baseline is what sluice measured of each job, unshaped.
	Baseline []WhatIfApp `json:"baseline"`
	// Rows are the predictions beside the measurements, by job and RTT.
	Rows []WhatIfRow `json:"runs"`
	// Loads extrapolate each loader to a 4 GB table.
	Loads []WhatIfLoad `json:"loads"`
}

// WhatIfPlan is the scale of the what-if experiment.
type WhatIfPlan struct {
	// RTTs are the added round-trip times at which sluice's predictions
	// are checked; 0 (the unshaped baseline the predictions come from)
	// is always measured and added when missing. Empty skips the
	// experiment.
	RTTs []time.Duration
	// BenchPlan is oltp_read_write's flags; Threads 0 picks 1 on the
	// embedded backend and on a server one per core, at most 4: more
	// threads than cores keep the CPUs busy unshaped, the waiting an
	// added RTT brings frees them, and that the model does not predict
	// (see package whatif's limits).
	BenchPlan
	// Batches are the loader's rows per INSERT statement: 1 (row at a
	// time, always run and added when missing) and the batched sizes.
	Batches []int
	// Statements is how many INSERT statements a row-at-a-time loader
	// run sends; 0 means 200.
	Statements int
	// BatchStatements is how many INSERT statements a batched loader
	// run sends; 0 means 50.
	BatchStatements int
	// CommitEvery is how many INSERT statements the loader sends per
	// transaction (BEGIN, CommitEvery INSERTs, COMMIT); 0 means 10.
	CommitEvery int
	// LoaderTime is how long a loader job is measured at each setting at
	// least: the job (Statements or BatchStatements INSERTs into an
	// emptied table) runs again until this much time has passed, and its
	// duration is the mean of the runs. 0 runs each job once.
	LoaderTime time.Duration
}

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
	orDefault(&p.Statements, 200)
	orDefault(&p.BatchStatements, 50)
	orDefault(&p.CommitEvery, 10)
	return p.BenchPlan.validate()
}

// whatIfRun is the state of one what-if experiment.
type whatIfRun struct {
	*env
	plan  WhatIfPlan
	basis map[string]predictBasis // by job, from its unshaped run
}

// options returns the benchmark's options, its sessions named app.
func (r *whatIfRun) options(app string) bench.Options {
	threads := r.plan.Threads
	if threads == 0 && r.db.kind != BackendEmbedded {
		threads = min(4, runtime.NumCPU())
	}
	lr := latencyRun{env: r.env, plan: LatencyPlan{BenchPlan: r.plan.BenchPlan}}
	lr.plan.Threads = threads
	o := lr.options()
	o.DSN = withApp(o.DSN, r.db.protocol, app)
	return o
}

func runWhatIf(ctx context.Context, e *env) (*WhatIfReport, error) {
	r := &whatIfRun{env: e, plan: e.plan.WhatIf}
	p := r.p
	r.basis = map[string]predictBasis{}
	o := r.options(whatIfOLTPApp)
	rep := &WhatIfReport{
		BenchSetup: benchSetup(o), CommitEvery: r.plan.CommitEvery, LoaderSeconds: r.plan.LoaderTime.Seconds(),
	}
	p.printf("== Experiment 4: what-if ==\n")
	p.printf("%s (%s) and a single-session loader (BEGIN, %d INSERTs, COMMIT; %s rows per INSERT) run unshaped through sluice; "+
		"sluice's what-if table predicts them at added RTT %s, then each delay is applied on the link (RTT/2 each way) and measured\n",
		o.Workload, plural(o.Threads, "thread"), r.plan.CommitEvery, joinInts(r.plan.Batches), joinRTTs(r.plan.RTTs[1:]))

	prep := r.options(whatIfSetupApp)
	setup, err := r.connect(ctx, whatIfSetupApp)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer setup.close()
	p.step("prepare: loading %s x %d rows", plural(o.Tables, "table"), o.TableSize)
	if err := r.prepare(ctx, prep); err != nil {
		if !errors.Is(err, errTablesExist) {
			r.cleanup(ctx, prep, setup, false)
		}
		return nil, err
	}
	if _, err := setup.run(ctx, loaderDDL, nil); err != nil {
		r.cleanup(ctx, prep, setup, false)
		return nil, fmt.Errorf("create table %s: %w (drop it if a previous run left it)", whatIfTable, err)
	}
	defer r.cleanup(ctx, prep, setup, true)

	// A first load into a new table pays for growing it; the loaders
	// run once, unmeasured, so that every measured run starts alike.
	if err := r.s.setRTT(ctx, 0); err != nil {
		return nil, err
	}
	for _, b := range r.plan.Batches {
		if _, err := r.load(ctx, setup, whatIfSetupApp, b); err != nil {
			return nil, fmt.Errorf("loader warm-up (%d rows per INSERT): %w", b, err)
		}
	}
	p.step("warmed up the loaders (one unmeasured run each)")
	measured := map[string]map[float64]WhatIfRow{}
	record := func(row WhatIfRow) {
		if measured[row.Job] == nil {
			measured[row.Job] = map[float64]WhatIfRow{}
		}
		measured[row.Job][row.RTTMs] = row
	}
	pingMs := map[float64]float64{} // by RTT in ms
	for _, rtt := range r.plan.RTTs {
		if err := r.s.setRTT(ctx, rtt); err != nil {
			return nil, err
		}
		ping, err := medianPing(ctx, r.clk, setup)
		if err != nil {
			return nil, fmt.Errorf("ping at RTT %s: %w", fmtRTT(rtt), err)
		}
		pingMs[rttMs(rtt)] = ping
		p.step("RTT %s: a minimal round trip takes %.3f ms (median of %d)", fmtRTT(rtt), ping, pings)
		row, rts, err := r.runOLTP(ctx, o, rtt)
		if err != nil {
			return nil, err
		}
		if rtt == 0 {
			rep.BenchRoundTrips = rts
		}
		record(row)
		jobs := r.jobs()
		if rtt == 0 {
			// Predictions from the unshaped run, read before anything
			// else runs.
			if err := r.predict(ctx, rep, jobs[0], nil); err != nil {
				return nil, err
			}
		}
		for i, b := range r.plan.Batches {
			before := r.s.lateness()
			lr, err := r.loadFor(ctx, setup, whatIfLoaderApp+strconv.Itoa(b), b)
			if err != nil {
				return nil, fmt.Errorf("loader (%d rows per INSERT) at RTT %s: %w", b, fmtRTT(rtt), err)
			}
			row := WhatIfRow{Job: loaderJob(b), RTTMs: rttMs(rtt), Seconds: lr.seconds, Runs: lr.runs}
			row.Releases, row.LateUs = r.s.releasedSince(before)
			if lr.seconds > 0 {
				row.TPS = float64(lr.transactions) / lr.seconds
				row.LatencyMs = 1000 * lr.seconds / float64(lr.transactions)
			}
			record(row)
			p.step("RTT %s: %s: %d rows in %s, %d statements, %.3f s (mean of %s)", fmtRTT(rtt), loaderJob(b), lr.rows, plural(lr.transactions, "transaction"), lr.statements, lr.seconds, plural(lr.runs, "run"))
			if rtt == 0 {
				if err := r.predict(ctx, rep, jobs[i+1], &lr); err != nil {
					return nil, err
				}
			}
		}
	}
	slices.SortStableFunc(rep.Rows, func(a, b WhatIfRow) int { return cmpFloat(a.RTTMs, b.RTTMs) })
	slices.SortStableFunc(rep.Rows, func(a, b WhatIfRow) int { return cmp.Compare(jobRank(a.Job), jobRank(b.Job)) })
	if err := r.s.setRTT(ctx, 0); err != nil {
		return nil, err
	}
	r.compare(rep, measured, pingMs)
	rep.Loads = extrapolate(rep, r.plan.Batches)
	return rep, nil
}

// WhatIfRow is one job at one added RTT: sluice's prediction from the
// baseline and what the run measured. For the benchmark the headline
// figure is TPS; for a loader it is the run's duration.
type WhatIfRow struct {
	Job   string  `json:"job"`
	RTTMs float64 `json:"rtt_ms"`
	// PredictedTPS and PredictedLatencyMs are sluice's prediction
	// (whatif.Predict, what SHOW WHATIF shows as predicted_tps and
	// predicted_latency_ms); at RTT 0 they are what sluice measured.
	PredictedTPS       float64 `json:"predicted_tps"`
	PredictedLatencyMs float64 `json:"predicted_latency_ms"`
	TPS                float64 `json:"tps"`
	LatencyMs          float64 `json:"latency_ms"`
	// PredictedSeconds is a loader run's predicted duration
	// (whatif.JobDuration: transactions x (cycle + round trips x RTT));
	// Seconds is its measured duration. 0 for the benchmark.
	PredictedSeconds float64 `json:"predicted_seconds,omitempty"`
	Seconds          float64 `json:"seconds,omitempty"`
	// Runs is how many times the loader job ran at this setting; Seconds
	// is their mean. 0 for the benchmark.
	Runs int `json:"runs,omitempty"`
	// Error is the headline figure's measured / predicted - 1.
	Error float64 `json:"error"`
	// PingMs is the median time of a minimal round trip (SELECT 1, a MySQL
	// ping) through the route at this setting, before the runs.
	PingMs float64 `json:"ping_ms"`
	// AppliedRTTMs is the RTT the route really added: PingMs less the
	// unshaped PingMs, which counts the delay line's lateness and the
	// time client and server take to wake after each delayed message,
	// and never less than RTTMs (a delay line never releases early; less
	// means load slowed the unshaped round trips);
	// AppliedError is Error against the prediction at that RTT, which
	// leaves out what the emulation adds beyond RTTMs. 0 at RTT 0.
	AppliedRTTMs float64 `json:"applied_rtt_ms,omitempty"`
	AppliedError float64 `json:"applied_error,omitempty"`
	// IgnoredErrors are the benchmark's ignored errors (deadlocks, lock
	// timeouts) during the run; 0 for a loader.
	IgnoredErrors uint64 `json:"ignored_errors"`
	// Releases and LateUs are the delay lines' chunks and their mean
	// release lateness in µs during the run, as in the latency
	// experiment.
	Releases uint64  `json:"delayed_chunks"`
	LateUs   float64 `json:"release_late_us"`
}

// runOLTP runs the benchmark at rtt and returns what it measured and the
// round trips per transaction it counted.
func (r *whatIfRun) runOLTP(ctx context.Context, o bench.Options, rtt time.Duration) (WhatIfRow, float64, error) {
	r.p.step("RTT %s: running %s for %s (+%s warm-up)", fmtRTT(rtt), o.Workload, o.Time, o.WarmupTime)
	res, chunks, lateUs, err := r.benchRun(ctx, o)
	if err != nil {
		return WhatIfRow{}, 0, fmt.Errorf("%s at RTT %s: %w", o.Workload, fmtRTT(rtt), err)
	}
	row := WhatIfRow{Job: jobOLTP, RTTMs: rttMs(rtt), TPS: res.TPS(), LatencyMs: durMs(res.Latency.Avg), Releases: chunks, LateUs: lateUs,
		IgnoredErrors: res.IgnoredErrors}
	r.p.step("RTT %s: %s: %.1f TPS, latency avg %.2f ms, %.1f round trips/txn", fmtRTT(rtt), o.Workload, row.TPS, row.LatencyMs, res.RoundTripsPerTransaction())
	return row, res.RoundTripsPerTransaction(), nil
}

// connect opens a session through the route named app.
func (r *whatIfRun) connect(ctx context.Context, app string) (conn, error) {
	return r.db.connectAs(ctx, r.route, "", "", app)
}

// cleanup drops the benchmark's tables and (with table) the loader's.
func (r *whatIfRun) cleanup(ctx context.Context, o bench.Options, setup conn, table bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	r.s.setRTT(cctx, 0)
	if table {
		if _, err := setup.run(cctx, "DROP TABLE "+whatIfTable, nil); err != nil {
			r.p.step("dropping %s failed: %v (drop it by hand)", whatIfTable, err)
		}
	}
	if err := bench.Cleanup(cctx, o); err != nil {
		r.p.step("cleanup failed: %v (drop the sbtest tables by hand)", err)
		return
	}
	r.p.step("dropped the benchmark tables and %s", whatIfTable)
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

// tables prints the predictions beside the measurements.
func (w *WhatIfReport) tables(p *printer) { p.table(w.table()) }

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

// charts returns the predicted-against-measured chart.
func (w *WhatIfReport) charts() []chartFile { return []chartFile{{FileWhatIf, w.Chart}} }

// FileWhatIf is the what-if experiment's chart.
const FileWhatIf = "whatif_predicted_vs_measured.svg"

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
	heading(out, 4, "what-if", "")
	fmt.Fprintf(out, "sluice watches every session's requests and answers and tells, per application, how much of a transaction is waiting on round trips "+
		"and what its transactions and throughput would become at a larger round-trip time, without adding any delay. "+
		"This experiment checks those predictions. Two jobs run unshaped through sluice: `%s` (%s, %.0f s after %.0f s of warm-up) "+
		"and a loader in one session that inserts rows in transactions of %d INSERT statements (BEGIN, the INSERTs, COMMIT), "+
		"the shape of a row-at-a-time sync job, once with one row per INSERT and once per batched size. "+
		"Each job's sessions carry their own application name, so sluice's what-if table (what `SHOW WHATIF`, the `whatif` view and `GET /api/whatif` show) "+
		"keeps them apart; right after each job's unshaped run the lab reads its row and predicts it at each RTT.\n\n",
		w.Workload, w.scale(), w.RunSeconds, w.WarmupSeconds, w.CommitEvery)
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
		"the delay line's lateness and the wake-ups after each delayed message included, and never less than the RTT (a delay line never releases early); "+
		"the last column is the error against the prediction at that RTT.\n\n", pings)
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
	w.writeLoads(out)
}

// Target names of the what-if experiment.
const (
	TargetWhatIfTPS  = "whatif_tps_at_10ms_vs_prediction"
	TargetWhatIfLoad = "whatif_load_at_10ms_vs_prediction"
)

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

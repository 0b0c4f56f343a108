package lab

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/whatif"
)

// WhatIfPlan is the scale of the what-if experiment.
type WhatIfPlan struct {
	// RTTs are the added round-trip times at which sluice's predictions
	// are checked; 0 (the unshaped baseline the predictions come from)
	// is always measured and added when missing. Empty skips the
	// experiment.
	RTTs []time.Duration
	// Threads is oltp_read_write's --threads; 0 picks 1 on the embedded
	// backend and on a server one per core, at most 4: more threads than
	// cores keep the CPUs busy unshaped, the waiting an added RTT brings
	// frees them, and that the model does not predict (see package
	// whatif's limits).
	Threads int
	// Tables and TableSize are --tables and --table-size.
	Tables, TableSize int
	// Time and Warmup are --time and --warmup-time of each benchmark run.
	Time, Warmup time.Duration
	// ReportInterval is --report-interval: how often a benchmark run
	// prints a progress line. 0 prints none.
	ReportInterval time.Duration
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

// whatIfTable is the loader's table: sbtest's row shape (two integers,
// 120 and 60 characters).
const whatIfTable = "sluice_lab_whatif_load"

// WhatIfReport is the what-if experiment's outcome.
type WhatIfReport struct {
	Workload      string  `json:"workload"`
	Driver        string  `json:"driver"`
	Threads       int     `json:"threads"`
	Tables        int     `json:"tables"`
	TableSize     int     `json:"table_size"`
	RunSeconds    float64 `json:"run_seconds"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	CommitEvery   int     `json:"commit_every_statements"`
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
	// time client and server take to wake after each delayed message;
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

// WhatIfLoad extrapolates a loader to a table of LoadBytes.
type WhatIfLoad struct {
	RowsPerStatement int     `json:"rows_per_statement"`
	BytesPerRow      float64 `json:"bytes_per_row"`
	LoadBytes        float64 `json:"load_bytes"`
	Rows             float64 `json:"rows"`
	// Hours are the measured per-statement time at each RTT scaled to
	// Rows, in the order of RTTMs; PredictedHours the same of sluice's
	// prediction.
	RTTMs          []float64 `json:"rtt_ms"`
	Hours          []float64 `json:"hours"`
	PredictedHours []float64 `json:"predicted_hours"`
}

// whatIfLoadBytes is the table size the report extrapolates to.
const whatIfLoadBytes = 4e9

// whatIfRun is the state of one what-if experiment.
type whatIfRun struct {
	plan  WhatIfPlan
	db    *database
	s     *sluice
	route string
	clk   clock.Clock
	p     *printer
	basis map[string]predictBasis // by job, from its unshaped run
}

// predictBasis is what a job's predictions come from: its row of the
// what-if table and, for a loader, the transactions of a run.
type predictBasis struct {
	app  whatif.App
	txns int
}

// job names.
const jobOLTP = "oltp_read_write"

func loaderJob(b int) string {
	if b == 1 {
		return "loader, 1 row per INSERT"
	}
	return fmt.Sprintf("loader, %d rows per INSERT", b)
}

// options returns the benchmark's options, its sessions named app.
func (r *whatIfRun) options(app string) bench.Options {
	threads := r.plan.Threads
	if threads == 0 && r.db.kind != BackendEmbedded {
		threads = min(4, runtime.NumCPU())
	}
	lr := latencyRun{plan: LatencyPlan{Threads: threads, Tables: r.plan.Tables, TableSize: r.plan.TableSize,
		Time: r.plan.Time, Warmup: r.plan.Warmup, ReportInterval: r.plan.ReportInterval}, db: r.db, route: r.route, clk: r.clk}
	o := lr.options()
	o.DSN = withApp(o.DSN, r.db.protocol, app)
	return o
}

// withApp returns the URL u with its sessions named app: PostgreSQL's
// application_name, MySQL's program_name connection attribute.
func withApp(u, protocol, app string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := pu.Query()
	if protocol == protoMySQL {
		q.Set("connectionAttributes", "program_name:"+app)
	} else {
		q.Set("application_name", app)
	}
	pu.RawQuery = q.Encode()
	return pu.String()
}

func runWhatIf(ctx context.Context, r *whatIfRun) (*WhatIfReport, error) {
	p := r.p
	r.basis = map[string]predictBasis{}
	o := r.options(whatIfOLTPApp)
	rep := &WhatIfReport{
		Workload: o.Workload, Driver: o.Driver, Threads: o.Threads, Tables: o.Tables, TableSize: o.TableSize,
		RunSeconds: o.Time.Seconds(), WarmupSeconds: o.WarmupTime.Seconds(), CommitEvery: r.plan.CommitEvery, LoaderSeconds: r.plan.LoaderTime.Seconds(),
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
	if err := bench.Prepare(ctx, prep, &lineFilter{out: p, indent: "           "}); err != nil {
		if strings.Contains(err.Error(), "already exists") {
			return nil, fmt.Errorf("prepare: %w (the database already has sbtest tables; drop them with `sluice bench oltp_read_write cleanup --db-driver=%s --dsn=URL` or use another database)", err, o.Driver)
		}
		r.cleanup(ctx, prep, setup, false)
		return nil, fmt.Errorf("prepare: %w", err)
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
			if err := r.predict(rep, jobs[0], nil); err != nil {
				return nil, err
			}
		}
		for i, b := range r.plan.Batches {
			before := r.s.lateness()
			lr, err := r.loadFor(ctx, setup, whatIfLoaderApp+strconv.Itoa(b), b)
			if err != nil {
				return nil, fmt.Errorf("loader (%d rows per INSERT) at RTT %s: %w", b, fmtRTT(rtt), err)
			}
			late := r.s.lateness()
			row := WhatIfRow{Job: loaderJob(b), RTTMs: rttMs(rtt), Seconds: lr.seconds, Runs: lr.runs, Releases: late.Count - before.Count}
			if row.Releases > 0 {
				row.LateUs = float64(late.Sum-before.Sum) / float64(row.Releases) / float64(time.Microsecond)
			}
			if lr.seconds > 0 {
				row.TPS = float64(lr.transactions) / lr.seconds
				row.LatencyMs = 1000 * lr.seconds / float64(lr.transactions)
			}
			record(row)
			p.step("RTT %s: %s: %d rows in %s, %d statements, %.3f s (mean of %s)", fmtRTT(rtt), loaderJob(b), lr.rows, plural(lr.transactions, "transaction"), lr.statements, lr.seconds, plural(lr.runs, "run"))
			if rtt == 0 {
				if err := r.predict(rep, jobs[i+1], &lr); err != nil {
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
	for i := range rep.Rows {
		row := &rep.Rows[i]
		m := measured[row.Job][row.RTTMs]
		row.TPS, row.LatencyMs, row.Seconds, row.Runs, row.Releases, row.LateUs = m.TPS, m.LatencyMs, m.Seconds, m.Runs, m.Releases, m.LateUs
		row.Error = headlineError(*row, row.PredictedTPS, row.PredictedSeconds)
		row.PingMs, row.IgnoredErrors = pingMs[row.RTTMs], m.IgnoredErrors
		if b, ok := r.basis[row.Job]; ok && row.RTTMs > 0 {
			applied := time.Duration(float64(time.Millisecond) * max(pingMs[row.RTTMs]-pingMs[0], 0))
			row.AppliedRTTMs = durMs(applied)
			tps, secs := whatif.Predict(b.app, applied).TPS, 0.0
			if b.txns > 0 {
				secs = whatif.JobDuration(b.app, int64(b.txns), applied).Seconds()
				tps = float64(b.txns) / secs
			}
			row.AppliedError = headlineError(*row, tps, secs)
		}
	}
	rep.Loads = extrapolate(rep, r.plan.Batches)
	return rep, nil
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

// runOLTP runs the benchmark at rtt and returns what it measured and the
// round trips per transaction it counted.
func (r *whatIfRun) runOLTP(ctx context.Context, o bench.Options, rtt time.Duration) (WhatIfRow, float64, error) {
	r.p.step("RTT %s: running %s for %s (+%s warm-up)", fmtRTT(rtt), o.Workload, o.Time, o.WarmupTime)
	before := r.s.lateness()
	res, err := bench.Run(ctx, o, &lineFilter{out: r.p, prefix: "[ ", indent: "           "})
	if err != nil {
		return WhatIfRow{}, 0, fmt.Errorf("%s at RTT %s: %w", o.Workload, fmtRTT(rtt), err)
	}
	late := r.s.lateness()
	if res.Transactions == 0 {
		return WhatIfRow{}, 0, fmt.Errorf("%s at RTT %s: no transaction completed", o.Workload, fmtRTT(rtt))
	}
	row := WhatIfRow{Job: jobOLTP, RTTMs: rttMs(rtt), TPS: res.TPS(), LatencyMs: durMs(res.Latency.Avg), Releases: late.Count - before.Count,
		IgnoredErrors: res.IgnoredErrors}
	if row.Releases > 0 {
		row.LateUs = float64(late.Sum-before.Sum) / float64(row.Releases) / float64(time.Microsecond)
	}
	r.p.step("RTT %s: %s: %.1f TPS, latency avg %.2f ms, %.1f round trips/txn", fmtRTT(rtt), o.Workload, row.TPS, row.LatencyMs, res.RoundTripsPerTransaction())
	return row, res.RoundTripsPerTransaction(), nil
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
func (r *whatIfRun) predict(rep *WhatIfReport, j whatIfJob, lr *loadResult) error {
	a, ok := r.s.whatIfApp(r.clk.Now(), r.db, j.app)
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
// stack's what-if table over the window ending at now.
func (s *sluice) whatIfApp(now time.Time, db *database, app string) (whatif.App, bool) {
	for _, a := range s.st.WhatIf().Snapshot(now) {
		if a.Application == app && a.User == db.user && a.Database == db.dbname {
			return a, true
		}
	}
	return whatif.App{}, false
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

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func joinRTTs(v []time.Duration) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmtNum(rttMs(x))
	}
	return strings.Join(s, ", ") + " ms"
}

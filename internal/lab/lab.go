package lab

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

// UsageError is a bad option: the caller's mistake, not the run's.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Options configure Run.
type Options struct {
	// DSN is the database to run against: postgres://user:pass@host:port/db
	// or mysql://user:pass@host:port/db (a go-sql-driver DSN
	// user:pass@tcp(host:port)/db works too). "" uses Backend.
	DSN string
	// Backend is BackendEmbedded (also "") or BackendPostgres; ignored
	// when DSN is set.
	Backend string
	// PostgresBin is the directory of initdb and postgres for
	// BackendPostgres; "" searches PATH and /usr/lib/postgresql/*/bin.
	PostgresBin string
	// Plan is what to measure; see QuickPlan and FullPlan.
	Plan Plan
	// Out, if set, is the directory that receives report.md, report.json
	// and the SVG charts; it is created if missing.
	Out string
	// Progress receives progress lines and the tables as the run goes;
	// nil discards them.
	Progress io.Writer
	// Clock times everything; nil means clock.Real.
	Clock clock.Clock
	// Logger receives the components' logs; nil discards them.
	Logger *slog.Logger
}

// Plan is the scale of a run. An experiment with no points is skipped.
type Plan struct {
	// Name labels the plan in the report ("quick", "full").
	Name        string
	Latency     LatencyPlan
	Flow        FlowPlan
	Concurrency ConcurrencyPlan
	WhatIf      WhatIfPlan
	Cluster     ClusterPlan
	// BaseBackup runs only with BackendPostgres; it is skipped, saying
	// why, otherwise.
	BaseBackup BaseBackupPlan
}

// Experiment names, as --experiment takes them.
const (
	ExperimentLatency     = "latency"
	ExperimentFlow        = "flow"
	ExperimentConcurrency = "concurrency"
	ExperimentWhatIf      = "whatif"
	ExperimentCluster     = "cluster"
	ExperimentBaseBackup  = "basebackup"
)

// Only returns p with every experiment but the named one emptied
// (skipped). "" returns p unchanged; an unknown name is a UsageError.
func (p Plan) Only(experiment string) (Plan, error) {
	if experiment == "" {
		return p, nil
	}
	out := Plan{Name: p.Name}
	keep, ok := map[string]func(){
		ExperimentLatency:     func() { out.Latency = p.Latency },
		ExperimentFlow:        func() { out.Flow = p.Flow },
		ExperimentConcurrency: func() { out.Concurrency = p.Concurrency },
		ExperimentWhatIf:      func() { out.WhatIf = p.WhatIf },
		ExperimentCluster:     func() { out.Cluster = p.Cluster },
		ExperimentBaseBackup:  func() { out.BaseBackup = p.BaseBackup },
	}[experiment]
	if !ok {
		return p, &UsageError{Msg: fmt.Sprintf("unknown experiment %q (want %s, %s, %s, %s, %s or %s)", experiment, ExperimentLatency, ExperimentFlow, ExperimentConcurrency, ExperimentWhatIf, ExperimentCluster, ExperimentBaseBackup)}
	}
	keep()
	if experiment == ExperimentBaseBackup && out.BaseBackup.DatabaseBytes <= 0 {
		return p, &UsageError{Msg: fmt.Sprintf("the %s plan has no %s experiment (the full plan has)", planName(p), ExperimentBaseBackup)}
	}
	return out, nil
}

// QuickPlan is `sluice lab --quick`: a small table, short runs, fewer
// points; it keeps RTT 10 ms, N = 10 and active_statements 4, which the
// targets are about.
func QuickPlan() Plan {
	return Plan{
		Name: "quick",
		Latency: LatencyPlan{
			RTTs:        ms(0, 1, 5, 10),
			PrepareRTTs: ms(0, 10),
			BenchPlan:   BenchPlan{Tables: 1, TableSize: 10000, Time: 3 * time.Second, Warmup: time.Second, ReportInterval: time.Second},
		},
		Flow: FlowPlan{
			Ns: []int{0, 1, 4, 10}, Reps: 8,
			PenaltyRule: PenaltyRule{RuleBandwidth: 0.05, RuleElapsed: 0.5, CheckPeriod: 100 * time.Millisecond, PenaltyTimeout: 15 * time.Second},
		},
		Concurrency: ConcurrencyPlan{Limits: []int{0, 4}, Sessions: 32, Reps: 20},
		WhatIf: WhatIfPlan{
			RTTs:      whatIfRTTs,
			BenchPlan: BenchPlan{Tables: 1, TableSize: 10000, Time: 3 * time.Second, Warmup: time.Second, ReportInterval: time.Second},
			Batches:   []int{1, 100}, Statements: 200, BatchStatements: 50, CommitEvery: 10, LoaderTime: time.Second,
		},
	}
}

// FullPlan is `sluice lab`: the reference experiments' points.
func FullPlan() Plan {
	return Plan{
		Name: "full",
		Latency: LatencyPlan{
			RTTs:        ms(0, 0.3, 1, 2, 5, 10, 20),
			PrepareRTTs: ms(0, 10),
			BenchPlan:   BenchPlan{Tables: 1, TableSize: 100000, Time: 15 * time.Second, Warmup: 3 * time.Second, ReportInterval: 5 * time.Second},
		},
		Flow: FlowPlan{
			Ns: []int{0, 1, 2, 4, 8, 10}, Reps: 20,
			PenaltyRule: PenaltyRule{RuleBandwidth: 0.05, RuleElapsed: 0.5, CheckPeriod: 100 * time.Millisecond, PenaltyTimeout: 20 * time.Second},
		},
		Concurrency: ConcurrencyPlan{Limits: []int{0, 2, 4, 8}, Sessions: 32, Reps: 50},
		WhatIf: WhatIfPlan{
			RTTs:      whatIfRTTs,
			BenchPlan: BenchPlan{Tables: 1, TableSize: 100000, Time: 10 * time.Second, Warmup: 2 * time.Second, ReportInterval: 5 * time.Second},
			Batches:   []int{1, 100, 1000}, Statements: 500, BatchStatements: 100, CommitEvery: 10, LoaderTime: 3 * time.Second,
		},
		Cluster:    ClusterPlan{Ns: []int{0, 1, 2, 4, 8, 10}, Reps: 6},
		BaseBackup: fullBaseBackupPlan(),
	}
}

func ms(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(time.Millisecond))
	}
	return out
}

// validate checks o and fills in its defaults: the plan's, the real
// clock and a logger that discards.
func (o *Options) validate() error {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DSN != "" && o.Backend != "" && o.Backend != BackendEmbedded {
		return &UsageError{Msg: "give --dsn or --backend, not both"}
	}
	if o.DSN == "" && o.Backend != "" && o.Backend != BackendEmbedded && o.Backend != BackendPostgres {
		return &UsageError{Msg: fmt.Sprintf("unknown backend %q (want %s or %s)", o.Backend, BackendEmbedded, BackendPostgres)}
	}
	if o.DSN != "" {
		if _, err := parseDSN(o.DSN); err != nil {
			return err
		}
	}
	pl := &o.Plan
	for _, v := range []interface{ validate() error }{&pl.Latency, &pl.Flow, &pl.Concurrency, &pl.WhatIf, &pl.Cluster, &pl.BaseBackup} {
		if err := v.validate(); err != nil {
			return err
		}
	}
	if len(pl.Latency.RTTs) == 0 && len(pl.Flow.Ns) == 0 && len(pl.Concurrency.Limits) == 0 && len(pl.WhatIf.RTTs) == 0 && len(pl.Cluster.Ns) == 0 && pl.BaseBackup.DatabaseBytes <= 0 {
		return &UsageError{Msg: "the plan has no experiment to run"}
	}
	return nil
}

// points checks a plan's points *vs, each in [0, hi] (what and rng name
// them in the error, as inRange does), and adds the baseline 0 (see
// withZero). It reports whether the experiment runs: it has points and
// they are valid.
func points[T int | time.Duration](vs *[]T, hi T, what, rng string) (run bool, err error) {
	if len(*vs) == 0 {
		return false, nil
	}
	if err := inRange(*vs, hi, what, rng); err != nil {
		return false, err
	}
	*vs = withZero(*vs)
	return true, nil
}

// inRange returns a UsageError naming the first of vs outside [0, hi]
// (what is the setting, rng the range as the message spells it).
func inRange[T int | time.Duration](vs []T, hi T, what, rng string) error {
	for _, v := range vs {
		if v < 0 || v > hi {
			return &UsageError{Msg: fmt.Sprintf("%s %v out of range (%s)", what, v, rng)}
		}
	}
	return nil
}

// withZero returns the levels vs with 0 (the baseline) added, sorted and
// without repeats. It may reuse vs's array.
func withZero[T int | time.Duration](vs []T) []T {
	if !slices.Contains(vs, 0) {
		vs = append(vs, 0)
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

// PenaltyRule is the exception rule of an experiment whose bulk jobs
// it penalises (flow control, cluster), and the wait for it.
type PenaltyRule struct {
	// RuleBandwidth and RuleElapsed are the rule's thresholds, in MB/s
	// and seconds; 0 means 0.05 and 0.5.
	RuleBandwidth, RuleElapsed float64
	// CheckPeriod is except_check_period; at least 100 ms.
	CheckPeriod time.Duration
	// PenaltyTimeout bounds each wait for the bulk jobs' statements to be
	// penalised before a measurement, after which the point is measured
	// anyway; 0 means the experiment's default.
	PenaltyTimeout time.Duration
}

// defaults fills in r's defaults, timeout for PenaltyTimeout.
func (r *PenaltyRule) defaults(timeout time.Duration) {
	orDefault(&r.RuleBandwidth, 0.05)
	orDefault(&r.RuleElapsed, 0.5)
	r.CheckPeriod = max(r.CheckPeriod, 100*time.Millisecond)
	orDefault(&r.PenaltyTimeout, timeout)
}

// orDefault sets *v to def when it is 0 or less (unset).
func orDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Run starts (or connects to) the database, puts sluice in front of it,
// runs the plan's experiments, and returns the report. With Options.Out
// set it also writes the report files. Everything it started is stopped
// and everything it created in the database (benchmark tables, the bulk
// login role it made) is dropped before it returns, on error too.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	clk, log := o.Clock, o.Logger
	p := newPrinter(o.Progress, clk)
	start := clk.Now()

	db, err := openDatabase(ctx, &o, clk, log, p.step)
	if err != nil {
		return nil, err
	}
	defer db.close()
	s, err := startSluice(clk, log, db)
	if err != nil {
		return nil, err
	}
	defer s.close()
	route, err := s.addRoute("lab", "")
	if err != nil {
		return nil, err
	}
	rep := &Report{Plan: o.Plan.Name, Backend: db.kind, Database: db.describe, Protocol: db.protocol, Started: start.UTC()}
	p.printf("sluice lab (%s plan): %s\n", planName(o.Plan), db.describe)
	p.printf("sluice route %s -> %s (protocol %s); every measured byte goes through it\n\n", route, db.upstream, db.protocol)

	e := &env{plan: o.Plan, pgBin: o.PostgresBin, db: db, s: s, route: route, clk: clk, log: log, p: p}
	pl := o.Plan
	for _, x := range []struct {
		name string // in errors: "latency experiment: ..."
		run  bool
		exec func(context.Context, *env) (section, error)
	}{
		{"latency", len(pl.Latency.RTTs) > 0, experiment(runLatency, &rep.Latency)},
		{"flow-control", len(pl.Flow.Ns) > 0, experiment(runFlow, &rep.Flow)},
		{"concurrency", len(pl.Concurrency.Limits) > 0, experiment(runConcurrency, &rep.Concurrency)},
		{"what-if", len(pl.WhatIf.RTTs) > 0, experiment(runWhatIf, &rep.WhatIf)},
		{"cluster", len(pl.Cluster.Ns) > 0, experiment(runCluster, &rep.Cluster)},
		{"base-backup", pl.BaseBackup.DatabaseBytes > 0, experiment(baseBackup, &rep.BaseBackup)},
	} {
		if !x.run {
			continue
		}
		sec, err := x.exec(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("%s experiment: %w", x.name, err)
		}
		sec.tables(p)
	}
	rep.Seconds = clk.Now().Sub(start).Seconds()
	rep.Targets = rep.evaluate()
	rep.targetTable().text(p)
	if o.Out != "" {
		files, err := rep.WriteFiles(o.Out)
		if err != nil {
			return rep, err
		}
		p.printf("\nwrote %s\n", joinFiles(files))
	}
	return rep, nil
}

func planName(p Plan) string {
	if p.Name == "" {
		return "custom"
	}
	return p.Name
}

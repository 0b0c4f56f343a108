package lab

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netlab"
	"github.com/sluicelab/sluice/internal/opt"
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
	// Network is NetworkEmulated (also "": sluice's own emulated link on
	// loopback) or NetworkKernel: a real network on this host, built by
	// package netlab (needs root and iproute2), for the experiments that
	// have a form on it (flow control; the cluster, with BackendPostgres
	// and Etcd); the others are skipped, saying why.
	Network string
	// NetRate and NetQueue are the kernel network's bottleneck: its rate
	// in bytes/s and its queue in time at that rate; 0 means
	// DefaultNetRate and DefaultNetQueue.
	NetRate  int64
	NetQueue time.Duration
	// Etcd is the etcd cluster the kernel network's cluster experiment
	// runs its sluices on as a fleet: endpoints separated by commas, or
	// an etcd:// URL with a prefix under which the run keeps its
	// catalog (removed at the end). "" skips that experiment.
	Etcd string
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
			Kernel:      KernelFlowPlan{Ns: []int{0, 4}, Reps: 5, Settle: time.Second},
		},
		Cluster:     ClusterPlan{Kernel: KernelClusterPlan{Ns: []int{0, 2}, Reps: 3, Settle: time.Second, LowRows: 3000, HighRows: 300}},
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
			Kernel:      KernelFlowPlan{Ns: []int{0, 2, 4, 8}, Reps: 10, Settle: 2 * time.Second},
		},
		Concurrency: ConcurrencyPlan{Limits: []int{0, 2, 4, 8}, Sessions: 32, Reps: 50},
		WhatIf: WhatIfPlan{
			RTTs:      whatIfRTTs,
			BenchPlan: BenchPlan{Tables: 1, TableSize: 100000, Time: 10 * time.Second, Warmup: 2 * time.Second, ReportInterval: 5 * time.Second},
			Batches:   []int{1, 100, 1000}, Statements: 500, BatchStatements: 100, CommitEvery: 10, LoaderTime: 3 * time.Second,
		},
		Cluster: ClusterPlan{Ns: []int{0, 1, 2, 4, 8, 10}, Reps: 6,
			Kernel: KernelClusterPlan{Ns: []int{0, 2, 4, 8, 10}, Reps: 5, Settle: 2 * time.Second, LowRows: 6000, HighRows: 300}},
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
	if err := o.validateNetwork(); err != nil {
		return err
	}
	if o.Network == NetworkEmulated && len(pl.Latency.RTTs) == 0 && len(pl.Flow.Ns) == 0 && len(pl.Concurrency.Limits) == 0 && len(pl.WhatIf.RTTs) == 0 && len(pl.Cluster.Ns) == 0 && pl.BaseBackup.DatabaseBytes <= 0 {
		return &UsageError{Msg: "the plan has no experiment to run"}
	}
	return nil
}

// validateNetwork checks the network options and fills in their
// defaults.
func (o *Options) validateNetwork() error {
	switch o.Network {
	case "":
		o.Network = NetworkEmulated
	case NetworkEmulated, NetworkKernel:
	default:
		return &UsageError{Msg: fmt.Sprintf("unknown network %q (want %s or %s)", o.Network, NetworkEmulated, NetworkKernel)}
	}
	if o.NetRate < 0 || o.NetQueue < 0 {
		return &UsageError{Msg: "the kernel network's rate and queue must be positive"}
	}
	orDefault(&o.NetRate, DefaultNetRate)
	orDefault(&o.NetQueue, DefaultNetQueue)
	if o.Network == NetworkKernel && len(o.Plan.Flow.Kernel.Ns) == 0 && len(o.Plan.Cluster.Kernel.Ns) == 0 {
		return &UsageError{Msg: fmt.Sprintf("the plan has no experiment that runs on the %s network (%s, %s)", NetworkKernel, ExperimentFlow, ExperimentCluster)}
	}
	if o.Etcd != "" {
		if _, err := parseEtcd(o.Etcd); err != nil {
			return &UsageError{Msg: fmt.Sprintf("bad --etcd: %v", err)}
		}
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

// pointsBeside is points for an experiment that also runs over the
// kernel network: it validates kernel, whose points are kernelNs, first,
// and the experiment runs when either has points and both are valid.
func pointsBeside(kernel interface{ validate() error }, kernelNs []int, vs *[]int, hi int, what, rng string) (run bool, err error) {
	if err := kernel.validate(); err != nil {
		return false, err
	}
	run, err = points(vs, hi, what, rng)
	return err == nil && (run || len(kernelNs) > 0), err
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
func orDefault[T opt.Number](v *T, def T) { *v = opt.Positive(*v, def) }

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
	kernel := o.Network == NetworkKernel
	rep := &Report{Plan: o.Plan.Name, Backend: db.kind, Database: db.describe, Protocol: db.protocol, Network: o.Network, Started: start.UTC()}
	p.printf("sluice lab (%s plan): %s\n", planName(o.Plan), db.describe)
	if kernel {
		p.printf("network: kernel (namespaces, veth pairs and a tbf queue of %s with a %v queue, in %s)\n\n", formatBits(o.NetRate), o.NetQueue, netlab.Range)
	} else {
		p.printf("sluice route %s -> %s (protocol %s); every measured byte goes through it\n\n", route, db.upstream, db.protocol)
	}

	e := &env{plan: o.Plan, pgBin: o.PostgresBin, db: db, s: s, route: route, clk: clk, log: log, p: p, netRate: o.NetRate, netQueue: o.NetQueue}
	if o.Etcd != "" {
		ec, _ := parseEtcd(o.Etcd) // checked by validate
		e.etcd = &ec
	}
	pl := o.Plan
	const emulatedOnly = "it measures sluice's own link emulation"
	for _, x := range []struct {
		name string // in errors: "latency experiment: ..."
		run  bool
		exec func(context.Context, *env) (section, error)
		// onKernel runs the experiment on the kernel network when
		// kernelRun is set; without it, why says why it does not run
		// there.
		kernelRun bool
		onKernel  func(context.Context, *env) (section, error)
		why       string
	}{
		{"latency", len(pl.Latency.RTTs) > 0, experiment(runLatency, &rep.Latency), false, nil, emulatedOnly + " (delay), which the kernel network has no form of here"},
		{"flow-control", len(pl.Flow.Ns) > 0, experiment(runFlow, &rep.Flow), len(pl.Flow.Kernel.Ns) > 0, experiment(runKernelFlow, &rep.KernelFlow), ""},
		{"concurrency", len(pl.Concurrency.Limits) > 0, experiment(runConcurrency, &rep.Concurrency), false, nil, emulatedOnly + " (the device queue's occupancy)"},
		{"what-if", len(pl.WhatIf.RTTs) > 0, experiment(runWhatIf, &rep.WhatIf), false, nil, emulatedOnly + " (delay)"},
		{"cluster", len(pl.Cluster.Ns) > 0, experiment(runCluster, &rep.Cluster), len(pl.Cluster.Kernel.Ns) > 0, experiment(runKernelCluster, &rep.KernelCluster), ""},
		{"base-backup", pl.BaseBackup.DatabaseBytes > 0, experiment(baseBackup, &rep.BaseBackup), false, nil, emulatedOnly + " (the link's idle capacity)"},
	} {
		run, exec := x.run, x.exec
		if kernel {
			if run && x.onKernel == nil {
				p.step("%s experiment: not run on the kernel network: %s", x.name, x.why)
				rep.NotOnKernel = append(rep.NotOnKernel, fmt.Sprintf("%s: %s", x.name, x.why))
			}
			run, exec = x.kernelRun, x.onKernel
		}
		if !run {
			continue
		}
		sec, err := exec(ctx, e)
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

package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/units"
)

// KernelClusterPlan is the scale of the cluster experiment over the
// kernel network (Options.Network NetworkKernel).
type KernelClusterPlan struct {
	// Ns are the numbers of concurrent low-priority joins; 0 is added
	// when missing. Empty skips the experiment.
	Ns []int
	// Reps is how many times the high-priority join is measured per
	// point; 0 means 5.
	Reps int
	// Settle is how long a point waits after its low-priority joins run,
	// before it measures; 0 means 2 s.
	Settle time.Duration
	// LowRows and HighRows are the rows of wt1, wt2 and of wt3, wt4; 0
	// means 6000 and 300.
	LowRows, HighRows int
}

// validate checks k and fills in its defaults; a plan with no points is
// left alone (skipped).
func (k *KernelClusterPlan) validate() error {
	if run, err := points(&k.Ns, 30, "low-priority joins", "0 to 30"); !run {
		return err
	}
	orDefault(&k.Reps, 5)
	orDefault(&k.Settle, 2*time.Second)
	orDefault(&k.LowRows, 6000)
	orDefault(&k.HighRows, 300)
	if k.LowRows > 1_000_000 || k.HighRows > 1_000_000 {
		return &UsageError{Msg: fmt.Sprintf("cluster tables of %d and %d rows out of range (1 to 1000000)", k.LowRows, k.HighRows)}
	}
	return nil
}

// clusterLowPool is the low-priority pool of the kernel cluster
// experiment.
const clusterLowPool = "cluster_low_pool"

// KernelClusterReport is the outcome of the cluster experiment over the
// kernel network.
type KernelClusterReport struct {
	// Skipped, when set, says why nothing was measured.
	Skipped string `json:"skipped,omitempty"`
	Network string `json:"network,omitempty"`
	// RateBytes is the tbf queue's rate toward the coordinator, bytes/s;
	// Rate spells it; QueueMs is its depth in time at that rate.
	RateBytes int64   `json:"rate_bytes_per_second,omitempty"`
	Rate      string  `json:"rate,omitempty"`
	QueueMs   float64 `json:"queue_ms,omitempty"`
	// CapacityBytes is every sluice's link capacity with SettingCapacity:
	// CapacityPercent of the rate shared by the data nodes.
	CapacityBytes int64    `json:"capacity_bytes_per_second,omitempty"`
	Nodes         []string `json:"nodes,omitempty"`
	LowRows       int      `json:"low_table_rows,omitempty"`
	HighRows      int      `json:"high_table_rows,omitempty"`
	Reps          int      `json:"reps_per_point,omitempty"`
	LowSQL        string   `json:"low_sql,omitempty"`
	HighSQL       string   `json:"high_sql,omitempty"`
	// Setup are the console statements of the fleet's catalog;
	// ClusterSetup the coordinator's SQL (passwords masked).
	Setup        []string    `json:"setup,omitempty"`
	ClusterSetup []string    `json:"cluster_setup,omitempty"`
	Rows         []KernelRow `json:"points,omitempty"`
}

// kclusterRun is the state of one kernel cluster experiment.
type kclusterRun struct {
	*clusterRun
	kp    KernelClusterPlan
	net   *clusterNet
	fleet *clusterFleet
	rep   *KernelClusterReport
}

// kernelClusterSkip says why the experiment cannot run, or "".
func kernelClusterSkip(e *env) string {
	if why := clusterSkip(e.db); why != "" {
		return why
	}
	if e.etcd == nil {
		return "it runs a sluice per node as a fleet on etcd; give --etcd"
	}
	return ""
}

func runKernelCluster(ctx context.Context, e *env) (rep *KernelClusterReport, err error) {
	kp := e.plan.Cluster.Kernel
	r := &kclusterRun{kp: kp, clusterRun: &clusterRun{env: e, plan: ClusterPlan{LowRows: kp.LowRows, HighRows: kp.HighRows, Reps: kp.Reps, PenaltyRule: e.plan.Cluster.PenaltyRule}}}
	p := r.p
	p.printf("\n== Experiment 5: cluster, kernel network ==\n")
	if why := kernelClusterSkip(e); why != "" {
		p.step("skipped: %s", why)
		return &KernelClusterReport{Skipped: why}, nil
	}
	rep = &KernelClusterReport{RateBytes: e.netRate, Rate: formatBits(e.netRate), QueueMs: durMs(e.netQueue),
		CapacityBytes: e.netRate * CapacityPercent / 100 / clusterDataNodes,
		LowRows:       kp.LowRows, HighRows: kp.HighRows, Reps: kp.Reps, LowSQL: clusterLowSQL, HighSQL: clusterHighSQL}
	r.rep = rep
	p.printf("a coordinator and %d data nodes (postgres_fdw), each in a network namespace with a sluice of its own; high-priority join %q measured %d times per point under N low-priority joins %q in a loop\n",
		clusterDataNodes, clusterHighSQL, kp.Reps, clusterLowSQL)
	if r.net, err = newClusterNet(ctx, e.netRate, e.netQueue); err != nil {
		return nil, err
	}
	defer r.net.remove(p)
	rep.Network = r.net.describe()
	p.step("network: %s", rep.Network)
	r.nodeStart, r.dial, r.mappingExtra = r.net.start, r.net.nodes[0].Dial, ", password_required 'false'"
	if err := r.startNodes(ctx); err != nil {
		return nil, err
	}
	defer r.stopNodes()
	for i, n := range r.nodes {
		rep.Nodes = append(rep.Nodes, fmt.Sprintf("%s: %s in namespace %s, its sluice on %s", clusterNodeNames()[i], n.Version(), r.net.nodes[i].Name, r.net.addr(i)))
	}
	if r.fleet, err = r.newClusterFleet(ctx, *e.etcd); err != nil {
		return nil, err
	}
	defer func() {
		if ferr := r.fleet.close(ctx); ferr != nil {
			p.step("could not remove the fleet's catalog from etcd: %v", ferr)
		}
	}()
	p.step("a sluice per node, a fleet on the catalog %s", r.fleet.etcd)
	r.s, r.coord = r.fleet.sluice[0], r.net.addr(0)
	r.shards, r.shardAddrs = map[string]bool{}, map[int]string{}
	for i := 1; i <= clusterDataNodes; i++ {
		r.shards[fmt.Sprintf("cluster_dn%d", i)], r.shardAddrs[i] = true, r.net.addr(i)
	}
	rep.Setup = []string{
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (network_priority='low')", clusterLowPool),
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (network_priority='high')", clusterHighPool),
		fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", clusterLowUser, clusterLowPool),
		fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", clusterHighUser, clusterHighPool),
		fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", clusterLowShardUser, clusterLowPool),
		fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", clusterHighShardUser, clusterHighPool),
	}
	if err := r.fleet.exec(ctx, rep.Setup...); err != nil {
		return nil, err
	}
	setup, err := r.build(ctx)
	rep.ClusterSetup = setup
	if err != nil {
		return nil, err
	}
	for _, set := range kernelSettings() {
		if err := r.setting(ctx, set); err != nil {
			return nil, fmt.Errorf("%s: %w", set, err)
		}
	}
	return rep, nil
}

// setting configures the fleet for set and measures each N.
func (r *kclusterRun) setting(ctx context.Context, set string) error {
	stmts := []string{"SET network_control = on", "ALTER LINK default WITH (capacity=DEFAULT)"}
	switch set {
	case SettingOff:
		stmts[0] = "SET network_control = off"
	case SettingCapacity:
		stmts[1] = fmt.Sprintf("ALTER LINK default WITH (capacity='%s')", units.FormatRate(r.rep.CapacityBytes))
	}
	if err := r.fleet.exec(ctx, stmts...); err != nil {
		return err
	}
	return kernelSweep(r.p, &r.rep.Rows, set, r.kp.Ns, "high-priority join", "low-priority joins", "low-priority join", func(n int) (KernelRow, error) {
		return r.point(ctx, set, n)
	})
}

// point measures the high-priority join under n low-priority joins.
func (r *kclusterRun) point(ctx context.Context, set string, n int) (row KernelRow, err error) {
	row = KernelRow{Setting: set, N: n}
	high, err := r.connect(ctx, clusterHighUser)
	if err != nil {
		return row, err
	}
	defer high.Close(context.WithoutCancel(ctx))
	if _, err := count(ctx, high, clusterHighSQL); err != nil { // the coordinator opens its shard connections
		return row, fmt.Errorf("high-priority join: %w", err)
	}
	var jobs []*lowJob
	defer func() {
		if serr := r.stopLow(ctx, jobs); serr != nil && err == nil {
			err = serr
		}
		r.drainNet(ctx)
	}()
	for i := range n {
		j, err := r.startLow(ctx, i)
		if err != nil {
			return row, err
		}
		jobs = append(jobs, j)
	}
	if n > 0 {
		r.p.step("%s, N=%d: started %s; waiting until they run", set, n, plural(n, "low-priority join"))
		if err := r.waitRunning(ctx, jobs); err != nil {
			return row, err
		}
		if err := clock.Sleep(ctx, r.clk, r.kp.Settle); err != nil {
			return row, err
		}
	}
	err = r.net.measure(ctx, r.env, &row, r.kp.Reps, nil, r.lowShardBytes, func() (time.Duration, error) {
		t0 := r.clk.Now()
		got, err := count(ctx, high, clusterHighSQL)
		if err != nil {
			return 0, fmt.Errorf("high-priority join: %w", err)
		}
		if got != int64(r.kp.HighRows) {
			return 0, fmt.Errorf("high-priority join counted %d rows, want %d", got, r.kp.HighRows)
		}
		return r.clk.Now().Sub(t0), nil
	})
	if err != nil {
		return row, err
	}
	for _, s := range r.fleet.sluice[1:] {
		if row.Controller = controllerEstimate(s); row.Controller != nil {
			break
		}
	}
	return row, nil
}

// waitRunning waits until every job's low-priority join runs on the
// coordinator, for up to the plan's PenaltyTimeout; it fails when a job
// fails.
func (r *kclusterRun) waitRunning(ctx context.Context, jobs []*lowJob) error {
	deadline := r.clk.Now().Add(r.plan.PenaltyTimeout)
	for {
		for _, j := range jobs {
			if err := j.failed(); err != nil {
				return err
			}
		}
		running, _ := r.lowJoins()
		if running >= len(jobs) {
			return nil
		}
		if r.clk.Now().After(deadline) {
			r.p.step("  warning: %d of %d low-priority joins running after %s; measuring anyway", running, len(jobs), r.plan.PenaltyTimeout)
			return nil
		}
		if err := clock.Sleep(ctx, r.clk, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// lowShardBytes returns the bytes the data nodes' sluices sent so far
// to the open shard sessions of the low-priority shard role.
func (r *kclusterRun) lowShardBytes() int64 {
	var n int64
	for _, s := range r.fleet.sluice[1:] {
		for _, ss := range s.reg.Sessions() {
			if ss.User() == clusterLowShardUser {
				n += ss.BytesDown()
			}
		}
	}
	return n
}

// drainNet waits, for up to 10 s, until no low-priority join runs and
// the tbf queue is empty.
func (r *kclusterRun) drainNet(ctx context.Context) {
	waitIdle(ctx, r.clk, func() bool {
		if running, _ := r.lowJoins(); running > 0 {
			return false
		}
		q, err := r.net.qdisc(ctx)
		return err == nil && q.Backlog == 0
	})
}

// tables prints the points, unless the experiment was skipped.
func (k *KernelClusterReport) tables(p *printer) {
	p.tableIf(k.Skipped == "", func() table { return kernelTable(k.Rows, "low-priority joins N") })
}

// Charts of the kernel cluster experiment.
const (
	FileKernelClusterSlowdown = "kernel_cluster_slowdown_vs_n.svg"
	FileKernelClusterLinkUse  = "kernel_cluster_link_use_vs_n.svg"
)

func (k *KernelClusterReport) charts() []chartFile {
	return kernelCharts(k.Rows, FileKernelClusterSlowdown, k.SlowdownChart, FileKernelClusterLinkUse, k.LinkUseChart)
}

// SlowdownChart is the high-priority join's slowdown against N, one
// series per setting.
func (k *KernelClusterReport) SlowdownChart() *svg.Chart {
	return kernelChart(fmt.Sprintf("Cluster: high-priority join under N low-priority joins (tbf %s, %.0f ms queue)", k.Rate, k.QueueMs), "concurrent low-priority joins N", k.Rows, false)
}

// LinkUseChart is the tbf queue's use against N, one series per
// setting.
func (k *KernelClusterReport) LinkUseChart() *svg.Chart {
	return kernelChart(fmt.Sprintf("Cluster: use of the router's port toward the coordinator (tbf %s)", k.Rate), "concurrent low-priority joins N", k.Rows, true)
}

func (k *KernelClusterReport) writeMarkdown(w io.Writer) {
	if !heading(w, 5, "cluster, kernel network", k.Skipped) {
		return
	}
	fmt.Fprintf(w, "A coordinator and %d data nodes (postgres_fdw), each a throwaway PostgreSQL running in a network namespace of its own, "+
		"with a sluice of its own in front of it (in the lab's process: its route listens inside the node's namespace, and it reaches the node's server on its Unix socket): %s.\n\n",
		len(k.Nodes)-1, k.Network)
	for _, n := range k.Nodes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintf(w, "\nThe tables are the emulated cluster experiment's, wt1 and wt2 with %d rows, wt3 and wt4 with %d; each foreign server on the coordinator points at its data node's sluice, "+
		"so every data node's answers to the coordinator cross the router's one port toward it, the real bottleneck, together. "+
		"The sluices are a fleet on one catalog in etcd, so every statement applies on all of them:\n\n```sql\n%s;\n```\n\n"+
		"sluice links a shard session to its coordinator's session only among the sessions of one instance, and here the coordinator's sessions are on another sluice than the shard sessions, "+
		"so a shard session's class comes from its shard role's pool on the data node's sluice (each client user reaches the data nodes as a role of its own), and no exception rule is needed. "+
		"Settings: `network_control = off`; `on` with nothing configured about the links; `on` with every sluice's link at %s, %d%% of the rate over the %d data nodes. "+
		"N low-priority joins run in a loop while the high-priority join is measured %d times per point (elapsed is the median); "+
		"link use is the bytes the router's queue toward the coordinator sent while it was measured, per second, over its rate.\n\n",
		k.LowRows, k.HighRows, strings.Join(k.Setup, ";\n"), units.FormatRate(k.CapacityBytes), CapacityPercent, len(k.Nodes)-1, k.Reps)
	kernelTable(k.Rows, "low-priority joins N").markdown(w)
	fmt.Fprintf(w, "\n![cluster slowdown vs N](%s)\n\n![cluster link use vs N](%s)\n\n", FileKernelClusterSlowdown, FileKernelClusterLinkUse)
	kernelSummary(w, k.Rows, "the high-priority join", "the router's port")
	fmt.Fprintf(w, "\nWith the capacity each sluice holds its own link to a third of the port's rate, whatever the others send: "+
		"the high-priority join, which reads the partitions one after another, then never has the whole port, even alone.\n\n")
	fmt.Fprintf(w, "On the coordinator (passwords masked):\n\n```sql\n%s;\n```\n\n", strings.Join(k.ClusterSetup, ";\n"))
}

// targets returns the cluster's targets over the kernel network, as the
// flow-control experiment's; none when it was not run or skipped.
func (k *KernelClusterReport) targets() []Target {
	if k == nil || k.Skipped != "" {
		return nil
	}
	return kernelTargets(k.Rows, "kernel_cluster", "kernel network, cluster")
}

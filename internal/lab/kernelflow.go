package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/units"
)

// KernelFlowPlan is the scale of the flow-control experiment over the
// kernel network (Options.Network NetworkKernel).
type KernelFlowPlan struct {
	// Ns are the numbers of concurrent bulk sessions; 0, the base of
	// the slowdown, is added when missing. Empty skips the experiment.
	Ns []int
	// Reps is how many times the normal query is measured per point.
	Reps int
	// Settle is how long a point waits after the bulk statements are
	// penalised, before it measures, for the queues and the network
	// controller to settle; 0 means 2 s.
	Settle time.Duration
}

// validate checks k and fills in its defaults; a plan with no points is
// left alone (skipped).
func (k *KernelFlowPlan) validate() error {
	if run, err := points(&k.Ns, 100, "bulk sessions", "0 to 100"); !run {
		return err
	}
	orDefault(&k.Reps, 10)
	orDefault(&k.Settle, 2*time.Second)
	return nil
}

// KernelFlowReport is the outcome of the flow-control experiment over
// the kernel network.
type KernelFlowReport struct {
	// Network says what the testbed was.
	Network string `json:"network"`
	// RateBytes is the tbf queue's rate, bytes/s; Rate spells it.
	RateBytes int64  `json:"rate_bytes_per_second"`
	Rate      string `json:"rate"`
	// QueueMs is the tbf queue's depth in time at its rate.
	QueueMs float64 `json:"queue_ms"`
	// CapacityBytes is the link capacity of SettingCapacity, bytes/s.
	CapacityBytes int64 `json:"capacity_bytes_per_second"`
	// FlowWorkload's Setup is what every setting's sluice starts with.
	FlowWorkload
	Rows []KernelRow `json:"points"`
}

// kernelFlowRun is the state of one kernel flow-control experiment.
type kernelFlowRun struct {
	*flowRun
	kp  KernelFlowPlan
	net *flowNet
	rep *KernelFlowReport
	// user and password are the bulk sessions' login; "" with route set.
	user, password string
	// route is set when the bulk sessions reach the pool through a route
	// of their own.
	route bool
}

func runKernelFlow(ctx context.Context, e *env) (rep *KernelFlowReport, err error) {
	r := &kernelFlowRun{flowRun: &flowRun{env: e, plan: e.plan.Flow}, kp: e.plan.Flow.Kernel}
	p := r.p
	bulkSQL, normalSQL := r.sql()
	rep = &KernelFlowReport{FlowWorkload: FlowWorkload{BulkSQL: bulkSQL, NormalSQL: normalSQL, Reps: r.kp.Reps, Setup: r.bulkSetup()},
		RateBytes: e.netRate, Rate: formatBits(e.netRate), QueueMs: durMs(e.netQueue), CapacityBytes: e.netRate * CapacityPercent / 100}
	r.rep = rep
	p.printf("== Experiment 2: flow control, kernel network ==\n")
	p.printf("normal query %q measured %d times per point under N bulk sessions pulling %q in a loop; settings %s\n",
		normalSQL, r.kp.Reps, bulkSQL, strings.Join(kernelSettings(), ", "))
	if r.net, err = newFlowNet(ctx, e.netRate, e.netQueue); err != nil {
		return nil, err
	}
	defer r.net.remove(p)
	rep.Network = r.net.describe()
	p.step("network: %s", rep.Network)

	drop, err := r.bulkLogin(ctx)
	if err != nil {
		return nil, err
	}
	defer r.dropLogin(ctx, drop)
	if !r.route {
		rep.Setup = append(rep.Setup, fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", bulkUser, bulkPool))
	}
	p.step("bulk sessions: %s", rep.Binding)
	for _, set := range kernelSettings() {
		if err := r.setting(ctx, set); err != nil {
			return nil, fmt.Errorf("%s: %w", set, err)
		}
	}
	return rep, nil
}

// bulkLogin finds the bulk sessions' login: bulk on the embedded
// database; elsewhere one the lab creates (drop removes it), or, when it
// cannot, the database's own user through a route whose sessions
// default to the bulk pool.
func (r *kernelFlowRun) bulkLogin(ctx context.Context) (drop func(context.Context) error, err error) {
	if r.db.kind == BackendEmbedded {
		r.user = bulkUser
		r.rep.Binding = fmt.Sprintf("user %s, bound to pool %s", bulkUser, bulkPool)
		return nil, nil
	}
	pw, drop, reason, err := r.createLogin(ctx)
	if err != nil {
		return nil, err
	}
	if reason == "" {
		r.user, r.password = bulkUser, pw
		r.rep.Binding = fmt.Sprintf("user %s (a login the lab created for the run and drops at the end), bound to pool %s", bulkUser, bulkPool)
		return drop, nil
	}
	r.route = true
	r.rep.Binding = fmt.Sprintf("the database's own user through a second route whose sessions default to pool %s, because %s", bulkPool, reason)
	return nil, nil
}

// isBulk picks the bulk sessions' statements.
func (r *kernelFlowRun) isBulk(s *session.Snapshot) bool {
	if r.route {
		return s.Route == "bulk"
	}
	return s.User == bulkUser
}

// setting measures every point of one setting on a sluice of its own,
// so that no setting inherits another's state.
func (r *kernelFlowRun) setting(ctx context.Context, set string) error {
	s, err := startSluice(r.clk, r.log, r.db)
	if err != nil {
		return err
	}
	defer s.close()
	stmts := r.rep.Setup
	control := "on"
	switch set {
	case SettingOff:
		control = "off"
	case SettingCapacity:
		stmts = append(stmts[:len(stmts):len(stmts)], fmt.Sprintf("ALTER LINK default WITH (capacity='%s')", units.FormatRate(r.rep.CapacityBytes)))
	}
	if err := s.exec(ctx, append(stmts[:len(stmts):len(stmts)], "SET network_control = "+control)...); err != nil {
		return err
	}
	addr, err := r.listenRoute(ctx, s, "lab", "")
	if err != nil {
		return err
	}
	bulkAddr := addr
	if r.route {
		if bulkAddr, err = r.listenRoute(ctx, s, "bulk", bulkPool); err != nil {
			return err
		}
	}
	return kernelSweep(r.p, &r.rep.Rows, set, r.kp.Ns, "normal query", "bulk", "bulk session", func(n int) (KernelRow, error) {
		return r.point(ctx, s, set, addr, bulkAddr, n)
	})
}

// listenRoute adds a route named name to s, listening inside sluice's
// namespace, and returns its address.
func (r *kernelFlowRun) listenRoute(ctx context.Context, s *sluice, name, pool string) (string, error) {
	ln, err := r.net.listen(ctx)
	if err != nil {
		return "", err
	}
	addr, err := s.addRouteOn(name, pool, ln)
	if err != nil {
		ln.Close()
		return "", err
	}
	return addr, nil
}

// point measures the normal query under n bulk sessions, all clients in
// the client namespace.
func (r *kernelFlowRun) point(ctx context.Context, s *sluice, set, addr, bulkAddr string, n int) (KernelRow, error) {
	row := KernelRow{Setting: set, N: n}
	normal, err := r.db.connectVia(ctx, r.net.dial, addr, "", "", "")
	if err != nil {
		return row, err
	}
	defer normal.close()
	if _, err := normal.normal(ctx); err != nil { // warm the session up
		return row, err
	}
	var bulkBytes atomic.Int64
	errs, stopBulk := sessions(ctx, n, "bulk session",
		func(ctx context.Context) (conn, error) {
			return r.db.connectVia(ctx, r.net.dial, bulkAddr, r.user, r.password, "")
		},
		func(ctx context.Context, c conn) error { return c.bulk(ctx, &bulkBytes) },
		func() { r.drainNet(ctx, s) })
	defer stopBulk()
	w := r.bulkWait(s, r.isBulk, n, errs)
	if n > 0 {
		r.p.step("%s, N=%d: started %s; waiting until their statements are penalised", set, n, plural(n, "bulk session"))
		t0 := r.clk.Now()
		if err := w.wait(ctx, n, true); err != nil {
			return row, err
		}
		row.PenaltySeconds = r.clk.Now().Sub(t0).Seconds()
		if err := clock.Sleep(ctx, r.clk, r.kp.Settle); err != nil {
			return row, err
		}
	}
	err = r.net.measure(ctx, r.env, &row, r.kp.Reps, w.before(ctx, n), bulkBytes.Load,
		func() (time.Duration, error) {
			t0 := r.clk.Now()
			got, err := normal.normal(ctx)
			if err != nil {
				return 0, fmt.Errorf("normal query: %w", err)
			}
			if n == 0 {
				r.rep.NormalBytes = got
			}
			return r.clk.Now().Sub(t0), nil
		})
	if err != nil {
		return row, err
	}
	row.Controller = controllerEstimate(s)
	stopBulk()
	return row, nil
}

// drainNet waits, for up to 10 s, until no bulk statement runs, the
// link's queues are empty and the tbf queue too, so that the next point
// starts on an idle network.
func (r *kernelFlowRun) drainNet(ctx context.Context, s *sluice) {
	waitIdle(ctx, r.clk, func() bool {
		running, _ := s.statements(r.isBulk)
		if running > 0 || s.queuedBytes() > 0 {
			return false
		}
		q, err := r.net.qdisc(ctx)
		return err == nil && q.Backlog == 0
	})
}

func (k *KernelFlowReport) tables(p *printer) { p.table(kernelTable(k.Rows, "bulk sessions N")) }

// Charts of the kernel flow-control experiment.
const (
	FileKernelSlowdown = "kernel_slowdown_vs_n.svg"
	FileKernelLinkUse  = "kernel_link_use_vs_n.svg"
)

func (k *KernelFlowReport) charts() []chartFile {
	return kernelCharts(k.Rows, FileKernelSlowdown, k.SlowdownChart, FileKernelLinkUse, k.LinkUseChart)
}

// SlowdownChart is the normal query's slowdown against N, one series
// per setting.
func (k *KernelFlowReport) SlowdownChart() *svg.Chart {
	return kernelChart(fmt.Sprintf("Slowdown of a %s query under N bulk sessions (tbf %s, %.0f ms queue)", units.FormatBytes(roundMB(k.NormalBytes)), k.Rate, k.QueueMs), "concurrent bulk sessions N", k.Rows, false)
}

// LinkUseChart is the tbf queue's use against N, one series per
// setting.
func (k *KernelFlowReport) LinkUseChart() *svg.Chart {
	return kernelChart(fmt.Sprintf("Use of the kernel bottleneck (tbf %s) while the query was measured", k.Rate), "concurrent bulk sessions N", k.Rows, true)
}

func (k *KernelFlowReport) writeMarkdown(w io.Writer) {
	heading(w, 2, "flow control, kernel network", "")
	fmt.Fprintf(w, "The clients and sluice are in network namespaces of their own on this host: %s. "+
		"Every byte from sluice to the clients crosses the kernel's tbf queue, real TCP through real buffers; sluice's link emulates nothing. "+
		"sluice reaches the database from the host's namespace.\n\n", k.Network)
	fmt.Fprintf(w, "N bulk sessions pull a large result in a loop:\n\n```sql\n%s\n```\n\n"+
		"while one normal-priority session runs a query returning about %s, measured %d times per point (elapsed is the median):\n\n```sql\n%s\n```\n\n",
		k.BulkSQL, units.FormatBytes(roundMB(k.NormalBytes)), k.Reps, k.NormalSQL)
	fmt.Fprintf(w, "The bulk sessions are %s. Each setting runs on a sluice of its own, set up with:\n\n```sql\n%s;\n```\n\n",
		k.Binding, strings.Join(k.Setup, ";\n"))
	fmt.Fprintf(w, "and then `SET network_control = off` (%s), `on` with nothing configured about the link (%s: the network controller finds the bottleneck from the sockets' TCP_INFO), "+
		"or `on` with `ALTER LINK default WITH (capacity='%s')` (%s). Slowdown is the elapsed time over the elapsed time at N = 0 with the same setting; "+
		"link use is the bytes the tbf queue sent while the query was measured, per second, over its rate.\n\n",
		SettingOff, SettingOn, units.FormatRate(k.CapacityBytes), SettingCapacity)
	kernelTable(k.Rows, "bulk sessions N").markdown(w)
	fmt.Fprintf(w, "\n![slowdown vs N](%s)\n\n![link use vs N](%s)\n\n", FileKernelSlowdown, FileKernelLinkUse)
	kernelSummary(w, k.Rows, "the query", "the bottleneck")
	fmt.Fprintln(w)
}

// targets returns the kernel experiment's targets (kernelTargets); a
// nil report leaves them out: they are about the kernel network only.
func (k *KernelFlowReport) targets() []Target {
	if k == nil {
		return nil
	}
	return kernelTargets(k.Rows, "kernel", "kernel network")
}

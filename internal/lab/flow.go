package lab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/lab/flowsql"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/units"
)

// Catalog names the experiment creates in sluice.
const (
	bulkUser = "bulk"
	bulkPool = "bulk_pool"
	bulkRule = "bulk_rule"
)

// FlowReport is the flow-control experiment's outcome.
type FlowReport struct {
	// LinkCapacity is the link's.
	LinkCapacity
	// LinkQueue is the link's device FIFO.
	LinkQueue
	FlowWorkload
	Rows []FlowRow `json:"points"`
}

// FlowWorkload is what the flow-control experiment runs, over either
// network.
type FlowWorkload struct {
	BulkSQL   string `json:"bulk_sql"`
	NormalSQL string `json:"normal_sql"`
	// NormalBytes is the payload of one normal query's result.
	NormalBytes int64 `json:"normal_result_bytes"`
	Reps        int   `json:"reps_per_point"`
	// Setup are the console statements that made the bulk pool and
	// bound the bulk sessions to it.
	Setup []string `json:"setup"`
	// Binding says how bulk sessions land in the bulk pool.
	Binding string `json:"bulk_binding"`
}

// FlowPlan is the scale of the flow-control experiment.
type FlowPlan struct {
	// Ns are the numbers of concurrent bulk sessions; 0 is always
	// measured (it is the base of the slowdown) and added when missing.
	// Empty skips the experiment.
	Ns []int
	// Reps is how many times the normal query is measured per point.
	Reps int
	// Capacity is the link capacity in bytes/s; 0 calibrates it: the
	// largest of 100, 50, 20, 10, 5, 2 or 1 MB/s, at most MaxCapacity,
	// that is at most a tenth of what one bulk session streams through
	// an unlimited link, so that one session saturates it and the
	// processor time the bulk traffic costs stays small (see the
	// report).
	Capacity int64
	// MaxCapacity caps the calibrated capacity; 0 means 100 MB/s.
	MaxCapacity int64
	// PenaltyRule is the rule that penalises the bulk statements; its
	// PenaltyTimeout defaults to 20 s.
	PenaltyRule
	// Kernel is the experiment's scale over the kernel network
	// (Options.Network NetworkKernel), which measures it in place of Ns.
	Kernel KernelFlowPlan
}

// validate checks f and fills in its defaults; a plan with no points is
// left alone (skipped).
func (f *FlowPlan) validate() error {
	if run, err := pointsBeside(&f.Kernel, f.Kernel.Ns, &f.Ns, 100, "bulk sessions", "0 to 100"); !run {
		return err
	}
	f.PenaltyRule.defaults(20 * time.Second)
	orDefault(&f.Reps, 20)
	orDefault(&f.MaxCapacity, 100_000_000)
	return nil
}

// flowRun is the state of one flow-control experiment.
type flowRun struct {
	*env
	plan FlowPlan
	acc  *bulkAccess
	// capacity is the link capacity in bytes/s, once chosen.
	capacity int64
}

// bulkAccess is how bulk sessions reach the bulk pool.
type bulkAccess struct {
	addr, user, password string
	binding              string
	// isBulk picks the bulk sessions' statements.
	isBulk func(*session.Snapshot) bool
	// drop removes what setup created in the database; nil if nothing.
	drop func(ctx context.Context) error
}

func (r *flowRun) sql() (bulk, normal string) {
	if r.db.protocol == protoMySQL {
		return flowsql.MySQLBulk, flowsql.MySQLNormal
	}
	return flowsql.PGBulk, flowsql.PGNormal
}

func runFlow(ctx context.Context, e *env) (rep *FlowReport, err error) {
	r := &flowRun{env: e, plan: e.plan.Flow}
	p := r.p
	bulkSQL, normalSQL := r.sql()
	rep = &FlowReport{
		FlowWorkload: FlowWorkload{BulkSQL: bulkSQL, NormalSQL: normalSQL, Reps: r.plan.Reps, Setup: r.bulkSetup()},
		LinkQueue:    defaultQueue(),
	}
	p.printf("== Experiment 2: flow control ==\n")
	p.printf("normal query %q measured %d times per point under N bulk sessions pulling %q in a loop\n", normalSQL, r.plan.Reps, bulkSQL)

	if err := r.s.exec(ctx, rep.Setup...); err != nil {
		return nil, err
	}
	acc, err := r.setupBulk(ctx)
	if err != nil {
		return nil, err
	}
	r.acc = acc
	if acc.user == bulkUser {
		rep.Setup = append(rep.Setup, fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", bulkUser, bulkPool))
	}
	rep.Binding = acc.binding
	p.step("bulk sessions: %s", acc.binding)
	defer func() {
		r.s.restore(ctx, "ALTER LINK default WITH (capacity=DEFAULT)", "RESET network_control")
		r.dropLogin(ctx, acc.drop)
	}()

	if rep.LinkCapacity, err = r.linkCapacity(ctx, r.plan.Capacity, r.plan.MaxCapacity, r.route); err != nil {
		return nil, err
	}
	capacity := rep.CapacityBytes
	r.capacity = capacity
	if err := r.s.setCapacity(ctx, capacity); err != nil {
		return nil, err
	}

	err = sweep(ctx, r.s, r.plan.Ns, func(control string, n int, base float64) (float64, error) {
		row, nb, err := r.point(ctx, control, n)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			rep.NormalBytes = nb
		}
		row.ModelMs = row.against(control, n, base, rep.NormalBytes, 1, rep.QueueBytes, capacity)
		rep.Rows = append(rep.Rows, row)
		p.step("network_control %s, N=%d: normal query %.1f ms (median; mean %.1f, min %.1f, max %.1f) = %.2fx; bulk %.1f MB/s",
			control, n, row.ElapsedMs, row.MeanMs, row.MinMs, row.MaxMs, row.Slowdown, row.BulkMBps)
		return row.ElapsedMs, nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// setupBulk binds the bulk sessions to the bulk pool: through a login
// named bulk bound with CREATE USER where the database allows one (the
// embedded one takes any user name), else through a second route whose
// sessions default to the pool.
func (r *flowRun) setupBulk(ctx context.Context) (*bulkAccess, error) {
	acc := &bulkAccess{addr: r.route, user: bulkUser,
		isBulk: func(s *session.Snapshot) bool { return s.User == bulkUser }}
	why := ""
	if r.db.kind == BackendEmbedded {
		acc.binding = fmt.Sprintf("user %s, bound to pool %s", bulkUser, bulkPool)
	} else {
		pw, drop, reason, err := r.createLogin(ctx)
		if err != nil {
			return nil, err
		}
		if reason == "" {
			c, err := r.db.connect(ctx, r.route, bulkUser, pw)
			if err == nil {
				c.close()
				acc.password, acc.drop = pw, drop
				acc.binding = fmt.Sprintf("user %s (a login the lab created for the run and drops at the end), bound to pool %s", bulkUser, bulkPool)
			} else {
				reason = fmt.Sprintf("the new login %s cannot connect (%v)", bulkUser, err)
				if derr := drop(ctx); derr != nil {
					r.log.Warn("drop login", "user", bulkUser, "err", derr)
				}
			}
		}
		why = reason
	}
	if why == "" {
		if err := r.s.exec(ctx, fmt.Sprintf("CREATE USER %s RESOURCE POOL '%s'", bulkUser, bulkPool)); err != nil {
			if acc.drop != nil {
				acc.drop(context.WithoutCancel(ctx))
			}
			return nil, err
		}
		return acc, nil
	}
	addr, err := r.s.addRoute("bulk", bulkPool)
	if err != nil {
		return nil, err
	}
	return &bulkAccess{addr: addr, isBulk: func(s *session.Snapshot) bool { return s.Route == "bulk" },
		binding: fmt.Sprintf("the DSN's own user through a second route (%s) whose sessions default to pool %s, because %s", addr, bulkPool, why)}, nil
}

// createLogin creates a database login named bulk with a random password
// and returns it with a function that drops it. reason is set, and no
// login made, when the database has one already or refuses to make one.
func (r *flowRun) createLogin(ctx context.Context) (password string, drop func(context.Context) error, reason string, err error) {
	if password, err = pgtemp.Password(); err != nil {
		return "", nil, "", err
	}
	switch r.db.protocol {
	case protoMySQL:
		db, err := sql.Open("mysql", r.db.mysqlConfig(r.db.upstream, "", "").FormatDSN())
		if err != nil {
			return "", nil, "", err
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", bulkUser, password)); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1396 {
				return "", nil, fmt.Sprintf("a login named %s exists already and the lab does not change existing logins", bulkUser), nil
			}
			return "", nil, fmt.Sprintf("the database refused to create a login (%v)", err), nil
		}
		drop = func(ctx context.Context) error {
			db, err := sql.Open("mysql", r.db.mysqlConfig(r.db.upstream, "", "").FormatDSN())
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.ExecContext(ctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", bulkUser))
			return err
		}
		if _, err := db.ExecContext(ctx, fmt.Sprintf("GRANT SELECT ON `%s`.* TO '%s'@'%%'", r.db.dbname, bulkUser)); err != nil {
			drop(ctx)
			return "", nil, fmt.Sprintf("the database refused to grant SELECT to a new login (%v)", err), nil
		}
		return password, drop, "", nil
	default:
		c, err := pgconn.Connect(ctx, r.db.directURL())
		if err != nil {
			return "", nil, "", fmt.Errorf("connect to %s: %w", r.db.upstream, err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		res, err := c.Exec(ctx, fmt.Sprintf("SELECT 1 FROM pg_roles WHERE rolname = '%s'", bulkUser)).ReadAll()
		if err != nil {
			return "", nil, fmt.Sprintf("the roles cannot be listed (%v)", err), nil
		}
		if len(res) > 0 && len(res[0].Rows) > 0 {
			return "", nil, fmt.Sprintf("a role named %s exists already and the lab does not change existing roles", bulkUser), nil
		}
		if _, err := c.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", bulkUser, password)).ReadAll(); err != nil {
			return "", nil, fmt.Sprintf("the database refused to create a role (%v)", err), nil
		}
		drop = func(ctx context.Context) error {
			c, err := pgconn.Connect(ctx, r.db.directURL())
			if err != nil {
				return err
			}
			defer c.Close(context.WithoutCancel(ctx))
			_, err = c.Exec(ctx, "DROP ROLE IF EXISTS "+bulkUser).ReadAll()
			return err
		}
		return password, drop, "", nil
	}
}

// FlowRow is one point: the normal query under N bulk sessions.
type FlowRow struct {
	Control string `json:"network_control"` // "off" or "on"
	N       int    `json:"bulk_sessions"`
	// PointTimes are the normal query's elapsed times.
	PointTimes
	// BulkMBps is what the bulk sessions received together while the
	// normal query was measured.
	BulkMBps float64 `json:"bulk_mb_per_s"`
	// PenaltySeconds is how long after the bulk sessions started all
	// their statements were penalised.
	PenaltySeconds float64 `json:"penalty_seconds,omitempty"`
	// ModelMs, with network_control off, is what the shared FIFO
	// predicts: elapsed at N = 0 plus (N x normal bytes + FIFO size) /
	// capacity, the extra transfer of sharing the link with N flows and
	// one wait behind a full FIFO. 0 when not computed.
	ModelMs float64 `json:"fifo_model_ms,omitempty"`
	// SamplesMs are the measurements, in order.
	SamplesMs []float64 `json:"samples_ms"`
}

// bulkSetup returns the console statements that make the bulk pool,
// whose rule penalises the bulk statements.
func (r *flowRun) bulkSetup() []string {
	return []string{
		fmt.Sprintf("CREATE EXCEPT RULE %s WITH (bandwidth=%s, elapsedtime=%s, action='penalty')", bulkRule, fmtNum(r.plan.RuleBandwidth), fmtNum(r.plan.RuleElapsed)),
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (except_rule='%s')", bulkPool, bulkRule),
		fmt.Sprintf("SET except_check_period = '%s'", units.FormatDuration(r.plan.CheckPeriod)),
	}
}

// dropLogin removes, with drop, the bulk login the lab created, given
// 30 s of its own after ctx ends; a nil drop does nothing.
func (r *flowRun) dropLogin(ctx context.Context, drop func(context.Context) error) {
	if drop == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := drop(cctx); err != nil {
		r.p.step("could not drop the %s login: %v", bulkUser, err)
	}
}

// bulkWait waits until the statements of n bulk sessions on s, those
// isBulk picks, are penalised; it fails with a session's error on errs.
func (r *flowRun) bulkWait(s *sluice, isBulk func(*session.Snapshot) bool, n int, errs <-chan error) *penaltyWait {
	return &penaltyWait{clk: r.clk, p: r.p, timeout: r.plan.PenaltyTimeout, period: time.Second, noun: "bulk statements", only: "only ",
		state: func() (int, int, error) {
			running, pen := s.statements(isBulk)
			if pen >= n {
				return running, pen, nil
			}
			return running, pen, failed(errs)
		},
		done: func(n, _, pen int) bool { return pen >= n }}
}

// point measures the normal query under n bulk sessions and returns the
// row and the normal result's payload bytes.
func (r *flowRun) point(ctx context.Context, control string, n int) (FlowRow, int64, error) {
	row := FlowRow{Control: control, N: n}
	normal, err := r.db.connect(ctx, r.route, "", "")
	if err != nil {
		return row, 0, err
	}
	defer normal.close()
	if _, err := normal.normal(ctx); err != nil { // warm the session up
		return row, 0, err
	}

	var bulkBytes atomic.Int64
	errs, stopBulk := sessions(ctx, n, "bulk session",
		func(ctx context.Context) (conn, error) {
			return r.db.connect(ctx, r.acc.addr, r.acc.user, r.acc.password)
		},
		func(ctx context.Context, c conn) error { return c.bulk(ctx, &bulkBytes) },
		func() { r.drain(ctx) })
	defer stopBulk()
	w := r.bulkWait(r.s, r.acc.isBulk, n, errs)
	if n > 0 {
		r.p.step("network_control %s, N=%d: started %s; waiting until their statements are penalised", control, n, plural(n, "bulk session"))
		if row.PenaltySeconds, err = w.penalise(ctx, n, r.capacity); err != nil {
			return row, 0, err
		}
	}
	var nb int64
	b0, m0 := bulkBytes.Load(), r.clk.Now()
	times, err := measureReps(ctx, r.p, fmt.Sprintf("network_control %s, N=%d", control, n), r.plan.Reps,
		w.before(ctx, n), nil,
		func() (time.Duration, error) {
			t0 := r.clk.Now()
			got, err := normal.normal(ctx)
			if err != nil {
				return 0, fmt.Errorf("normal query: %w", err)
			}
			nb = got
			return r.clk.Now().Sub(t0), nil
		})
	if err != nil {
		return row, 0, err
	}
	if secs := r.clk.Now().Sub(m0).Seconds(); secs > 0 {
		row.BulkMBps = float64(bulkBytes.Load()-b0) / 1e6 / secs
	}
	stopBulk()
	row.PointTimes, row.SamplesMs = pointTimes(times), times
	return row, nb, nil
}

// drain waits, for up to 10 s, until no bulk statement runs and the
// link's queues are empty, so the next point starts on an idle link.
func (r *flowRun) drain(ctx context.Context) {
	waitIdle(ctx, r.clk, func() bool {
		running, _ := r.s.statements(r.acc.isBulk)
		return running == 0 && r.s.queuedBytes() == 0
	})
}

// row returns the point for control and n, or nil.
func (f *FlowReport) row(control string, n int) *FlowRow { return sweepAt(f.Rows, control, n) }

// tables prints the points.
func (f *FlowReport) tables(p *printer) { p.table(f.table()) }

// table returns the flow-control points, one row per N with both
// settings side by side.
func (f *FlowReport) table() table {
	mb := func(r *FlowRow) float64 { return r.BulkMBps }
	return sweepTable(f.Rows, "bulk sessions N", []string{"off: bulk MB/s", "on: bulk MB/s"}, func(off, on *FlowRow) []string {
		return []string{mbpsCell(off, mb), mbpsCell(on, mb)}
	})
}

// charts returns the slowdown chart.
func (f *FlowReport) charts() []chartFile { return []chartFile{{FileSlowdown, f.SlowdownChart}} }

// SlowdownChart is the chart of the normal query's slowdown against the
// number of bulk sessions, with network control off and on.
func (f *FlowReport) SlowdownChart() *svg.Chart {
	return sweepChart(&svg.Chart{
		Title:  fmt.Sprintf("Slowdown of a %s query under N bulk sessions (link %s)", units.FormatBytes(roundMB(f.NormalBytes)), f.Capacity),
		XLabel: "concurrent bulk sessions N",
		YLabel: "slowdown (elapsed / elapsed at N = 0)",
		ZeroX:  true, ZeroY: true,
		Guides: []svg.Guide{{Y: 6, Label: "target with control off: >= 6x"}, {Y: 1.2, Label: "target with control on: <= 1.2x"}},
	}, f.Rows)
}

// roundMB rounds a byte count to whole MB when it is within 5% of one,
// so a 1,000,000-byte result reads "1MB".
func roundMB(b int64) int64 {
	mb := math.Round(float64(b) / 1e6)
	if mb >= 1 && math.Abs(float64(b)-mb*1e6) <= 0.05*mb*1e6 {
		return int64(mb * 1e6)
	}
	return b
}

func (f *FlowReport) writeMarkdown(w io.Writer) {
	heading(w, 2, "flow control", "")
	drain := func(b int64) float64 { return drainMs(b, f.CapacityBytes) }
	fmt.Fprintf(w, "The route's link has a capacity of %s and a device FIFO of %s, the NIC ring plus kernel socket buffers of a busy host "+
		"(%.1f ms to drain at that capacity). ", f.Capacity, units.FormatBytes(f.QueueBytes), drain(f.QueueBytes))
	if f.Calibrated {
		fmt.Fprintf(w, "The capacity was chosen so that one bulk session saturates it many times over: one session streamed %.0f MB/s through an unlimited link. "+
			"The margin matters when the database, sluice and every client share one machine: bulk bytes cost processor time that the normal query "+
			"would otherwise wait for, and a link well below what the machine can move keeps the link, not the processor, the bottleneck. ", f.StreamMBps)
	}
	fmt.Fprintf(w, "N bulk sessions pull a large result in a loop:\n\n```sql\n%s\n```\n\n"+
		"while one normal-priority session runs a query returning about %s, measured %d times per point "+
		"(elapsed is the median):\n\n```sql\n%s\n```\n\n",
		f.BulkSQL, units.FormatBytes(roundMB(f.NormalBytes)), f.Reps, f.NormalSQL)
	fmt.Fprintf(w, "The bulk sessions are %s, with the exception rule that demotes them:\n\n```sql\n%s;\n```\n\n",
		f.Binding, strings.Join(f.Setup, ";\n"))
	fmt.Fprintf(w, "Each point waits until every bulk statement has been penalised (SHOW STATEMENTS shows `penalised = yes`, class `low`) before it measures. "+
		"Slowdown is the elapsed time over the elapsed time at N = 0 with the same setting.\n\n")
	f.table().markdown(w)
	fmt.Fprintf(w, "\n![slowdown vs N](%s)\n\n", FileSlowdown)
	off, on := f.row("off", sweepMaxN(f.Rows)), f.row("on", sweepMaxN(f.Rows))
	fmt.Fprintf(w, "What the numbers show:\n\n")
	fmt.Fprintf(w, "- **network_control = off**: the link is one FIFO, as an unmanaged network is. The slowdown comes from the shared %s device FIFO: "+
		"the normal query's bytes get about one admission in N+1 as space frees (N+1 flows share the capacity), and each of its chunks "+
		"queues behind whatever the bulk flows already put in the FIFO (%s is %.1f ms at %s). Its time grows roughly as (N+1) times its unloaded transfer time plus that queueing; "+
		"the FIFO model column is that arithmetic, elapsed at N = 0 plus (N x %s + %s) / capacity.%s\n",
		units.FormatBytes(f.QueueBytes), units.FormatBytes(f.QueueBytes), drain(f.QueueBytes), f.Capacity,
		units.FormatBytes(roundMB(f.NormalBytes)), units.FormatBytes(f.QueueBytes), tookText(off, " its time on an idle link"))
	fmt.Fprintf(w, "- **network_control = on**: the penalised bulk statements are in the low class. Their bytes are sent only when no normal-priority bytes wait, "+
		"and the low-priority bytes inside the FIFO are bounded by low_priority_queue_bytes (%s, %.2f ms at %s), so a normal byte waits behind at most that much bulk data "+
		"and while the normal query runs (and for %v after) the low class enters at most at low_priority_yield (%d%%) of the capacity, so its bytes do not take the processors "+
		"the query's server, proxy and client need between round trips: the normal query runs at nearly its unloaded speed, and the bulk sessions have the whole link whenever it does not run.%s\n\n",
		units.FormatBytes(f.LowQueueBytes), drain(f.LowQueueBytes), f.Capacity, link.YieldHold, link.DefaultLowYieldPercent, tookText(on, ""))
}

// tookText says what the normal query took at point r, its slowdown
// followed by what, or "" without a point.
func tookText(r *FlowRow, what string) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf(" At N = %d the query took %.1f ms, %.2fx%s.", r.N, r.ElapsedMs, r.Slowdown, what)
}

// Target names of the flow-control experiment.
const (
	TargetSlowdownOff = "slowdown_n10_control_off"
	TargetSlowdownOn  = "slowdown_n10_control_on"
)

// targets returns the flow-control experiment's targets: the slowdown
// at N = 10 at least 6x with network_control off and at most 1.2x with
// it on. A nil report (experiment not run) leaves them unmeasured.
func (f *FlowReport) targets() []Target {
	off := Target{Name: TargetSlowdownOff, Description: "slowdown at N=10 with network_control off", Want: ">= 6x"}
	on := Target{Name: TargetSlowdownOn, Description: "slowdown at N=10 with network_control on", Want: "<= 1.2x"}
	if f == nil {
		return []Target{off, on}
	}
	if r := f.row("off", 10); r != nil {
		off.Measured, off.Value, off.Met = true, r.Slowdown, r.Slowdown >= 6
	}
	if r := f.row("on", 10); r != nil {
		on.Measured, on.Value, on.Met = true, r.Slowdown, r.Slowdown <= 1.2
	}
	return []Target{off, on}
}

package lab

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/units"
)

// headroom is how many times the calibrated single-session rate must
// exceed the link capacity. When the database, sluice and every client
// share a small machine, bulk traffic costs processor time that the
// normal query's server, proxy and client then wait for, whatever the
// link does; a link well below what the machine can move keeps the link,
// not the processor, the bottleneck being measured. On two cores, 20 MB/s
// keeps that cost within a few percent of the normal query's time where
// 100 MB/s more than doubles it.
const headroom = 10

// The statements of the flow-control experiment.
const (
	pgBulkSQL      = `COPY (SELECT repeat('b', 7000) FROM generate_series(1, 100000)) TO STDOUT`
	pgNormalSQL    = `SELECT repeat('n', 1000) FROM generate_series(1, 1000)`
	mysqlBulkSQL   = `SELECT REPEAT('b', 7000) FROM seq_1_to_100000`
	mysqlNormalSQL = `SELECT REPEAT('n', 1000) FROM seq_1_to_1000`
)

// Catalog names the experiment creates in sluice.
const (
	bulkUser = "bulk"
	bulkPool = "bulk_pool"
	bulkRule = "bulk_rule"
)

// FlowReport is the flow-control experiment's outcome.
type FlowReport struct {
	// CapacityBytes is the link capacity, in bytes/s; Capacity spells it.
	CapacityBytes int64  `json:"capacity_bytes_per_second"`
	Capacity      string `json:"capacity"`
	// Calibrated is set when the capacity came from StreamMBps, what one
	// bulk session streamed through an unlimited link.
	Calibrated bool    `json:"calibrated"`
	StreamMBps float64 `json:"one_session_stream_mb_per_s,omitempty"`
	// QueueBytes is the link's device FIFO; LowQueueBytes the occupancy
	// bound on low-priority bytes in it with network_control on.
	QueueBytes    int64  `json:"device_queue_bytes"`
	LowQueueBytes int64  `json:"low_priority_queue_bytes"`
	BulkSQL       string `json:"bulk_sql"`
	NormalSQL     string `json:"normal_sql"`
	// NormalBytes is the payload of one normal query's result.
	NormalBytes int64 `json:"normal_result_bytes"`
	Reps        int   `json:"reps_per_point"`
	// Setup are the console statements that made the bulk pool.
	Setup []string `json:"setup"`
	// Binding says how bulk sessions land in the bulk pool.
	Binding string    `json:"bulk_binding"`
	Rows    []FlowRow `json:"points"`
}

// FlowRow is one point: the normal query under N bulk sessions.
type FlowRow struct {
	Control string `json:"network_control"` // "off" or "on"
	N       int    `json:"bulk_sessions"`
	// ElapsedMs is the median elapsed time of the normal query; MeanMs,
	// MinMs and MaxMs describe the same measurements.
	ElapsedMs float64 `json:"elapsed_ms"`
	MeanMs    float64 `json:"mean_ms"`
	MinMs     float64 `json:"min_ms"`
	MaxMs     float64 `json:"max_ms"`
	// Slowdown is ElapsedMs over ElapsedMs at N = 0 with the same
	// network_control.
	Slowdown float64 `json:"slowdown"`
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

// flowRun is the state of one flow-control experiment.
type flowRun struct {
	plan  FlowPlan
	db    *database
	s     *sluice
	route string
	clk   clock.Clock
	log   *slog.Logger
	p     *printer
	acc   *bulkAccess
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
		return mysqlBulkSQL, mysqlNormalSQL
	}
	return pgBulkSQL, pgNormalSQL
}

func runFlow(ctx context.Context, r *flowRun) (rep *FlowReport, err error) {
	p := r.p
	bulkSQL, normalSQL := r.sql()
	rep = &FlowReport{
		BulkSQL: bulkSQL, NormalSQL: normalSQL, Reps: r.plan.Reps,
		QueueBytes: link.DefaultQueueSize, LowQueueBytes: link.DefaultLowPriorityQueueBytes,
	}
	p.printf("== Experiment 2: flow control ==\n")
	p.printf("normal query %q measured %d times per point under N bulk sessions pulling %q in a loop\n", normalSQL, r.plan.Reps, bulkSQL)

	rep.Setup = []string{
		fmt.Sprintf("CREATE EXCEPT RULE %s WITH (bandwidth=%s, elapsedtime=%s, action='penalty')", bulkRule, fmtNum(r.plan.RuleBandwidth), fmtNum(r.plan.RuleElapsed)),
		fmt.Sprintf("CREATE RESOURCE POOL %s WITH (except_rule='%s')", bulkPool, bulkRule),
		fmt.Sprintf("SET except_check_period = '%s'", units.FormatDuration(r.plan.CheckPeriod)),
	}
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
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		r.s.exec(cctx, "ALTER LINK default WITH (capacity=DEFAULT)", "RESET network_control")
		if acc.drop != nil {
			if derr := acc.drop(cctx); derr != nil {
				p.step("could not drop the %s login: %v", bulkUser, derr)
			}
		}
	}()

	capacity, mbps, err := linkCapacity(r.plan.Capacity, r.plan.MaxCapacity, func() (float64, error) { return r.calibrate(ctx) }, p)
	if err != nil {
		return nil, err
	}
	rep.Calibrated, rep.StreamMBps = r.plan.Capacity <= 0, mbps
	rep.CapacityBytes, rep.Capacity = capacity, units.FormatRate(capacity)
	r.capacity = capacity
	if err := r.s.setCapacity(ctx, capacity); err != nil {
		return nil, err
	}

	for _, control := range []string{"off", "on"} {
		if err := r.s.exec(ctx, "SET network_control = "+control); err != nil {
			return nil, err
		}
		var base float64
		for _, n := range r.plan.Ns {
			row, nb, err := r.point(ctx, control, n)
			if err != nil {
				return nil, fmt.Errorf("network_control %s, N=%d: %w", control, n, err)
			}
			if n == 0 {
				base = row.ElapsedMs
				rep.NormalBytes = nb
			}
			if base > 0 {
				row.Slowdown = row.ElapsedMs / base
			}
			if control == "off" {
				row.ModelMs = base
				if n > 0 {
					row.ModelMs += float64(int64(n)*rep.NormalBytes+rep.QueueBytes) / float64(capacity) * 1000
				}
			}
			rep.Rows = append(rep.Rows, row)
			p.step("network_control %s, N=%d: normal query %.1f ms (median; mean %.1f, min %.1f, max %.1f) = %.2fx; bulk %.1f MB/s",
				control, n, row.ElapsedMs, row.MeanMs, row.MinMs, row.MaxMs, row.Slowdown, row.BulkMBps)
		}
	}
	return rep, nil
}

// pickCapacity returns the largest of 100, 50, 20, 10, 5, 2 and 1 MB/s
// that is at most max and at most rate/headroom (rate in bytes/s), or
// 1 MB/s.
// linkCapacity returns planned when it is positive; otherwise it runs
// calibrate (one bulk session's stream rate, bytes/s through an
// unlimited link), says what it measured on p, and returns the capacity
// pickCapacity chooses from it, at most max, with the rate in MB/s
// (mbps is 0 when planned was used).
func linkCapacity(planned, max int64, calibrate func() (float64, error), p *printer) (capacity int64, mbps float64, err error) {
	if planned > 0 {
		return planned, 0, nil
	}
	rate, err := calibrate()
	if err != nil {
		return 0, 0, err
	}
	capacity = pickCapacity(rate, max)
	p.step("calibration: one bulk session streams %.0f MB/s through an unlimited link; link capacity %s", rate/1e6, units.FormatRate(capacity))
	return capacity, rate / 1e6, nil
}

func pickCapacity(rate float64, max int64) int64 {
	for _, c := range []int64{100e6, 50e6, 20e6, 10e6, 5e6, 2e6, 1e6} {
		if c <= max && float64(c) <= rate/headroom {
			return c
		}
	}
	return 1e6
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
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", nil, "", fmt.Errorf("random: %w", err)
	}
	password = hex.EncodeToString(b)
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

// calibrate streams the bulk statement on one session through the
// unlimited link and returns the best rate it reached, in bytes/s (see
// streamRate).
func (r *flowRun) calibrate(ctx context.Context) (float64, error) {
	return streamRate(ctx, r.s, r.db, r.route, r.clk, r.p)
}

// streamRate streams the bulk statement on one session to route with the
// default link's capacity removed and returns the best rate it reached
// over three 0.5 s windows after 0.5 s of warm-up, in bytes/s. It leaves
// the capacity removed.
func streamRate(ctx context.Context, s *sluice, db *database, route string, clk clock.Clock, p *printer) (float64, error) {
	p.step("calibration: streaming the bulk statement on one session through an unlimited link")
	if err := s.setCapacity(ctx, 0); err != nil {
		return 0, err
	}
	c, err := db.connect(ctx, route, "", "")
	if err != nil {
		return 0, err
	}
	defer c.close()
	bctx, cancel := context.WithCancel(ctx)
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		for {
			if err := c.bulk(bctx, &n); err != nil {
				done <- err
				return
			}
		}
	}()
	// The best of a few short windows after a warm-up: what the machine
	// can stream, not what a neighbour's burst of work left of it.
	const warm, window, windows = 500 * time.Millisecond, 500 * time.Millisecond, 3
	var rate float64
	err = clock.Sleep(ctx, clk, warm)
	for i := 0; i < windows && err == nil; i++ {
		n0, t0 := n.Load(), clk.Now()
		err = clock.Sleep(ctx, clk, window)
		if secs := clk.Now().Sub(t0).Seconds(); secs > 0 {
			rate = max(rate, float64(n.Load()-n0)/secs)
		}
	}
	cancel()
	berr := <-done
	if err != nil {
		return 0, err
	}
	if rate == 0 {
		return 0, fmt.Errorf("calibration: the bulk statement streamed nothing (%v)", berr)
	}
	return rate, nil
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

	bctx, stop := context.WithCancel(ctx)
	var bulkBytes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := r.db.connect(bctx, r.acc.addr, r.acc.user, r.acc.password)
			if err != nil {
				if bctx.Err() == nil {
					errs <- fmt.Errorf("bulk session: %w", err)
				}
				return
			}
			defer c.close()
			for bctx.Err() == nil {
				if err := c.bulk(bctx, &bulkBytes); err != nil && bctx.Err() == nil {
					errs <- fmt.Errorf("bulk session: %w", err)
					return
				}
			}
		}()
	}
	stopBulk := stopOnce(stop, &wg, func() { r.drain(ctx) })
	defer stopBulk()

	if n > 0 {
		r.p.step("network_control %s, N=%d: started %s; waiting until their statements are penalised", control, n, plural(n, "bulk session"))
		t0 := r.clk.Now()
		if err := r.waitPenalised(ctx, n, errs, true); err != nil {
			return row, 0, err
		}
		row.PenaltySeconds = r.clk.Now().Sub(t0).Seconds()
		// Let the bytes queued before the penalty leave the FIFO.
		settle := max(100*time.Millisecond, 2*time.Duration(float64(link.DefaultQueueSize)/float64(r.capacity)*float64(time.Second)))
		if err := clock.Sleep(ctx, r.clk, settle); err != nil {
			return row, 0, err
		}
	}
	var times []float64
	var nb int64
	var done atomic.Int64 // len(times), for the progress goroutine
	prog := r.p.every(ctx, 2*time.Second, func() string {
		return fmt.Sprintf("network_control %s, N=%d: measured %d/%d", control, n, done.Load(), r.plan.Reps)
	})
	b0, m0 := bulkBytes.Load(), r.clk.Now()
	for i := 0; i < r.plan.Reps; i++ {
		if n > 0 {
			if err := r.waitPenalised(ctx, n, errs, false); err != nil {
				prog()
				return row, 0, err
			}
		}
		t0 := r.clk.Now()
		got, err := normal.normal(ctx)
		d := r.clk.Now().Sub(t0)
		if err != nil {
			prog()
			return row, 0, fmt.Errorf("normal query: %w", err)
		}
		nb = got
		times = append(times, durMs(d))
		done.Add(1)
	}
	prog()
	if secs := r.clk.Now().Sub(m0).Seconds(); secs > 0 {
		row.BulkMBps = float64(bulkBytes.Load()-b0) / 1e6 / secs
	}
	stopBulk()
	row.ElapsedMs, row.MeanMs, row.MinMs, row.MaxMs = summarize(times)
	row.SamplesMs = times
	return row, nb, nil
}

// waitPenalised waits until n running bulk statements are penalised,
// printing progress when verbose. After PenaltyTimeout it prints a warning
// and lets the measurement go on (the report then shows what the
// unpenalised statements did); it fails when a bulk session reports an
// error.
func (r *flowRun) waitPenalised(ctx context.Context, n int, errs <-chan error, verbose bool) error {
	deadline := r.clk.Now().Add(r.plan.PenaltyTimeout)
	next := r.clk.Now().Add(time.Second)
	for {
		running, pen := r.bulkStatements()
		if pen >= n {
			return nil
		}
		select {
		case err := <-errs:
			return err
		default:
		}
		now := r.clk.Now()
		if now.After(deadline) {
			r.p.step("  warning: only %d of %d bulk statements penalised after %s (%d running); measuring anyway", pen, n, r.plan.PenaltyTimeout, running)
			return nil
		}
		if verbose && now.After(next) {
			r.p.step("  %d/%d bulk statements running, %d penalised", running, n, pen)
			next = now.Add(time.Second)
		}
		if err := clock.Sleep(ctx, r.clk, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// bulkStatements counts the bulk sessions' running statements and how
// many of them are penalised.
func (r *flowRun) bulkStatements() (running, penalised int) {
	for _, st := range r.s.reg.Active() {
		snap := st.Snapshot()
		if r.acc.isBulk(&snap) {
			running++
			if snap.Penalized {
				penalised++
			}
		}
	}
	return running, penalised
}

// drain waits, for up to 10 s, until no bulk statement runs and the
// link's queues are empty, so the next point starts on an idle link.
func (r *flowRun) drain(ctx context.Context) {
	waitIdle(ctx, r.clk, func() bool {
		running, _ := r.bulkStatements()
		return running == 0 && r.s.queuedBytes() == 0
	})
}

// summarize returns the median, mean, minimum and maximum of v.
func summarize(v []float64) (median, mean, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		median = s[len(s)/2]
	} else {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	return median, sum / float64(len(s)), s[0], s[len(s)-1]
}

// fmtNum writes v with up to three decimals and no trailing zeros.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := fmt.Sprintf("%.3f", v)
	for len(s) > 1 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

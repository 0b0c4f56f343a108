package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
)

// highRun is what one high-priority join did on the shard connections.
type highRun struct {
	bytes      int64  // bytes the data nodes sent for it
	statements int    // statements it ran on them
	kinds      string // those statements counted by first word
}

// point measures the high-priority join under n low-priority joins and
// returns the row and what the last high-priority join did on the shard
// connections (its statements are counted at N = 0 only).
func (r *clusterRun) point(ctx context.Context, control string, n int) (row ClusterRow, one highRun, err error) {
	row = ClusterRow{Control: control, N: n}
	high, err := r.connect(ctx, clusterHighUser)
	if err != nil {
		return row, one, err
	}
	defer high.Close(context.WithoutCancel(ctx))
	// Warm up: the coordinator backend opens its shard connections.
	if _, err := count(ctx, high, clusterHighSQL); err != nil {
		return row, one, fmt.Errorf("high-priority join: %w", err)
	}

	var jobs []*lowJob
	c0, f0 := r.watch.snapshot(), r.s.rules.Stats().RuleFirings(clusterRule)
	defer func() {
		if serr := r.stopLow(ctx, jobs); serr != nil && err == nil {
			err = serr
		}
		r.drain(ctx)
		d := r.watch.snapshot().minus(c0)
		row.Distributed, row.LowJoins, row.LowPenalised, row.LowFirings, row.LowAllNodes = d.Distributed, d.LowJoins, d.LowPenalised, d.LowFirings, d.LowAllNodes
		row.ShardStatements, row.ShardPenalised = d.Shard, d.ShardPenalised
		row.RuleFirings = int(r.s.rules.Stats().RuleFirings(clusterRule) - f0)
	}()
	for i := 0; i < n; i++ {
		j, err := r.startLow(ctx, i)
		if err != nil {
			return row, one, err
		}
		jobs = append(jobs, j)
	}
	w := r.penaltyWait(jobs)
	if n > 0 {
		r.p.step("network_control %s, N=%d: started %s; waiting until each is penalised", control, n, plural(n, "low-priority join"))
		if row.PenaltySeconds, err = w.penalise(ctx, n, r.capacity); err != nil {
			return row, one, err
		}
	}

	var samples, unpen int
	var measured time.Duration
	var lowBytes, highBytes, highClass int64
	times, err := measureReps(ctx, r.p, fmt.Sprintf("network_control %s, N=%d", control, n), r.plan.Reps,
		w.before(ctx, n), nil,
		func() (time.Duration, error) {
			// Sample the low-priority joins while the high-priority one runs.
			sctx, stopSampling := context.WithCancel(ctx)
			sampled := make(chan [2]int, 1)
			go func() {
				var s, u int
				for {
					if running, pen := r.lowJoins(); running > pen {
						u++
					}
					s++
					if clock.Sleep(sctx, r.clk, 20*time.Millisecond) != nil {
						sampled <- [2]int{s, u}
						return
					}
				}
			}()
			b0, l0, h0, t0 := r.shardUserBytes(clusterHighShardUser), r.shardUserBytes(clusterLowShardUser), r.shardClassBytes(link.High), r.clk.Now()
			got, err := count(ctx, high, clusterHighSQL)
			d := r.clk.Now().Sub(t0)
			stopSampling()
			su := <-sampled
			if err != nil {
				return 0, fmt.Errorf("high-priority join: %w", err)
			}
			if got != int64(r.plan.HighRows) {
				return 0, fmt.Errorf("high-priority join counted %d rows, want %d", got, r.plan.HighRows)
			}
			one.bytes = r.shardUserBytes(clusterHighShardUser) - b0
			highBytes += one.bytes
			highClass += r.shardClassBytes(link.High) - h0
			if n == 0 {
				one.statements, one.kinds = r.highStatements(t0)
			}
			lowBytes += r.shardUserBytes(clusterLowShardUser) - l0
			measured += d
			samples += su[0]
			unpen += su[1]
			return d, nil
		})
	if err != nil {
		return row, one, err
	}
	if n > 0 && measured > 0 {
		row.LowMBps = float64(lowBytes) / 1e6 / measured.Seconds()
	}
	if highBytes > 0 {
		row.HighClassShare = float64(highClass) / float64(highBytes)
	}
	if n > 0 && samples > 0 {
		row.Unpenalised = float64(unpen) / float64(samples)
	}
	row.PointTimes, row.SamplesMs = pointTimes(times), times
	return row, one, nil
}

// penaltyWait waits until every job's low-priority join runs and is
// penalised (the rule fired on the distributed statement); it fails
// when a low-priority job fails.
func (r *clusterRun) penaltyWait(jobs []*lowJob) *penaltyWait {
	return &penaltyWait{clk: r.clk, p: r.p, timeout: r.plan.PenaltyTimeout, period: 2 * time.Second, noun: "low-priority joins",
		state: func() (int, int, error) {
			for _, j := range jobs {
				if err := j.failed(); err != nil {
					return 0, 0, err
				}
			}
			running, pen := r.lowJoins()
			return running, pen, nil
		},
		done: func(n, running, pen int) bool { return running == n && pen == running }}
}

// lowJob is one client session running the low-priority join in a loop.
type lowJob struct {
	c *pgconn.PgConn
	// cancel ends the loop's context: stopLow's last resort.
	cancel  context.CancelFunc
	stopped atomic.Bool
	done    chan struct{}
	err     error // set before done is closed
}

// startLow connects a low-priority session and starts its loop. i
// numbers it in errors.
func (r *clusterRun) startLow(ctx context.Context, i int) (*lowJob, error) {
	c, err := r.connect(ctx, clusterLowUser)
	if err != nil {
		return nil, err
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &lowJob{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		ctx := jctx
		for !j.stopped.Load() {
			n, err := count(ctx, c, clusterLowSQL)
			switch {
			case err != nil && j.stopped.Load():
				return
			case err != nil:
				j.err = fmt.Errorf("low-priority join %d: %w", i, err)
				return
			case n != int64(r.plan.LowRows):
				j.err = fmt.Errorf("low-priority join %d counted %d rows, want %d", i, n, r.plan.LowRows)
				return
			}
		}
	}()
	return j, nil
}

// failed returns the job's error once it has ended on one, else nil.
func (j *lowJob) failed() error {
	select {
	case <-j.done:
		return j.err
	default:
		return nil
	}
}

// stopLow ends the jobs. A data node's backend that is sending a
// partition into the congested link acts on a cancel only once its
// answer is sent, which can take a minute, so stopLow terminates the
// low-priority user's backends on the data nodes (the coordinator's
// statements then fail at once) and cancels the coordinator's
// statements, again every 250 ms until every loop has ended, for up to
// 30 s, then ends the loops' contexts. It closes the sessions and
// returns the first error a job met before it was stopped.
func (r *clusterRun) stopLow(ctx context.Context, jobs []*lowJob) error {
	if len(jobs) == 0 {
		return nil
	}
	for _, j := range jobs {
		j.stopped.Store(true)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	kill := fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '%s'", clusterLowShardUser)
	for {
		pending := 0
		for _, j := range jobs {
			select {
			case <-j.done:
			default:
				pending++
			}
		}
		if pending == 0 || cctx.Err() != nil {
			break
		}
		for _, n := range r.nodes[1:] {
			if err := adminExec(cctx, n, kill); err != nil {
				r.log.Warn("terminate low-priority shard backends", "err", err)
			}
		}
		for _, j := range jobs {
			select {
			case <-j.done:
			default:
				j.c.CancelRequest(cctx)
			}
		}
		if clock.Sleep(cctx, r.clk, 250*time.Millisecond) != nil {
			break
		}
	}
	var first error
	for _, j := range jobs {
		j.cancel()
		<-j.done
		j.c.Close(context.WithoutCancel(ctx))
		if j.err != nil && first == nil {
			first = j.err
		}
	}
	return first
}

// lowJoins counts the low-priority joins running on the coordinator
// (their client statements, each a distributed statement) and how many
// of them are penalised.
func (r *clusterRun) lowJoins() (running, penalised int) {
	return r.s.statements(func(s *session.Snapshot) bool { return s.User == clusterLowUser && s.Route == clusterCoord })
}

// lowShardRunning reports whether a statement of the low-priority shard
// role runs on a shard route.
func (r *clusterRun) lowShardRunning() bool {
	for _, st := range r.s.reg.Active() {
		if s := st.Session; r.shards[s.Info.Route] && s.User() == clusterLowShardUser {
			return true
		}
	}
	return false
}

// drain waits, for up to 10 s, until no low-priority join and none of
// its shard statements runs and the shard link's queues are empty.
func (r *clusterRun) drain(ctx context.Context) {
	waitIdle(ctx, r.clk, func() bool {
		if running, _ := r.lowJoins(); running > 0 || r.lowShardRunning() {
			return false
		}
		l := r.s.links.Link(clusterLink)
		if l == nil {
			return true
		}
		st := l.Stats()
		return st.Directions[link.Down].QueueBytes()+st.Directions[link.Up].QueueBytes() == 0
	})
}

// highStatements counts the high-priority join's statements on the shard
// connections that began at or after since, and them by first word.
func (r *clusterRun) highStatements(since time.Time) (n int, kinds string) {
	by := map[string]int{}
	var order []string
	for _, st := range r.s.reg.Recent() {
		snap := st.Snapshot()
		if snap.User != clusterHighShardUser || !r.shards[snap.Route] || snap.Started.Before(since) {
			continue
		}
		n++
		w, _, _ := strings.Cut(strings.TrimSpace(snap.SQL), " ")
		w = strings.ToUpper(w)
		if by[w] == 0 {
			order = append(order, w)
		}
		by[w]++
	}
	parts := make([]string, len(order))
	for i, w := range order {
		parts[i] = fmt.Sprintf("%d %s", by[w], w)
	}
	return n, strings.Join(parts, ", ")
}

// shardBytes returns the bytes the data nodes sent through the shard
// link so far.
func (r *clusterRun) shardBytes() int64 {
	l := r.s.links.Link(clusterLink)
	if l == nil {
		return 0
	}
	var n int64
	for _, c := range l.Stats().Directions[link.Down].Classes {
		n += c.Bytes
	}
	return n
}

// shardClassBytes returns the bytes the data nodes sent through the
// shard link so far in class c.
func (r *clusterRun) shardClassBytes(c link.Class) int64 {
	l := r.s.links.Link(clusterLink)
	if l == nil {
		return 0
	}
	return l.Stats().Directions[link.Down].Classes[c].Bytes
}

// shardUserBytes returns the bytes the data nodes sent so far to the
// open shard sessions of the shard role user. A shard session's pool is
// its own (the same for both roles), its class its coordinator's, so the
// sessions' counters tell the two jobs apart where the link's cannot.
func (r *clusterRun) shardUserBytes(user string) int64 {
	var n int64
	for _, s := range r.s.reg.Sessions() {
		if r.shards[s.Info.Route] && s.User() == user {
			n += s.BytesDown()
		}
	}
	return n
}

// measureOnce runs q once as user and returns the bytes the data nodes
// sent for it and the count it returned.
func (r *clusterRun) measureOnce(ctx context.Context, user, q string) (bytes, n int64, err error) {
	c, err := r.connect(ctx, user)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	b0 := r.shardBytes()
	n, err = count(ctx, c, q)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", q, err)
	}
	if r.app == "" {
		// The coordinator backend keeps its shard connections while
		// its client's session lasts.
		r.app = r.shardApplication()
	}
	return r.shardBytes() - b0, n, nil
}

// shardApplication returns the application_name of an open shard
// session, "" if there is none.
func (r *clusterRun) shardApplication() string {
	for _, s := range r.s.reg.Sessions() {
		if r.shards[s.Info.Route] {
			return s.Application()
		}
	}
	return ""
}

// calibrate runs the low-priority join in a loop on one session through
// the unlimited shard link and returns the best rate the data nodes sent
// at, in bytes/s (see bestRate).
func (r *clusterRun) calibrate(ctx context.Context) (float64, error) {
	r.p.step("calibration: one low-priority join in a loop through an unlimited shard link")
	j, err := r.startLow(ctx, 0)
	if err != nil {
		return 0, err
	}
	rate, err := bestRate(ctx, r.clk, r.shardBytes)
	jerr := r.stopLow(ctx, []*lowJob{j})
	r.drain(ctx)
	if err != nil {
		return 0, err
	}
	if jerr != nil {
		return 0, jerr
	}
	if rate == 0 {
		return 0, errors.New("calibration: the low-priority join moved nothing")
	}
	return rate, nil
}

package wlm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
)

// Evaluator timing.
const (
	// SampleInterval is how often the evaluator samples the bytes of every
	// running statement.
	SampleInterval = time.Second
	// BandwidthWindow is the span a statement's bandwidth is averaged
	// over.
	BandwidthWindow = 5 * time.Second
	// MinBandwidthAge is the age below which a statement has no bandwidth
	// yet: a bandwidth threshold is not reached before it.
	MinBandwidthAge = time.Second
	// CancelTimeout bounds one cancel request of an abort rule.
	CancelTimeout = 5 * time.Second
	// MaxConcurrentCancels bounds the cancel requests one pass has in
	// flight: the aborts of a pass are cancelled concurrently, so a pass
	// with n aborts takes about ceil(n/MaxConcurrentCancels) ×
	// CancelTimeout at worst, not n × CancelTimeout.
	MaxConcurrentCancels = 64
)

// errCancelTimeout is the cause of a cancel request that ran out of
// CancelTimeout.
var errCancelTimeout = errors.New("cancel request timed out")

// FiringKey identifies a counter of rule firings.
type FiringKey struct {
	Rule   string
	Action Action
}

// Stats are the evaluator's counters since the manager was made.
type Stats struct {
	// Checks counts evaluations of one rule for one statement.
	Checks uint64
	// Firings counts rule firings by rule and action.
	Firings map[FiringKey]uint64
	// CancelFailures counts abort firings whose cancel request failed.
	CancelFailures uint64
	// IdleInTransactionEnded counts, by pool, the sessions ended for
	// sitting idle in a transaction, holding a slot, past the pool's
	// idle_in_transaction.
	IdleInTransactionEnded map[string]uint64
}

// RuleFirings returns how many times rule fired, whatever the action.
func (s Stats) RuleFirings(rule string) uint64 {
	return s.Firings[FiringKey{rule, Abort}] + s.Firings[FiringKey{rule, Penalty}]
}

// policy is one immutable generation of what the evaluator reads of the
// workload manager: the catalog the rules come from and the pool a
// session is in. The Manager's state is one.
type policy interface {
	catalog() *Catalog
	// sessionPool returns the pool of a session of user on route: the
	// user's binding, else the route's default pool ("" for none).
	sessionPool(route, user string) string
}

// evaluator applies exception rules to the running statements of a
// registry. The Manager makes one and hands it the current policy as a
// func, read once per pass; the evaluator never sees the Manager.
//
// Lock order: mu before session.Session.mu and session.Statement.mu (a
// pass reads sessions and statements under it). The registry's lock is
// never taken under mu (Registry.Active is read before it), mu is never
// held with the Manager's own lock, and no lock is held across a cancel
// request. An evaluator is safe for concurrent use.
type evaluator struct {
	clk     clock.Clock
	log     *slog.Logger
	reg     *session.Registry
	policy  func() policy // the current generation; called once per pass
	running atomic.Bool   // run is active

	// mu guards the evaluator's memory of the statements it watches and
	// its counters.
	mu      sync.Mutex
	tracked map[*session.Statement]*tracked // guarded by mu
	checks  uint64                          // guarded by mu; rule evaluations
	firings map[FiringKey]uint64            // guarded by mu
	cancelF uint64                          // guarded by mu; failed cancels
	idleEnd map[string]uint64               // guarded by mu; sessions ended for idle_in_transaction, by pool

	// audit, when set (before run), records the sessions ended for
	// idle_in_transaction. It has its own lock, taken with none held.
	audit *AuditLog
	// history, when set (before run), records every firing (the
	// firings view). It has its own lock, taken with none held.
	history *FiringLog
}

// newEvaluator returns an evaluator of the statements of reg, timed by
// clk, logging to log, that reads its rules from policy.
func newEvaluator(clk clock.Clock, log *slog.Logger, reg *session.Registry, policy func() policy) *evaluator {
	return &evaluator{
		clk: clk, log: log, reg: reg, policy: policy,
		tracked: make(map[*session.Statement]*tracked),
		firings: make(map[FiringKey]uint64),
		idleEnd: make(map[string]uint64),
	}
}

// stats returns a copy of the evaluator's counters.
func (e *evaluator) stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Stats{Checks: e.checks, CancelFailures: e.cancelF, Firings: make(map[FiringKey]uint64, len(e.firings)),
		IdleInTransactionEnded: make(map[string]uint64, len(e.idleEnd))}
	for k, v := range e.firings {
		s.Firings[k] = v
	}
	for k, v := range e.idleEnd {
		s.IdleInTransactionEnded[k] = v
	}
	return s
}

// sample is a statement's byte count (both directions) at a time.
type sample struct {
	t     time.Time
	bytes int64
}

// tracked is the evaluator's memory of one running statement.
type tracked struct {
	st      *session.Statement
	samples []sample             // oldest first; never older than needed
	checked map[string]time.Time // rule -> time of its last check
	fired   map[string]bool      // rules that fired for this statement
	seen    bool                 // present in the current pass
}

// add records a sample at now and drops samples no longer needed for a
// window ending at now or later.
func (t *tracked) add(now time.Time, bytes int64) {
	if n := len(t.samples); n > 0 && !now.After(t.samples[n-1].t) {
		return
	}
	t.samples = append(t.samples, sample{now, bytes})
	from := now.Add(-BandwidthWindow)
	// Keep the newest sample at or before from, and everything after.
	i := 0
	for i+1 < len(t.samples) && !t.samples[i+1].t.After(from) {
		i++
	}
	if i > 0 {
		t.samples = append(t.samples[:0], t.samples[i:]...)
	}
}

// bandwidth returns the statement's bytes per second over the window
// ending at now, given its byte count at now: the count at the window's
// start is interpolated between samples (the statement had 0 bytes when
// it started; samples at or after now are ignored). A statement younger
// than the window is averaged since its start; one younger than
// MinBandwidthAge has no bandwidth yet (ok false).
func bandwidth(started time.Time, samples []sample, now time.Time, bytes int64) (bps float64, ok bool) {
	age := now.Sub(started)
	if age < MinBandwidthAge {
		return 0, false
	}
	from := now.Add(-BandwidthWindow)
	if !from.After(started) {
		return float64(bytes) / age.Seconds(), true
	}
	prev := sample{started, 0}
	for i := 0; i <= len(samples); i++ {
		p := sample{now, bytes}
		if i < len(samples) {
			p = samples[i]
			if p.t.Before(prev.t) || !p.t.Before(now) {
				continue
			}
		}
		if p.t.Before(from) {
			prev = p
			continue
		}
		// prev.t < from <= p.t
		frac := float64(from.Sub(prev.t)) / float64(p.t.Sub(prev.t))
		base := prev.bytes + int64(frac*float64(p.bytes-prev.bytes))
		return float64(bytes-base) / BandwidthWindow.Seconds(), true
	}
	return float64(bytes-prev.bytes) / BandwidthWindow.Seconds(), true
}

// firing is one rule that fired for a statement in one pass.
type firing struct {
	st     *session.Statement
	rule   string
	action Action
	pool   string
	info   string
	bw     float64 // MB/s
	age    time.Duration
	bytes  int64         // the statement's bytes (up and down, with its shards') then
	held   bool          // the statement waits for admission: a blocktime rule
	block  time.Duration // its block time then
}

// run evaluates exception rules until ctx ends, then returns ctx.Err().
// Every SampleInterval it samples the bytes of every running statement;
// a statement's rules are checked when due (see the package
// documentation), waking up at the exact due time when that comes before
// the next sample. Only one run may be active at a time.
func (e *evaluator) run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("wlm: Run is already active")
	}
	defer e.running.Store(false)
	for {
		now := e.clk.Now()
		due := e.evaluate(ctx, now)
		wait := SampleInterval
		if !due.IsZero() {
			if d := due.Sub(now); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		t := e.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// evaluate runs one pass at now: it samples every running statement
// and checks the rules that are due, applying the actions of those that
// fire. It returns the earliest time a rule will be due next (zero if
// none).
func (e *evaluator) evaluate(ctx context.Context, now time.Time) (nextDue time.Time) {
	pol := e.policy()
	cat := pol.catalog()
	active := e.reg.Active()
	period := cat.Settings.ExceptCheckPeriod
	var fired []firing

	e.mu.Lock()
	for _, t := range e.tracked {
		t.seen = false
	}
	for _, s := range active {
		t := e.tracked[s]
		if t == nil {
			t = &tracked{st: s, checked: map[string]time.Time{}, fired: map[string]bool{}}
			e.tracked[s] = t
		}
		t.seen = true
		// A distributed statement is measured on its total: its own
		// bytes and every shard statement's under it.
		bytes := s.TotalBytes()
		t.add(now, bytes)

		sess := s.Session
		pool := pol.sessionPool(sess.Info.Route, sess.User())
		if sess.Pool() != pool {
			sess.SetPool(pool)
		}
		p := cat.Pools[pool]
		if p == nil {
			continue
		}
		// A held statement is checked against the blocktime rules, from
		// when it was held; a running one against the others, from when
		// it was admitted (elapsed time is execution time).
		held, waiting := s.HeldAt()
		start := held
		var age, block time.Duration
		var mbps float64
		var bwOK bool
		if waiting {
			block = now.Sub(held)
		} else {
			start = s.ExecStarted()
			if start.IsZero() {
				continue // its wait failed: it never runs, and ends soon
			}
			age = now.Sub(start)
			var bps float64
			bps, bwOK = bandwidth(start, t.samples, now, bytes)
			mbps = bps / 1e6
		}
		for _, name := range p.ExceptRules {
			rule := cat.Rules[name]
			if rule == nil || t.fired[name] || rule.Queued() != waiting {
				continue
			}
			due := dueAt(rule, start, t.checked[name], period)
			if now.Before(due) {
				if nextDue.IsZero() || due.Before(nextDue) {
					nextDue = due
				}
				continue
			}
			t.checked[name] = now
			e.checks++
			if next := now.Add(period); nextDue.IsZero() || next.Before(nextDue) {
				nextDue = next
			}
			info, ok := ruleFires(name, rule, mbps, bwOK, age)
			if waiting {
				info, ok = blockFires(name, rule, block)
			}
			if !ok {
				continue
			}
			fired = append(fired, firing{st: s, rule: name, action: rule.Action, pool: pool, info: info, bw: mbps, age: age, bytes: bytes, held: waiting, block: block})
		}
	}
	for s, t := range e.tracked {
		if !t.seen {
			delete(e.tracked, s)
		}
	}
	// An abort supersedes a penalty of the same statement in one pass.
	aborted := map[*session.Statement]bool{}
	for _, f := range fired {
		if f.action == Abort {
			aborted[f.st] = true
		}
	}
	var apply []firing
	for _, f := range fired {
		if f.action == Penalty && aborted[f.st] {
			continue
		}
		e.tracked[f.st].fired[f.rule] = true
		e.firings[FiringKey{f.rule, f.action}]++
		apply = append(apply, f)
	}
	e.mu.Unlock()

	sort.SliceStable(apply, func(i, j int) bool { return apply[i].st.ID < apply[j].st.ID })
	var wg sync.WaitGroup
	slots := make(chan struct{}, MaxConcurrentCancels)
	// outcomes[i] is what apply[i] did; a cancel's goroutine writes only
	// its own, read after wg.Wait.
	outcomes := make([]string, len(apply))
	for i, f := range apply {
		var cancel bool
		if outcomes[i], cancel = e.act(f); !cancel {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			outcomes[i] = e.cancel(ctx, f)
		})
	}
	wg.Wait()
	// The firings go to the history once their outcomes are known (a
	// cancel is bounded by CancelTimeout), in statement order, with no
	// lock of the evaluator's held.
	if e.history != nil {
		for i, f := range apply {
			e.history.Record(f.entry(now, outcomes[i]))
		}
	}
	if due := e.endIdle(cat, now); !due.IsZero() && (nextDue.IsZero() || due.Before(nextDue)) {
		nextDue = due
	}
	return nextDue
}

// endIdle ends every session that has sat idle inside a transaction,
// holding a slot of its pool, for the pool's idle_in_transaction or
// longer (session.Session.TerminateIdle: the client reads its protocol's
// error, the server connection closes, the slot goes back), logs and
// audits each, and returns when the next such bound falls due (zero if
// none). It takes no lock of the evaluator's but to count.
func (e *evaluator) endIdle(cat *Catalog, now time.Time) (next time.Time) {
	bounded := false
	for _, p := range cat.Pools {
		bounded = bounded || p.IdleInTransaction > 0
	}
	if !bounded {
		return next // no pool bounds it: no session to look at
	}
	for _, s := range e.reg.Sessions() {
		sl := s.Slot()
		idle, ok := sl.IdleInTransaction(now)
		if !ok {
			continue
		}
		p := cat.Pools[sl.Pool]
		if p == nil || p.IdleInTransaction <= 0 {
			continue
		}
		if idle < p.IdleInTransaction {
			if due := sl.IdleSince.Add(p.IdleInTransaction); next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		if !s.TerminateIdle(sl.IdleSince) {
			continue // it sent a request, or ended, meanwhile
		}
		e.mu.Lock()
		e.idleEnd[sl.Pool]++
		e.mu.Unlock()
		what := fmt.Sprintf("TERMINATE SESSION %d: idle in transaction for %s holding a slot of resource pool %s (idle_in_transaction %s)",
			s.ID, idle.Round(time.Millisecond), sl.Pool, p.IdleInTransaction)
		e.log.Warn("session ended: idle in transaction past the pool's idle_in_transaction",
			"session", s.ID, "user", s.User(), "pool", sl.Pool, "idle", idle, "idle_in_transaction", p.IdleInTransaction)
		if e.audit != nil {
			e.audit.Record(now, Actor{Surface: SurfaceWLM}, what, nil)
		}
	}
	return next
}

// dueAt returns when rule is next due for a statement that started at
// started (was admitted, or for a blocktime rule was held) and whose last
// check of this rule was at last (zero if never): first once the
// statement has run ElapsedTime (one period after it started if
// ElapsedTime is Unlimited), or for a blocktime rule has waited
// BlockTime, then every period.
func dueAt(rule *Rule, started, last time.Time, period time.Duration) time.Time {
	if !last.IsZero() {
		return last.Add(period)
	}
	if rule.Queued() {
		return started.Add(time.Duration(rule.BlockTime * float64(time.Second)))
	}
	if rule.ElapsedTime == Unlimited {
		return started.Add(period)
	}
	return started.Add(time.Duration(rule.ElapsedTime * float64(time.Second)))
}

// ruleFires evaluates rule: every threshold that is not Unlimited must be
// reached (AND). It returns the except_info text when the rule fires.
func ruleFires(name string, rule *Rule, mbps float64, bwOK bool, age time.Duration) (string, bool) {
	var why string
	if rule.Bandwidth != Unlimited {
		if !bwOK || !(mbps > rule.Bandwidth) {
			return "", false
		}
		why = fmt.Sprintf("bandwidth %sMB/s > %sMB/s", trim2(mbps), catalog.FormatFloat(rule.Bandwidth))
	}
	if rule.ElapsedTime != Unlimited {
		if age.Seconds() < rule.ElapsedTime {
			return "", false
		}
		if why != "" {
			why += ", "
		}
		why += fmt.Sprintf("elapsed %ss >= %ss", catalog.FormatFloat(math.Round(age.Seconds()*1000)/1000), catalog.FormatFloat(rule.ElapsedTime))
	}
	return fmt.Sprintf("except rule %s (%s): %s", name, rule.Action, why), true
}

// blockFires evaluates a blocktime rule for a statement held for block.
func blockFires(name string, rule *Rule, block time.Duration) (string, bool) {
	if block.Seconds() < rule.BlockTime {
		return "", false
	}
	return fmt.Sprintf("except rule %s (%s): blocktime %ss >= %ss", name, rule.Action,
		catalog.FormatFloat(math.Round(block.Seconds()*1000)/1000), catalog.FormatFloat(rule.BlockTime)), true
}

func trim2(f float64) string { return fmt.Sprintf("%.2f", f) }

// act applies a firing: logs it, records it in the statement's
// except_info, and penalises the statement. It reports whether the
// firing is an abort, whose cancel request is then up to the caller, and
// otherwise the firing's outcome for the firing history (one of the
// Outcome constants).
//
// A blocktime firing acts on the wait: a penalty demotes it (Penalize
// makes the waiter low class), an abort cancels it here, with the
// *AdmitError naming the rule that Admission.Admit returns; no cancel
// request is sent, since the server never saw the statement.
func (e *evaluator) act(f firing) (outcome string, cancel bool) {
	e.log.Info("exception rule fired", f.attrs()...)
	if f.action == Penalty {
		if !f.st.Penalize(f.info) {
			f.st.NoteException(f.info)
			return OutcomeNotPenalized, false
		}
		return OutcomePenalized, false
	}
	f.st.NoteException(f.info)
	if f.held {
		if !f.st.CancelWait(blockAbort(f.rule, f.block)) {
			f.st.NoteException("admitted before the abort could end its wait")
			return OutcomeAdmitted, false
		}
		return OutcomeWaitEnded, false
	}
	return "", true
}

// cancel sends the cancel request of an abort firing, bounded by
// CancelTimeout on the evaluator's clock; a failure is counted, logged and
// noted in the statement's except_info. It returns the firing's outcome
// for the firing history. It is safe to run concurrently.
func (e *evaluator) cancel(ctx context.Context, f firing) (outcome string) {
	cctx, stop := clock.WithTimeout(ctx, e.clk, CancelTimeout, errCancelTimeout)
	err := e.reg.Cancel(cctx, f.st)
	stop()
	switch {
	case err == nil:
		return OutcomeCancelled
	case errors.Is(err, session.ErrNotRunning):
		return OutcomeEnded
	}
	e.mu.Lock()
	e.cancelF++
	e.mu.Unlock()
	f.st.NoteException("cancel failed: " + err.Error())
	attrs := append(f.attrs(), "route", f.st.Session.Info.Route, "err", err)
	if errors.Is(err, session.ErrNoCanceler) {
		// Said where the abort needs it: the binding was accepted, since
		// the user need not have come through this route.
		attrs = append(attrs, "hint", "give the route kill_user and kill_password, or use action 'penalty'")
	}
	e.log.Warn("exception rule could not cancel the statement", attrs...)
	return OutcomeCancelFailed + ": " + err.Error()
}

// entry is the firing as the firing history keeps it, at now, with its
// outcome. The statement's text is st.SQL, its password literals masked
// by Begin (package redact), as every view shows it.
func (f firing) entry(now time.Time, outcome string) Firing {
	sess := f.st.Session
	return Firing{Time: now, Rule: f.rule, Action: string(f.action), Statement: f.st.ID, Session: sess.ID,
		User: sess.User(), Pool: f.pool, Route: sess.Info.Route, Query: f.st.SQL,
		Bandwidth: f.bw, Elapsed: f.age, BlockTime: f.block, Bytes: f.bytes, Info: f.info, Outcome: outcome}
}

// attrs are the log attributes of a firing.
func (f firing) attrs() []any {
	sess := f.st.Session
	return []any{
		"rule", f.rule, "action", string(f.action), "statement", f.st.ID,
		"session", sess.ID, "user", sess.User(), "pool", f.pool,
		"bandwidth_mbps", f.bw, "elapsed", f.age, "blocktime", f.block,
	}
}

// statementBandwidth returns a statement's bandwidth in bytes/s for
// display: over the window for a running statement the evaluator tracks,
// else the average since it started. A distributed statement's is of its
// total bytes, as its rules measure it.
func (e *evaluator) statementBandwidth(s *session.Statement, snap *session.Snapshot, now time.Time) float64 {
	bytes := snap.TotalUp + snap.TotalDown
	started := snap.ExecStarted()
	if started.IsZero() {
		return 0 // held: not running
	}
	if !snap.Ended.IsZero() {
		if d := snap.Ended.Sub(started); d > 0 {
			return float64(bytes) / d.Seconds()
		}
		return 0
	}
	e.mu.Lock()
	var samples []sample
	if t := e.tracked[s]; t != nil {
		samples = append(samples, t.samples...)
	}
	e.mu.Unlock()
	// Drop samples taken after now (the evaluator may run concurrently).
	for len(samples) > 0 && samples[len(samples)-1].t.After(now) {
		samples = samples[:len(samples)-1]
	}
	bps, _ := bandwidth(started, samples, now, bytes)
	return bps
}

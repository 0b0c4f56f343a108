package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/opt"
)

// Defaults of Options.
const (
	DefaultSampleInterval = 100 * time.Millisecond
	DefaultPeriod         = time.Second
	DefaultGrantTTL       = 5 * time.Second
	DefaultLeaseTTL       = 5 * time.Second
	// opTimeout bounds one etcd request, so an unreachable cluster is
	// noticed within it.
	opTimeout = 2 * time.Second
)

// Links is what the budget drives: the instance's runtime links and
// their Low-class caps (a *wlm.Runtime).
type Links interface {
	// LinkNames returns the links' names, sorted.
	LinkNames() []string
	// Link returns the runtime link name, or nil.
	Link(name string) *link.Link
	// SetLowPriorityCaps caps each link's Low class (bytes/s); nil
	// removes every cap.
	SetLowPriorityCaps(caps map[string]int64)
}

// Options configure New.
type Options struct {
	// Client is the etcd client; required. The Budget does not close it.
	Client *clientv3.Client
	// Key builds a key under the fleet's prefix (etcd.Config.Key);
	// required.
	Key func(parts ...string) string
	// Name is this instance's name in the fleet; required.
	Name string
	// Lease is the instance's lease (membership's): the demand key and
	// the election candidacy live under it, so they go when it expires.
	// 0 makes the Budget grant and keep alive a lease of its own, of
	// LeaseTTL, revoked by Run's end; so does a given lease that expired
	// (the Budget then goes on under a lease of its own).
	Lease clientv3.LeaseID
	// LeaseTTL is the TTL of the Budget's own lease; 0 means
	// DefaultLeaseTTL. Rounded up to whole seconds.
	LeaseTTL time.Duration
	// Links are the instance's links; required.
	Links Links
	// Budget returns cluster_low_priority_bandwidth (bytes/s, 0 off) as
	// the instance's catalog has it; required.
	Budget func() int64
	// SampleInterval is the pace of link readings and of cap updates; 0
	// means DefaultSampleInterval.
	SampleInterval time.Duration
	// Period is the pace of demand reports and of allocations; 0 means
	// DefaultPeriod.
	Period time.Duration
	// GrantTTL is how long a grant is valid after it is written; 0 means
	// DefaultGrantTTL.
	GrantTTL time.Duration
	// Clock is the time source; nil means clock.Real. Grants carry wall
	// times: the fleet's hosts are assumed to keep their clocks in sync
	// (NTP) well within GrantTTL.
	Clock clock.Clock
	// Logger receives transitions; nil discards them.
	Logger *slog.Logger
}

// Report is the value of an instance's demand key.
type Report struct {
	Demand
	// Rate is the rate (bytes/s) the instance's Low class runs at.
	Rate int64 `json:"rate"`
	// Mode is one of ModeOff, ModeWaiting, ModeGrant, ModeFallback.
	Mode string `json:"mode"`
	// Allocator is true on the elected allocator.
	Allocator bool `json:"allocator"`
}

// Peer is one instance as the last listing of demands showed it.
type Peer struct {
	Name string
	Report
}

// State is a snapshot of the Budget for views and metrics.
type State struct {
	Name   string
	Budget int64 // bytes/s; 0 off
	Report       // this instance, as of now
	Grant  Grant // the last grant received (Version 0: none)
	// Unreachable is when etcd stopped answering, zero while it answers.
	Unreachable time.Time
	// Live is how many instances reported a demand at the last listing.
	Live int
	// Peers is that listing (this instance included), by name.
	Peers []Peer
}

// Budget runs one instance's part of the shared low-priority budget:
// its demand, its grant and caps, and its candidacy as the allocator.
// Create it with New and call Run. State is safe for concurrent use.
type Budget struct {
	o   Options
	clk clock.Clock
	log *slog.Logger

	refused atomic.Uint64 // grants refused as garbage (Grant.Check)

	mu          sync.Mutex
	est         map[string]*[2]Estimator // guarded by mu; per link and direction
	caps        map[string]int64         // guarded by mu; as last applied
	grant       Grant                    // guarded by mu
	rate        int64                    // guarded by mu
	mode        string                   // guarded by mu; "" before the first sample
	want        int64                    // guarded by mu
	leader      bool                     // guarded by mu
	live        int                      // guarded by mu
	peers       []Peer                   // guarded by mu
	unreachable time.Time                // guarded by mu
	leaseID     clientv3.LeaseID         // guarded by mu; the session's lease, 0 before one
}

// Refused returns how many grants read from etcd were refused as
// garbage (Grant.Check) and not applied.
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// New checks o and returns a Budget; nothing runs before Run.
func New(o Options) (*Budget, error) {
	if o.Client == nil || o.Key == nil || o.Name == "" || o.Links == nil || o.Budget == nil {
		return nil, errors.New("budget: Client, Key, Name, Links and Budget are required")
	}
	if strings.Contains(o.Name, "/") {
		return nil, fmt.Errorf("budget: instance name %q contains a slash", o.Name)
	}
	o.SampleInterval = opt.Positive(o.SampleInterval, DefaultSampleInterval)
	o.Period = opt.Positive(o.Period, DefaultPeriod)
	o.GrantTTL = opt.Positive(o.GrantTTL, DefaultGrantTTL)
	o.LeaseTTL = opt.Positive(o.LeaseTTL, DefaultLeaseTTL)
	b := &Budget{o: o, clk: o.Clock, log: o.Logger, est: map[string]*[2]Estimator{}}
	if b.clk == nil {
		b.clk = clock.Real{}
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

func (b *Budget) demandKey(name string) string { return b.o.Key("budget", "demand", name) }
func (b *Budget) grantKey(name string) string  { return b.o.Key("budget", "grant", name) }
func (b *Budget) demandPrefix() string         { return b.o.Key("budget", "demand") + "/" }
func (b *Budget) grantPrefix() string          { return b.o.Key("budget", "grant") + "/" }
func (b *Budget) electionKey() string          { return b.o.Key("budget", "election") }

// Run runs until ctx ends and returns ctx's error. While etcd is
// unreachable it keeps the last grant until it expires, then falls back
// to an equal share (see the package documentation). The caps stay as
// they were when it ended: lifting them while the instance's sessions
// still run would let its Low class exceed its share.
func (b *Budget) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	run := func(fn func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(ctx)
		}()
	}
	run(b.sampleLoop)
	run(b.watchGrant)
	run(b.sessionLoop)
	wg.Wait()
	return ctx.Err()
}

// tick waits d on the clock or until ctx ends; false when ctx ended.
func (b *Budget) tick(ctx context.Context, d time.Duration) bool {
	t := b.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// sampleLoop reads the links, updates the estimates and applies the
// caps every SampleInterval.
func (b *Budget) sampleLoop(ctx context.Context) {
	for {
		b.sample()
		if !b.tick(ctx, b.o.SampleInterval) {
			return
		}
	}
}

// sample is one reading of the links, and the caps it leads to. The
// time is read under the lock, so readings reach the estimators in
// order whoever takes them.
func (b *Budget) sample() {
	budget := b.o.Budget()
	names := b.o.Links.LinkNames()
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clk.Now()
	wants := make([]int64, len(names))
	var total int64
	for i, name := range names {
		l := b.o.Links.Link(name)
		if l == nil {
			continue
		}
		st := l.Stats()
		e := b.est[name]
		if e == nil {
			e = new([2]Estimator)
			b.est[name] = e
		}
		for d := range e {
			cs := st.Directions[d].Classes[link.Low]
			e[d].Observe(now, Sample{Bytes: cs.Bytes, Waiting: cs.Waiting})
			wants[i] = max(wants[i], e[d].Want(b.caps[name], budget))
		}
		total += wants[i]
	}
	for name := range b.est {
		if !slices.Contains(names, name) {
			delete(b.est, name)
		}
	}
	b.want = min(total, budget)
	rate, mode := Effective(now, b.grant, budget, b.live)
	if mode != b.mode {
		lvl := slog.LevelInfo
		if mode == ModeFallback {
			lvl = slog.LevelWarn
		}
		b.log.Log(context.Background(), lvl, "shared low-priority budget", "mode", mode, "rate", rate, "budget", budget)
	}
	b.rate, b.mode = rate, mode
	caps := Caps(mode, rate, names, wants)
	if !equalCaps(caps, b.caps) {
		b.caps = caps
		b.o.Links.SetLowPriorityCaps(caps)
	}
}

func equalCaps(a, b map[string]int64) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// reportLocked is this instance's demand key value.
func (b *Budget) reportLocked() Report {
	return Report{Demand: Demand{Want: b.want, Applied: b.grant.Version}, Rate: b.rate, Mode: b.mode, Allocator: b.leader}
}

// setReachable records whether the last etcd request got an answer.
func (b *Budget) setReachable(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err != nil && b.unreachable.IsZero():
		b.unreachable = b.clk.Now()
		b.log.Warn("shared low-priority budget: etcd unreachable; keeping the last grant until it expires", "grant", b.grant.Rate, "expires", b.grant.Expires, "err", err)
	case err == nil && !b.unreachable.IsZero():
		b.log.Info("shared low-priority budget: etcd reachable again", "after", b.clk.Now().Sub(b.unreachable).Round(time.Millisecond))
		b.unreachable = time.Time{}
	}
}

// watchGrant follows this instance's grant key, applies each grant at
// once and acknowledges it in the demand key.
func (b *Budget) watchGrant(ctx context.Context) {
	key := b.grantKey(b.o.Name)
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, opTimeout)
		resp, err := b.o.Client.Get(gctx, key)
		cancel()
		b.setReachable(err)
		if err != nil {
			b.tick(ctx, b.o.SampleInterval)
			continue
		}
		if len(resp.Kvs) > 0 {
			b.receive(resp.Kvs[0].Value)
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range b.o.Client.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					b.receive(ev.Kv.Value)
				}
			}
		}
		wcancel()
	}
}

// receive applies a grant value and acknowledges it.
func (b *Budget) receive(v []byte) {
	var g Grant
	err := json.Unmarshal(v, &g)
	if err == nil {
		err = g.Check(b.clk.Now(), b.o.GrantTTL)
	}
	if err != nil {
		b.refused.Add(1)
		b.log.Warn("shared low-priority budget: refused a grant written under the prefix; keeping the last one", "err", err)
		return
	}
	b.mu.Lock()
	changed := g.Version != b.grant.Version || g.Rate != b.grant.Rate
	b.grant = g // only the allocator in office writes the key, in order
	b.mu.Unlock()
	b.sample()
	if changed {
		b.putDemand(context.Background())
	}
}

// sessionLoop keeps a session on the lease, reports the demand and
// campaigns for the allocator's seat, making a new session when one
// ends (its lease expired while etcd was unreachable).
func (b *Budget) sessionLoop(ctx context.Context) {
	given := b.o.Lease
	for ctx.Err() == nil {
		opts := []concurrency.SessionOption{concurrency.WithContext(ctx)}
		if given != 0 {
			opts = append(opts, concurrency.WithLease(given))
		} else {
			opts = append(opts, concurrency.WithTTL(int((b.o.LeaseTTL+time.Second-1)/time.Second)))
		}
		sctx, cancel := context.WithTimeout(ctx, opTimeout)
		sess, err := newSession(sctx, b.o.Client, opts)
		cancel()
		if err != nil { // success says nothing: a given lease is not checked
			b.setReachable(err)
			b.tick(ctx, b.o.Period)
			continue
		}
		b.runSession(ctx, sess)
		if given == 0 {
			rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			_, _ = b.o.Client.Revoke(rctx, sess.Lease())
			cancel()
		}
		sess.Orphan()
		if ctx.Err() != nil {
			return
		}
		if given != 0 && b.leaseGone(ctx, given) {
			b.log.Warn("shared low-priority budget: the instance's lease expired; the budget keeps a lease of its own", "lease", int64(given))
			given = 0
		}
		b.tick(ctx, b.o.Period)
	}
}

// leaseGone reports whether etcd says lease id has expired.
func (b *Budget) leaseGone(ctx context.Context, id clientv3.LeaseID) bool {
	tctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := b.o.Client.TimeToLive(tctx, id)
	return err == nil && resp.TTL <= 0
}

// newSession makes a session, giving up when ctx ends (NewSession itself
// waits for the lease grant without a deadline of its own).
func newSession(ctx context.Context, cli *clientv3.Client, opts []concurrency.SessionOption) (*concurrency.Session, error) {
	type res struct {
		s   *concurrency.Session
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := concurrency.NewSession(cli, opts...)
		ch <- res{s, err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Orphan()
			}
		}()
		return nil, ctx.Err()
	}
}

// runSession reports the demand every Period and campaigns, until ctx
// ends or the session's lease is gone.
func (b *Budget) runSession(ctx context.Context, sess *concurrency.Session) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-sctx.Done():
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.campaign(sctx, sess)
	}()
	for {
		b.putDemandLease(sctx, sess.Lease())
		b.listDemands(sctx)
		if !b.tick(sctx, b.o.Period) {
			break
		}
	}
	wg.Wait()
	b.mu.Lock()
	b.leaseID = 0 // no demand writes until the next session
	b.mu.Unlock()
}

// putDemandLease records id as the lease the demand key goes under and
// writes the demand.
func (b *Budget) putDemandLease(ctx context.Context, id clientv3.LeaseID) {
	b.mu.Lock()
	b.leaseID = id
	b.mu.Unlock()
	b.putDemand(ctx)
}

// putDemand writes this instance's report under its lease.
func (b *Budget) putDemand(ctx context.Context) {
	b.mu.Lock()
	id := b.leaseID
	r := b.reportLocked()
	b.mu.Unlock()
	if id == 0 {
		return
	}
	v, _ := json.Marshal(r)
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	_, err := b.o.Client.Put(pctx, b.demandKey(b.o.Name), string(v), clientv3.WithLease(id))
	cancel()
	if ctx.Err() == nil {
		b.setReachable(err)
	}
}

// listDemands reads every instance's report: how many are live (for the
// fallback's equal share) and the peers SHOW BUDGET lists.
func (b *Budget) listDemands(ctx context.Context) {
	peers, err := b.readDemands(ctx)
	if ctx.Err() != nil {
		return
	}
	b.setReachable(err)
	if err != nil {
		return
	}
	b.mu.Lock()
	b.peers, b.live = peers, len(peers)
	b.mu.Unlock()
}

func (b *Budget) readDemands(ctx context.Context) ([]Peer, error) {
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := b.o.Client.Get(gctx, b.demandPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("budget: reading demands: %w", err)
	}
	var out []Peer
	for _, kv := range resp.Kvs {
		p := Peer{Name: strings.TrimPrefix(string(kv.Key), b.demandPrefix())}
		if json.Unmarshal(kv.Value, &p.Report) != nil {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// campaign runs for the allocator's seat and, once elected, allocates
// every Period/2 until ctx ends or the seat is lost.
func (b *Budget) campaign(ctx context.Context, sess *concurrency.Session) {
	e := concurrency.NewElection(sess, b.electionKey())
	if err := e.Campaign(ctx, b.o.Name); err != nil {
		return
	}
	b.setLeader(ctx, true)
	defer b.setLeader(ctx, false)
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_ = e.Resign(rctx)
		cancel()
	}()
	a := NewAllocator(b.o.GrantTTL)
	if err := b.adopt(ctx, a); err != nil {
		return
	}
	leader := clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())
	for b.tick(ctx, b.o.Period/2) {
		if err := b.allocate(ctx, a, leader); err != nil {
			if errors.Is(err, errNotLeader) || ctx.Err() != nil {
				return
			}
			b.log.Warn("shared low-priority budget: allocation failed", "err", err)
		}
	}
}

var errNotLeader = errors.New("budget: no longer the allocator")

func (b *Budget) setLeader(ctx context.Context, v bool) {
	b.mu.Lock()
	b.leader = v
	b.mu.Unlock()
	if v {
		b.log.Info("shared low-priority budget: elected allocator")
	} else {
		b.log.Info("shared low-priority budget: allocator seat released")
	}
	if ctx.Err() == nil {
		b.putDemand(ctx)
	}
}

// adopt loads the grants a previous allocator wrote.
func (b *Budget) adopt(ctx context.Context, a *Allocator) error {
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, opTimeout)
		resp, err := b.o.Client.Get(gctx, b.grantPrefix(), clientv3.WithPrefix())
		cancel()
		if err != nil {
			b.tick(ctx, b.o.Period)
			continue
		}
		gs := map[string]Grant{}
		for _, kv := range resp.Kvs {
			var g Grant
			if json.Unmarshal(kv.Value, &g) == nil && g.Check(b.clk.Now(), b.o.GrantTTL) == nil {
				gs[strings.TrimPrefix(string(kv.Key), b.grantPrefix())] = g
			}
		}
		a.Adopt(gs)
		return nil
	}
	return ctx.Err()
}

// allocate is one allocation: read the demands, step the allocator and
// write its grants in one transaction that holds only while this
// instance has the seat.
func (b *Budget) allocate(ctx context.Context, a *Allocator, leader clientv3.Cmp) error {
	budget := b.o.Budget()
	if budget <= 0 {
		return nil
	}
	peers, err := b.readDemands(ctx)
	if err != nil {
		return err
	}
	demands := make(map[string]Demand, len(peers))
	for _, p := range peers {
		demands[p.Name] = p.Demand
	}
	ws := a.Step(b.clk.Now(), budget, demands)
	ops := make([]clientv3.Op, 0, len(ws))
	for _, w := range ws {
		if w.Delete {
			ops = append(ops, clientv3.OpDelete(b.grantKey(w.Name)))
			continue
		}
		v, _ := json.Marshal(w.Grant)
		ops = append(ops, clientv3.OpPut(b.grantKey(w.Name), string(v)))
	}
	tctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := b.o.Client.Txn(tctx).If(leader).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("budget: writing grants: %w", err)
	}
	if !resp.Succeeded {
		return errNotLeader
	}
	return nil
}

// State returns a snapshot.
func (b *Budget) State() State {
	budget := b.o.Budget()
	b.mu.Lock()
	defer b.mu.Unlock()
	return State{Name: b.o.Name, Budget: budget, Report: b.reportLocked(), Grant: b.grant,
		Unreachable: b.unreachable, Live: b.live, Peers: slices.Clone(b.peers)}
}

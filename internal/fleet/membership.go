package fleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/etcd"
)

// Defaults of Options.
const (
	// DefaultTTL is the lease of an instance's record: it vanishes this
	// long after the instance stops renewing it.
	DefaultTTL = 10 * time.Second
	// DefaultRefresh is how often the record is compared with what the
	// instance would publish now (catalog revision, routes) and put
	// again when it differs.
	DefaultRefresh = time.Second
	// retryDelay is the pause before listing again after a failed
	// listing or watch, and between attempts to register again.
	retryDelay = time.Second
	// revokeTimeout bounds the lease's revocation when Run ends.
	revokeTimeout = 2 * time.Second
)

// NameTakenError is Join's refusal: a live instance already holds the
// name.
type NameTakenError struct {
	Name   string
	Holder Member // the holder's record, as etcd has it
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("instance name %q is taken by a live instance (admin %s, http %s, started %s); pick another with instance_name or --name, or stop that instance",
		e.Name, orNone(e.Holder.AdminAddr), orNone(e.Holder.HTTPAddr), e.Holder.StartedAt.UTC().Format(time.RFC3339))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Options configure Join.
type Options struct {
	// Client reaches etcd; the caller owns it and closes it after Run
	// has returned. Required.
	Client *clientv3.Client
	// Etcd names the key prefix (Etcd.Key).
	Etcd etcd.Config
	// Self returns the record to publish now. Its Name must not change;
	// Incarnation is Membership's own, and a zero StartedAt is the time
	// of Join. Called from Join
	// and then every Refresh by Run; it must be safe for that.
	// Required.
	Self func() Member
	// TTL is the lease's time to live, rounded up to whole seconds (etcd
	// counts seconds); 0 means DefaultTTL.
	TTL time.Duration
	// Refresh is how often Run compares and republishes the record; 0
	// means DefaultRefresh.
	Refresh time.Duration
	// Clock stamps StartedAt and LastSeen and times the refresh; nil
	// means clock.Real.
	Clock clock.Clock
	// Logger receives registrations, lost leases and watch errors; nil
	// discards them.
	Logger *slog.Logger
}

// Membership is this instance's registration under a lease and its
// view of the live members. Its methods are safe for concurrent use.
type Membership struct {
	cli         *clientv3.Client
	prefix      string // <prefix>/instances/, with the slash
	key         string // <prefix>/instances/<name>
	name        string
	ttl         int64 // seconds
	refresh     time.Duration
	self        func() Member
	clk         clock.Clock
	log         *slog.Logger
	started     time.Time
	incarnation string

	refused atomic.Uint64 // instance records refused (no lease, or a name other than the key's)

	mu        sync.Mutex
	lease     clientv3.LeaseID // guarded by mu; 0 while unregistered
	published []byte           // guarded by mu; the record last put
	members   map[string]seen  // guarded by mu; by name, as last read
}

// seen is a member's record as last read.
type seen struct {
	m     Member
	lease clientv3.LeaseID
	at    time.Time
}

// Join registers the instance: it grants a lease and creates
// <prefix>/instances/<name> under it, in one transaction that succeeds
// only if no one holds the name (CreateRevision == 0). A name held by a
// live instance is a *NameTakenError. Run keeps the registration.
func Join(ctx context.Context, o Options) (*Membership, error) {
	if o.Client == nil || o.Self == nil {
		return nil, errors.New("fleet: Options.Client and Options.Self are required")
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	name := o.Self().Name
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var inc [8]byte
	rand.Read(inc[:])
	m := &Membership{
		cli: o.Client, prefix: o.Etcd.Key("instances") + "/", key: o.Etcd.Key("instances", name), name: name,
		ttl: int64(math.Ceil(o.TTL.Seconds())), refresh: o.Refresh, self: o.Self, clk: o.Clock, log: o.Logger,
		started: o.Clock.Now(), incarnation: hex.EncodeToString(inc[:]), members: map[string]seen{},
	}
	holder, err := m.register(ctx)
	if err != nil {
		return nil, err
	}
	if holder != nil {
		return nil, &NameTakenError{Name: name, Holder: *holder}
	}
	m.log.Info("fleet: registered", "instance", name, "key", m.key, "ttl_seconds", m.ttl)
	return m, nil
}

// CheckName refuses an instance name that cannot be a key part: empty,
// with a slash or a control character.
func CheckName(name string) error {
	if name == "" || strings.ContainsAny(name, "/") || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("instance name %q: want a non-empty name without slashes or control characters", name)
	}
	return nil
}

// record is the record to publish now.
func (m *Membership) record() []byte {
	r := m.self()
	r.Name, r.Incarnation = m.name, m.incarnation
	if r.StartedAt.IsZero() {
		r.StartedAt = m.started
	}
	return r.encode()
}

// register grants a lease and puts the record under it if the key is
// free, or held by this very process under a lease it lost. It returns
// the holder's record when another live instance holds the name.
func (m *Membership) register(ctx context.Context) (*Member, error) {
	g, err := m.cli.Grant(ctx, m.ttl)
	if err != nil {
		return nil, fmt.Errorf("fleet: granting a lease: %w", err)
	}
	rec := m.record()
	free := clientv3.Compare(clientv3.CreateRevision(m.key), "=", 0)
	resp, err := m.cli.Txn(ctx).If(free).Then(clientv3.OpPut(m.key, string(rec), clientv3.WithLease(g.ID))).Else(clientv3.OpGet(m.key)).Commit()
	if err != nil {
		m.revoke(g.ID)
		return nil, fmt.Errorf("fleet: registering %s: %w", m.key, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 1 {
			holder, derr := decodeMember(kvs[0].Value)
			if derr != nil || holder.Incarnation != m.incarnation {
				m.revoke(g.ID)
				return &holder, nil
			}
			// Our own record under the lease we lost: take it over.
			same := clientv3.Compare(clientv3.ModRevision(m.key), "=", kvs[0].ModRevision)
			r2, err := m.cli.Txn(ctx).If(same).Then(clientv3.OpPut(m.key, string(rec), clientv3.WithLease(g.ID))).Commit()
			if err != nil || !r2.Succeeded {
				m.revoke(g.ID)
				if err == nil {
					err = errors.New("the record changed meanwhile")
				}
				return nil, fmt.Errorf("fleet: registering %s again: %w", m.key, err)
			}
		} else {
			m.revoke(g.ID)
			return nil, fmt.Errorf("fleet: registering %s: the key vanished meanwhile", m.key)
		}
	}
	m.mu.Lock()
	m.lease, m.published = g.ID, rec
	m.mu.Unlock()
	return nil, nil
}

// revoke revokes lease id, bounded by revokeTimeout; errors are
// ignored (the lease then expires on its own).
func (m *Membership) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	m.cli.Revoke(ctx, id)
}

// Name is the instance's name.
func (m *Membership) Name() string { return m.name }

// Lease is the lease the record lives under, 0 while the instance is
// not registered (its lease lost, not yet registered again). It changes
// when Run registers again; keys put under it vanish with it.
func (m *Membership) Lease() clientv3.LeaseID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lease
}

// Run keeps the lease alive, republishes the record when it changes,
// watches <prefix>/instances/ and, when the lease is lost (etcd
// unreachable longer than the TTL), registers again once etcd answers.
// It runs until ctx ends, then revokes the lease, so the others see the
// instance leave at once, and returns ctx.Err().
func (m *Membership) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.watch(ctx)
	}()
	for ctx.Err() == nil {
		lease := m.Lease()
		if lease == 0 {
			if holder, err := m.register(ctx); err != nil {
				m.log.Warn("fleet: registering again failed; retrying", "instance", m.name, "err", err)
			} else if holder != nil {
				m.log.Error("fleet: instance name taken by another instance while this one was away; retrying", "instance", m.name, "holder_http", holder.HTTPAddr)
			} else {
				m.log.Info("fleet: registered again", "instance", m.name)
				continue
			}
			clock.Sleep(ctx, m.clk, retryDelay)
			continue
		}
		m.keep(ctx, lease)
	}
	if lease := m.Lease(); lease != 0 {
		m.revoke(lease)
	}
	wg.Wait()
	return ctx.Err()
}

// keep renews lease and republishes the record when it changes, until
// the lease is lost (then the lease is 0) or ctx ends.
func (m *Membership) keep(ctx context.Context, lease clientv3.LeaseID) {
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := m.cli.KeepAlive(kctx, lease)
	if err != nil {
		m.lost(lease, err)
		return
	}
	t := m.clk.NewTimer(m.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				if ctx.Err() == nil {
					m.lost(lease, errors.New("keep-alive ended: etcd unreachable longer than the lease's TTL, or the lease was revoked"))
				}
				return
			}
		case <-t.C():
			m.publish(ctx, lease)
			t.Reset(m.refresh)
		}
	}
}

// lost forgets lease, so that Run registers again.
func (m *Membership) lost(lease clientv3.LeaseID, err error) {
	m.log.Warn("fleet: lease lost; registering again when etcd answers", "instance", m.name, "err", err)
	m.mu.Lock()
	if m.lease == lease {
		m.lease, m.published = 0, nil
	}
	m.mu.Unlock()
}

// publish puts the record again if it changed, only while the key is
// still under lease.
func (m *Membership) publish(ctx context.Context, lease clientv3.LeaseID) {
	rec := m.record()
	m.mu.Lock()
	same := bytes.Equal(rec, m.published)
	m.mu.Unlock()
	if same {
		return
	}
	ours := clientv3.Compare(clientv3.LeaseValue(m.key), "=", lease)
	resp, err := m.cli.Txn(ctx).If(ours).Then(clientv3.OpPut(m.key, string(rec), clientv3.WithLease(lease))).Commit()
	switch {
	case err != nil:
		m.log.Debug("fleet: republishing failed; retrying", "instance", m.name, "err", err)
	case !resp.Succeeded:
		m.lost(lease, errors.New("the record is no longer under this instance's lease"))
	default:
		m.mu.Lock()
		if m.lease == lease {
			m.published = rec
		}
		m.mu.Unlock()
	}
}

// watch keeps members current: a listing of <prefix>/instances/, then
// its events, listing again after an error (a compaction, no leader,
// etcd unreachable), until ctx ends. While etcd is unreachable the last
// reading stays.
func (m *Membership) watch(ctx context.Context) {
	for ctx.Err() == nil {
		resp, err := m.cli.Get(ctx, m.prefix, clientv3.WithPrefix())
		if err != nil {
			if ctx.Err() == nil {
				m.log.Debug("fleet: listing the instances failed; retrying", "err", err)
			}
			clock.Sleep(ctx, m.clk, retryDelay)
			continue
		}
		now := m.clk.Now()
		members := map[string]seen{}
		for _, kv := range resp.Kvs {
			if mb, ok := m.accept(kv.Key, kv.Value, kv.Lease, kv.ModRevision); ok {
				members[mb.Name] = seen{m: mb, lease: clientv3.LeaseID(kv.Lease), at: now}
			}
		}
		m.mu.Lock()
		m.members = members
		m.mu.Unlock()
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range m.cli.Watch(wctx, m.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if err := wr.Err(); err != nil {
				m.log.Debug("fleet: watch ended; listing again", "err", err)
				break
			}
			now := m.clk.Now()
			m.mu.Lock()
			for _, ev := range wr.Events {
				name := strings.TrimPrefix(string(ev.Kv.Key), m.prefix)
				if ev.Type == clientv3.EventTypeDelete {
					delete(m.members, name)
					continue
				}
				if mb, ok := m.accept(ev.Kv.Key, ev.Kv.Value, ev.Kv.Lease, ev.Kv.ModRevision); ok {
					m.members[mb.Name] = seen{m: mb, lease: clientv3.LeaseID(ev.Kv.Lease), at: now}
				} else {
					delete(m.members, name)
				}
			}
			m.mu.Unlock()
		}
		cancel()
		clock.Sleep(ctx, m.clk, retryDelay)
	}
}

// accept decodes the instance record at key, written at rev under
// lease. A record that does not decode, has no lease (it would never
// expire: an instance's record always lives under its lease), or names
// an instance other than its key is refused: logged at WARN, counted
// (Refused) and never shown as a member.
func (m *Membership) accept(key, value []byte, lease, rev int64) (Member, bool) {
	mb, err := decodeMember(value)
	switch {
	case err != nil:
	case lease == 0:
		err = errors.New("instance record without a lease")
	case mb.Name != strings.TrimPrefix(string(key), m.prefix):
		err = fmt.Errorf("instance record names %q", mb.Name)
	}
	if err != nil {
		m.refused.Add(1)
		m.log.Warn("fleet: refused an instance record written under the prefix", "key", string(key), "revision", rev, "err", err)
		return Member{}, false
	}
	return mb, true
}

// Refused returns how many instance records were refused (see accept).
func (m *Membership) Refused() uint64 { return m.refused.Load() }

// Members returns the live members as last read, by name, with the
// lease each record lives under and when it was read.
func (m *Membership) Members() []Instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Instance, 0, len(m.members))
	for _, s := range m.members {
		out = append(out, Instance{Member: s.m, LastSeen: s.at, Self: s.m.Name == m.name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// leases returns the lease of each member by name.
func (m *Membership) leases() map[string]clientv3.LeaseID {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]clientv3.LeaseID, len(m.members))
	for n, s := range m.members {
		out[n] = s.lease
	}
	return out
}

// TTLs asks etcd what is left of each lease, concurrently; a lease etcd
// did not answer for (or that expired) is missing from the result.
func (m *Membership) TTLs(ctx context.Context) map[string]float64 {
	ls := m.leases()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]float64{}
	for name, id := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := m.cli.TimeToLive(ctx, id)
			if err != nil || r.TTL < 0 {
				return
			}
			mu.Lock()
			out[name] = float64(r.TTL)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/opt"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
)

// ErrUnavailable is returned by a shared store's Save when the service
// that holds the catalog cannot be reached: nothing was committed by
// this call as far as the caller can tell, and the caller must not apply
// the change itself.
var ErrUnavailable = errors.New("store: the catalog service cannot be reached")

// Defaults of an Etcd store.
const (
	// DefaultOpTimeout bounds one Load or Save: longer than a leader
	// election, which a stopped leader causes (1 to 2.5 s with etcd's
	// default election timeout).
	DefaultOpTimeout = 5 * time.Second
	// DefaultCheckInterval is how often Follow checks that the cluster
	// answers a linearizable read.
	DefaultCheckInterval = time.Second
	// DefaultCheckTimeout bounds one such check.
	DefaultCheckTimeout = time.Second
	// attemptTimeout bounds one transaction of Save: a member that still
	// takes a stopped leader for its leader holds a proposal until its own
	// request timeout (7 s), so Save gives up on it and sends it again.
	attemptTimeout = time.Second
	// DefaultStaleAfter is how long the checks must have failed before
	// the catalog is stale: longer than an election, so that losing one
	// member of three does not make it read-only.
	DefaultStaleAfter = 3 * time.Second
)

// Etcd keeps the catalog in one etcd key, its value the JSON of Marshal.
// The revision is the key's ModRevision (0 when the key does not exist):
// the etcd revision of the transaction that last wrote it. Save is one
// transaction, If(ModRevision(key) == expected) Then(Put), so two
// writers that read the same revision cannot both succeed. Many
// processes share the key; Follow applies the others' changes. It is
// safe for concurrent use and holds no lock of its own.
type Etcd struct {
	cli *clientv3.Client
	key string
	// OpTimeout bounds each Load and Save; 0 means DefaultOpTimeout.
	OpTimeout time.Duration
	// CheckInterval, CheckTimeout and StaleAfter drive Follow's health
	// check; 0 means DefaultCheckInterval, DefaultCheckTimeout and
	// DefaultStaleAfter.
	CheckInterval, CheckTimeout, StaleAfter time.Duration
	// Clock paces retries and bounds Save; nil means clock.Real.
	Clock clock.Clock

	resets atomic.Uint64 // Follow's reloads after etcd's revisions went back or its cluster changed
}

// Resets returns how many times Follow found etcd's revisions gone back
// (its data was lost: a member restored or started on an empty data
// directory) or its cluster ID changed, and reloaded the whole catalog.
func (e *Etcd) Resets() uint64 { return e.resets.Load() }

// NewEtcd returns the store of the catalog at key, through cli (which
// the caller owns and closes).
func NewEtcd(cli *clientv3.Client, key string) *Etcd { return &Etcd{cli: cli, key: key} }

// Key returns the catalog's key.
func (e *Etcd) Key() string { return e.key }

// Shared reports that other processes write the catalog too: a conflict
// is another writer's committed change, not a retry to hide.
func (e *Etcd) Shared() bool { return true }

func (e *Etcd) opTimeout() time.Duration { return opt.Positive(e.OpTimeout, DefaultOpTimeout) }

// Load reads the key with a linearizable read. A missing key returns
// (nil, 0, nil); a value that does not decode is an error naming the
// key; an unreachable cluster an error wrapping ErrUnavailable.
func (e *Etcd) Load(ctx context.Context) (*catalog.Catalog, Revision, error) {
	c, rev, _, err := e.load(ctx)
	return c, rev, err
}

// load is Load that also returns the cluster's revision at the read:
// every change of the key up to it is in what was read.
func (e *Etcd) load(ctx context.Context) (*catalog.Catalog, Revision, int64, error) {
	ctx, cancel := clock.WithTimeout(ctx, e.clock(), e.opTimeout(), context.DeadlineExceeded)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.key)
	if err != nil {
		return nil, 0, 0, e.unavailable(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, resp.Header.Revision, nil
	}
	kv := resp.Kvs[0]
	c, err := e.decode(kv.Value)
	if err != nil {
		return nil, 0, 0, err
	}
	return c, Revision(kv.ModRevision), resp.Header.Revision, nil
}

// Save writes c in one transaction if the key's ModRevision is still
// expected (0: the key must not exist) and returns the revision of that
// transaction. A failed comparison returns the key's current revision
// and ErrConflict. A transaction that fails for want of a leader or a
// member (an election after a member stopped: etcd then answers "no
// leader" at once, or holds the proposal it sent to the stopped leader,
// so an attempt is given 1 s) is sent again every 100 ms until
// OpTimeout; that is safe because of its condition: when an
// earlier attempt was committed after all, the comparison fails and the
// key holds exactly these bytes, which Save then reports as its own
// success. Past OpTimeout the error wraps ErrUnavailable (the
// transaction may still have been committed if the answer was lost:
// Follow then delivers it like any other change).
func (e *Etcd) Save(ctx context.Context, c *catalog.Catalog, expected Revision) (Revision, error) {
	data, err := Marshal(c)
	if err != nil {
		return expected, err
	}
	ctx, cancel := clock.WithTimeout(ctx, e.clock(), e.opTimeout(), context.DeadlineExceeded)
	defer cancel()
	// A member without a leader refuses at once rather than holding the
	// transaction until an election ends, so the loop below retries.
	ctx = clientv3.WithRequireLeader(ctx)
	var last error // the last attempt's own error, rather than the timeout's
	for attempt := 0; ; attempt++ {
		actx, acancel := clock.WithTimeout(ctx, e.clock(), attemptTimeout, context.DeadlineExceeded)
		resp, err := e.cli.Txn(actx).
			If(clientv3.Compare(clientv3.ModRevision(e.key), "=", int64(expected))).
			Then(clientv3.OpPut(e.key, string(data))).
			Else(clientv3.OpGet(e.key)).
			Commit()
		attemptOver := actx.Err() != nil && ctx.Err() == nil
		acancel()
		if err != nil {
			if e.refused(err) {
				return expected, e.unavailable(err)
			}
			if ctx.Err() == nil || last == nil {
				last = err
				if attemptOver {
					last = fmt.Errorf("no answer within %v", attemptTimeout)
				}
			}
			if clock.Sleep(ctx, e.clock(), 100*time.Millisecond) != nil {
				return expected, e.unavailable(fmt.Errorf("%w (%d attempts in %v)", last, attempt+1, e.opTimeout()))
			}
			continue
		}
		if resp.Succeeded {
			return Revision(resp.Header.Revision), nil
		}
		cur := Revision(0)
		if r := resp.Responses; len(r) == 1 {
			if g := r[0].GetResponseRange(); g != nil && len(g.Kvs) == 1 {
				kv := g.Kvs[0]
				cur = Revision(kv.ModRevision)
				if attempt > 0 && string(kv.Value) == string(data) {
					return cur, nil // an earlier attempt was committed
				}
			}
		}
		return cur, ErrConflict
	}
}

func (e *Etcd) clock() clock.Clock {
	if e.Clock == nil {
		return clock.Real{}
	}
	return e.Clock
}

// refused reports whether err is etcd refusing the client (credentials,
// permissions), which no retry mends.
func (e *Etcd) refused(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrAuthFailed) ||
		errors.Is(err, rpctypes.ErrInvalidAuthToken) || errors.Is(err, rpctypes.ErrUserEmpty)
}

func (e *Etcd) decode(data []byte) (*catalog.Catalog, error) {
	return Unmarshal("etcd key "+e.key, data)
}

// unavailable wraps an error of the client: a refused credential or
// permission stays what it is, anything else (timeouts, no leader, no
// connection) is ErrUnavailable.
func (e *Etcd) unavailable(err error) error {
	if e.refused(err) {
		return fmt.Errorf("etcd key %s: %w", e.key, err)
	}
	return fmt.Errorf("%w: etcd key %s: %v", ErrUnavailable, e.key, err)
}

// Follower is what Follow keeps up to date: the workload manager.
type Follower interface {
	// AppliedRevision is the revision of the catalog in force.
	AppliedRevision() uint64
	// ApplyStored makes c, stored at rev, the catalog in force if rev is
	// newer than AppliedRevision, and reports whether it did; c nil means
	// the key was deleted at rev.
	ApplyStored(c *catalog.Catalog, rev Revision) bool
	// SetStale records since when the store has been unreachable; the
	// zero time means it answers.
	SetStale(since time.Time)
}

// Follow keeps f in step with the key until ctx ends, then returns
// ctx.Err(). It watches the key from f.AppliedRevision()+1 and applies
// every change in revision order (a change f already has, such as its
// own save, is skipped by ApplyStored), re-watching from the revision
// applied after any interruption; when the revisions it needs were
// compacted away it loads the whole key instead. When a check finds
// etcd's revision below the applied one, or a cluster ID other than the
// one it first saw, etcd has lost its data or is another cluster: the
// revisions restart, and a watch from the applied revision would wait
// for ever. Follow then logs it at WARN, counts it (Resets), makes f
// forget its revision (ApplyStored(nil, 0)), applies the whole key as
// etcd has it now (or keeps the catalog in force if the key is gone, to
// be written again by the next change) and watches again from there.
// Every CheckInterval it
// reads the key linearizably, bounded by CheckTimeout and refused at
// once by a member without a leader: when the checks have failed for
// StaleAfter (a leader election passes before), f is stale from the
// start of the first failed check, so a lost quorum is noticed within
// CheckInterval + StaleAfter + CheckTimeout, 5 s by default; the next
// success marks it fresh. Each transition is logged. clk paces the
// checks.
func (e *Etcd) Follow(ctx context.Context, f Follower, clk clock.Clock, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	done := make(chan struct{})
	// restart carries the revision to watch from after a reset; the
	// check writes it, the watch below reads it.
	restart := make(chan int64, 1)
	go func() {
		defer close(done)
		e.check(ctx, f, clk, log, restart)
	}()
	defer func() { <-done }()
	// An interrupted watch is retried after pause, doubled up to a
	// second while the watch fails at once, and logged once until a
	// watch delivers again.
	pause, logged := 50*time.Millisecond, false
	var next int64 // the revision the watch has delivered everything before
	for ctx.Err() == nil {
		select {
		case next = <-restart:
		default:
			next = max(next, int64(f.AppliedRevision())+1)
		}
		var (
			got bool
			err error
		)
		next, got, err = e.watch(ctx, f, next, log, restart)
		if got {
			pause, logged = 50*time.Millisecond, false
		}
		if err != nil && ctx.Err() == nil && !logged {
			log.Warn("catalog watch interrupted; watching again from the applied revision", "key", e.key,
				"applied_revision", f.AppliedRevision(), "err", err)
			logged = true
		}
		if clock.Sleep(ctx, clk, pause) != nil {
			break
		}
		pause = min(2*pause, time.Second)
	}
	return ctx.Err()
}

// watch runs one watch from revision from until it breaks, and returns
// the revision it has delivered everything before (from, or past the
// last event or progress notice), whether it delivered anything and why
// it broke. When from was compacted away it loads the whole key instead
// and goes on from the revision of that read, so a catalog older than
// the compaction is not asked for again.
// A reset (restart) ends the watch at once with the revision to go on
// from.
func (e *Etcd) watch(ctx context.Context, f Follower, from int64, log *slog.Logger, restart <-chan int64) (next int64, got bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	next = from
	wch := e.cli.Watch(wctx, e.key, clientv3.WithRev(from), clientv3.WithProgressNotify())
	for {
		var wr clientv3.WatchResponse
		select {
		case to := <-restart:
			return to, true, nil
		case r, ok := <-wch:
			if !ok {
				return next, got, errors.New("watch closed")
			}
			wr = r
		}
		if wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
			log.Warn("catalog revisions compacted in etcd; loading the whole catalog", "key", e.key, "from", from, "compacted", wr.CompactRevision)
			c, rev, at, err := e.load(ctx)
			if err != nil {
				return next, false, err
			}
			if c != nil {
				f.ApplyStored(c, rev)
			}
			return at + 1, true, nil
		}
		if err := wr.Err(); err != nil {
			return next, got, err
		}
		got = true
		if wr.IsProgressNotify() {
			next = max(next, wr.Header.Revision+1)
		}
		for _, ev := range wr.Events {
			next = max(next, ev.Kv.ModRevision+1)
			rev := Revision(ev.Kv.ModRevision)
			if ev.Type == clientv3.EventTypeDelete {
				log.Warn("catalog key deleted in etcd; the catalog in force stays, the next change writes it again", "key", e.key, "revision", rev)
				f.ApplyStored(nil, rev)
				continue
			}
			c, err := e.decode(ev.Kv.Value)
			if err != nil {
				log.Error("catalog in etcd cannot be decoded; keeping the catalog in force", "key", e.key, "revision", rev, "err", err)
				continue
			}
			f.ApplyStored(c, rev)
		}
	}
}

// check runs the periodic health check until ctx ends.
func (e *Etcd) check(ctx context.Context, f Follower, clk clock.Clock, log *slog.Logger, restart chan int64) {
	every := opt.Positive(e.CheckInterval, DefaultCheckInterval)
	timeout := opt.Positive(e.CheckTimeout, DefaultCheckTimeout)
	after := opt.Positive(e.StaleAfter, DefaultStaleAfter)
	var stale, failing time.Time // when the catalog became stale; when the checks began to fail
	var cluster uint64           // the cluster ID the checks saw first; 0 before
	for {
		start := clk.Now()
		// Read before the check: a linearizable read that begins after f
		// applied a revision answers at that revision or later, unless
		// etcd's history restarted.
		applied := f.AppliedRevision()
		cctx, cancel := clock.WithTimeout(ctx, clk, timeout, context.DeadlineExceeded)
		resp, err := e.cli.Get(clientv3.WithRequireLeader(cctx), e.key, clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil && resp.Header != nil {
			h := resp.Header
			why := ""
			switch {
			case cluster != 0 && h.ClusterId != cluster:
				why = fmt.Sprintf("etcd's cluster ID changed from %x to %x", cluster, h.ClusterId)
			case h.Revision < int64(applied):
				why = fmt.Sprintf("etcd's revision %d is below the applied revision %d", h.Revision, applied)
			}
			if why == "" || e.reset(ctx, f, log, why, restart) {
				cluster = h.ClusterId
			}
		}
		switch {
		case err != nil && failing.IsZero():
			failing = start // a failure may be an election: wait StaleAfter
		case err == nil:
			failing = time.Time{}
		}
		switch {
		case err != nil && stale.IsZero() && clk.Now().Sub(failing) >= after:
			stale = failing
			f.SetStale(stale)
			log.Warn("etcd unreachable: traffic goes on with the last catalog, which is read-only until etcd is back",
				"key", e.key, "applied_revision", f.AppliedRevision(), "err", err)
		case err == nil && !stale.IsZero():
			log.Info("etcd reachable again: the catalog can change", "key", e.key,
				"stale_for", clk.Now().Sub(stale).Round(time.Millisecond).String(), "applied_revision", f.AppliedRevision())
			stale = time.Time{}
			f.SetStale(stale)
		}
		if clock.SleepUntil(ctx, clk, start.Add(every)) != nil {
			return
		}
	}
}

// reset reloads the whole catalog after etcd's revisions went back or
// its cluster changed (see Follow), and tells the watch where to go on
// from. It reports false when the reload failed (the next check tries
// again).
func (e *Etcd) reset(ctx context.Context, f Follower, log *slog.Logger, why string, restart chan int64) bool {
	log.Warn("etcd lost the catalog's history (its data was lost or it is another cluster): reloading the whole catalog",
		"key", e.key, "reason", why, "applied_revision", f.AppliedRevision())
	c, rev, at, err := e.load(ctx)
	if err != nil {
		log.Warn("reloading the catalog after etcd's reset failed; trying again at the next check", "key", e.key, "err", err)
		return false
	}
	f.ApplyStored(nil, 0) // the revisions restart: forget the applied one
	if c != nil {
		f.ApplyStored(c, rev)
	} else {
		log.Warn("etcd has no catalog after its reset; the catalog in force stays, the next change writes it again", "key", e.key)
	}
	select {
	case <-restart: // an older restart the watch has not taken
	default:
	}
	restart <- at + 1
	e.resets.Add(1) // after the reload, so a reader that sees it sees the catalog reloaded
	return true
}

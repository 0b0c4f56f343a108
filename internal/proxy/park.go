package proxy

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/idlepark"
	"github.com/sluicelab/sluice/internal/panics"
)

// sweepPeriod is how often the sweeper looks for idle pumps. A pump parks
// after one to two periods without a byte.
const sweepPeriod = 250 * time.Millisecond

// parking parks the server's idle pumps (see the package comment). Its
// zero value is ready: the set is made on first use, and the sweeper runs
// only while some pump may park. Safe for concurrent use.
type parking struct {
	once sync.Once
	set  *idlepark.Set
	clk  clock.Clock // the sweeper's; clock.Real unless a test sets it before first use

	parks atomic.Uint64 // pumps parked so far

	mu      sync.Mutex
	pumps   map[*pump]struct{} // guarded by mu; pumps that may park
	running bool               // guarded by mu; the sweeper runs
}

func (k *parking) init() {
	k.once.Do(func() {
		k.set = idlepark.New(nil)
		if k.clk == nil {
			k.clk = clock.Real{}
		}
		k.pumps = make(map[*pump]struct{})
	})
}

// parked is the number of pumps parked now.
func (k *parking) parked() int {
	k.init()
	return k.set.Parked()
}

// add makes p a candidate for parking, starting the sweeper if need be.
func (k *parking) add(p *pump) {
	k.init()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pumps[p] = struct{}{}
	if !k.running {
		k.running = true
		go k.sweep()
	}
}

// remove drops p, which has ended.
func (k *parking) remove(p *pump) {
	k.mu.Lock()
	delete(k.pumps, p)
	k.mu.Unlock()
}

// sweep asks each pump that moved no byte over a whole period to park,
// until no pump is left.
func (k *parking) sweep() {
	t := k.clk.NewTimer(sweepPeriod)
	defer t.Stop()
	var ps []*pump
	for {
		<-t.C()
		k.mu.Lock()
		if len(k.pumps) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		ps = ps[:0]
		for p := range k.pumps {
			ps = append(ps, p)
		}
		k.mu.Unlock()
		for i, p := range ps {
			p.swept()
			ps[i] = nil
		}
		t.Reset(sweepPeriod)
	}
}

// parkState is what a pump that may park shares with the sweeper and the
// relay, all under mu.
type parkState struct {
	rc   syscall.RawConn // src's, set once by newPump; nil: the pump never parks
	seen int64           // the sweeper's: the byte count at the previous sweep, -1 before the first

	mu       sync.Mutex
	asked    bool            // guarded by mu; the sweeper set src's read deadline in the past to stop the read
	kicked   bool            // guarded by mu; wake set src's read deadline in the past: the injector has bytes
	stopping bool            // guarded by mu; the session is ending: never park again
	parked   bool            // guarded by mu; the pump has no goroutine
	ticket   idlepark.Ticket // guarded by mu, with parked
}

// swept is the sweeper's visit: a pump whose count has not moved since
// the previous visit is asked to park. Called only by the sweeper.
func (p *pump) swept() {
	n := p.bytes()
	if n != p.pk.seen {
		p.pk.seen = n
		return
	}
	p.pk.mu.Lock()
	defer p.pk.mu.Unlock()
	if p.pk.asked || p.pk.stopping || p.pk.parked {
		return
	}
	p.pk.asked = true
	// Wakes the read; the pump then parks (see park). Any read that
	// starts before then fails at once and parks too.
	p.src.SetReadDeadline(clock.LongAgo)
}

// park handles a read that failed with err. It reports parked when the
// pump has given up its goroutine (the socket is in the parked set and
// resume will carry on), and retry when the read should be made again;
// neither means err stands.
func (p *pump) park(err error) (parked, retry bool) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false, false
	}
	p.pk.mu.Lock()
	defer p.pk.mu.Unlock()
	if p.pk.stopping {
		return false, false
	}
	if p.pk.kicked {
		// A wake-up, not a park: read again once the injector's bytes
		// have gone (the caller sends them).
		p.pk.kicked, p.pk.asked = false, false
		p.src.SetReadDeadline(time.Time{})
		return false, true
	}
	if p.pk.rc == nil || !p.pk.asked {
		return false, false
	}
	p.pk.asked = false
	p.src.SetReadDeadline(time.Time{})
	t, perr := p.srv.parking.set.Park(p.pk.rc, p.resume)
	if perr != nil {
		p.srv.log.Debug("pump not parked", "route", p.route.Name, "dir", p.dir.String(), "err", perr)
		return false, true
	}
	p.pk.parked, p.pk.ticket = true, t
	p.srv.parking.parks.Add(1)
	return true, false
}

// kick is the down pump's wire.Injector wake: it makes the pump call
// the injector before its next read, resuming it if it is parked and
// ending a waiting read with a deadline in the past. Safe from any
// goroutine.
func (p *pump) kick() {
	p.pk.mu.Lock()
	defer p.pk.mu.Unlock()
	if p.pk.stopping || p.pk.kicked || p.src == nil {
		// src nil: the loop ended the session (or has not given it to
		// the pumps yet, when its runner serves the kick).
		return
	}
	if p.pk.parked && p.srv.parking.set.Unpark(p.pk.ticket) {
		// run calls the injector first.
		p.pk.parked = false
		go p.proceed(nil)
		return
	}
	p.pk.kicked = true
	p.src.SetReadDeadline(clock.LongAgo)
}

// unkick clears a wake-up that run is about to serve anyway (at its
// start), so that a read deadline it set is not left in place.
func (p *pump) unkick() {
	p.pk.mu.Lock()
	defer p.pk.mu.Unlock()
	if p.pk.kicked && !p.pk.stopping {
		p.pk.kicked, p.pk.asked = false, false
		p.src.SetReadDeadline(time.Time{})
	}
}

// resume carries on a parked pump, on a goroutine of its own.
func (p *pump) resume() {
	p.pk.mu.Lock()
	p.pk.parked = false
	p.pk.mu.Unlock()
	p.proceed(nil)
}

// stop keeps the pump from parking again and, if it is parked, resumes
// it, so that a close or deadline of its socket that follows ends it as
// it would end a waiting read. The relay calls it before closing a socket
// or setting a read deadline. Safe to call more than once.
func (p *pump) stop() {
	p.pk.mu.Lock()
	defer p.pk.mu.Unlock()
	p.pk.stopping = true
	if p.pk.parked && p.srv.parking.set.Unpark(p.pk.ticket) {
		p.pk.parked = false
		go p.proceed(nil)
	}
}

// start runs the pump on a new goroutine: first, then what it reads.
// p.rs.ended is called once when the pump ends (never when it parks), with
// its error, nil at the end of the stream.
func (p *pump) start(ctx context.Context, first []byte) {
	p.enlist(ctx)
	go p.proceed(first)
}

// runHere is start on the calling goroutine: it returns once the pump has
// ended or parked.
func (p *pump) runHere(ctx context.Context, first []byte) {
	p.enlist(ctx)
	p.proceed(first)
}

// enlistCtx sets the pump's context.
func (p *pump) enlistCtx(ctx context.Context) { p.ctx = ctx }

// enlist sets the pump's context and makes it a candidate for parking.
func (p *pump) enlist(ctx context.Context) {
	p.ctx = ctx
	if p.pk.rc != nil {
		p.pk.seen = -1
		p.srv.parking.add(p)
	}
}

// proceed runs the pump, from first, until it ends or parks.
func (p *pump) proceed(first []byte) {
	parked, err := p.guarded(first)
	if parked {
		return
	}
	if p.pk.rc != nil {
		p.srv.parking.remove(p)
	}
	p.rs.ended(p.dir, err)
}

// guarded is run with its panic returned as an error.
func (p *pump) guarded(first []byte) (parked bool, err error) {
	defer panics.Catch(p.dir.pump(), &err)
	return p.run(p.ctx, first)
}

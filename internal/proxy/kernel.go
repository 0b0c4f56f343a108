package proxy

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/evloop"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/panics"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// KernelPath is the kernel's fast path (a *fastpath.Kernel): the event
// loop hands it the sessions whose bytes sluice need not touch, and
// observes their bytes from its journal.
type KernelPath interface {
	Pair(client, upstream fastpath.Socket, proto fastpath.Proto) (*fastpath.Pair, error)
	Journal() (*fastpath.Journal, error)
}

// journalData marks the journal's descriptor among a loop's events; a
// socket's is its descriptor number.
const journalData = 1 << 62

// idler is a down observer that can tell when neither peer is about to
// send: its bytes end with the server's answer to every request.
type idler interface {
	Idle() bool
}

// holder is an up Rewriter that can tell whether it might hold a request
// now (admission under a limit): wire.Admitting.
type holder interface {
	MayHold() bool
}

// kernelSess is the fast-path state of a session on the loop that runs
// the journal. Its fields are the runner's.
type kernelSess struct {
	proto fastpath.Proto
	idle  idler          // the down observer
	pair  *fastpath.Pair // nil until paired
	tried bool           // a pairing was tried; it is not tried again
	// resume asks for the pair to resume once the bytes user space
	// accepted for either socket are written.
	resume bool
	// unread is, by side (0: the client's socket), how many bytes user
	// space read before the pair existed and has still to write: they
	// were never the program's to pass, so they are not Consumed.
	unread [2]int
	// waiting is when settled first found bytes the kernel redirected
	// still on their way; zero when none are.
	waiting time.Time
}

// kernelFor returns the fast-path state of a session new on l, or nil
// when the kernel cannot relay it: l has no journal, its protocol has no
// framing the program walks, or its server's observer cannot tell when
// the session is idle.
func (l *loop) kernelFor(rs *relaying, protocol string) *kernelSess {
	if l.journal == nil {
		return nil
	}
	var proto fastpath.Proto
	switch protocol {
	case "postgres":
		proto = fastpath.PostgreSQL
	case "mysql":
		proto = fastpath.MySQL
	default:
		return nil
	}
	id, ok := rs.down.obs.(idler)
	if !ok {
		return nil
	}
	return &kernelSess{proto: proto, idle: id}
}

// toUserSpace is the registry's watcher while the fast path is on. A
// session the kernel relays goes back to user space at once (cmdHold),
// not at its next chunk, when a statement of it is penalised, and a
// coordinator when a shard session is linked to it: from then on its
// statements must be seen before its server sees them (kernelOK).
func (s *Server) toUserSpace(e session.Event) {
	var sess *session.Session
	switch e.Kind {
	case session.StatementPenalized:
		sess = e.Session
	case session.SessionLinked:
		sess = e.Session.Coordinator()
	default:
		return
	}
	s.mu.Lock()
	r := s.bySess[sess]
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	if ls := r.ls; ls != nil && ls.kernel != nil {
		ls.l.post(ls, cmdHold, nil)
	}
	r.mu.Unlock()
}

// openJournal makes l the loop whose sessions the kernel may relay. A
// failure is logged, and l relays in user space.
func (l *loop) openJournal() {
	j, err := l.srv.kernel.Journal()
	if err == nil {
		err = l.poll.Add(j.FD(), evloop.In, journalData)
		if err != nil {
			j.Close()
		}
	}
	if err != nil {
		l.srv.log.Warn("kernel fast path off: its journal cannot be read", "err", err)
		return
	}
	l.journal = j
	l.byCookie = make(map[uint64]*loopSide)
}

// kernelOK reports whether the kernel may relay ls's bytes now: nothing
// sluice does to them applies (no emulation, a link that admits bytes at
// once, no penalty, no admission limit, no rewrite), and the session is
// not part of a distributed statement (a shard statement's parent is the
// coordinator statement sluice saw reach the server, which the journal
// would show too late).
func kernelOK(ls *loopSess) bool {
	up, down := ls.rs.up, ls.rs.down
	if !up.loopable() || !down.loopable() || up.sess.Penalized() || up.sess.Distributed() || down.rw != nil {
		return false
	}
	if up.rw != nil {
		h, ok := up.rw.(holder)
		if !ok || h.MayHold() {
			return false
		}
	}
	return true
}

// answered is called on the loop after the down pump observed a chunk of
// n bytes and before it writes it. When the chunk leaves the session idle
// the session is paired (once), and the pair resumes once the chunk is
// written, if the kernel may relay it.
func (l *loop) answered(ls *loopSess, n int) {
	k := ls.kernel
	if !k.idle.Idle() || ls.sides[0].pending() || ls.sides[1].pending() {
		return
	}
	if k.pair == nil {
		if k.tried || !kernelOK(ls) {
			return
		}
		k.tried = true
		p, err := l.srv.kernel.Pair(ls.sides[0].sock, ls.sides[1].sock, k.proto)
		if err != nil {
			l.srv.log.Debug("kernel fast path: pair", "session", ls.rs.c.Session.ID, "err", err)
			return
		}
		k.pair = p
		k.unread[1] = n
		l.byCookie[p.Cookie(0)] = &ls.sides[0]
		l.byCookie[p.Cookie(1)] = &ls.sides[1]
		l.srv.kernelPaired.Add(1)
	}
	if !k.pair.Resumed() && kernelOK(ls) {
		k.resume = true // again after a hold
	}
}

// written is told that n bytes went into s's socket, bytes user space
// read from its peer's: the program counts them Consumed, and a resume
// asked for goes ahead once nothing waits to be written.
func (l *loop) written(s *loopSide, n int) error {
	k := s.ls.kernel
	if k == nil || k.pair == nil {
		return nil
	}
	from := s.ls.index(s.peer)
	skip := min(n, k.unread[from])
	k.unread[from] -= skip
	if n -= skip; n > 0 {
		if err := k.pair.Consumed(from, n); err != nil {
			return err
		}
	}
	if k.resume && !s.pending() && !s.peer.pending() {
		k.resume = false
		if err := k.pair.Resume(); err != nil {
			if !errors.Is(err, fastpath.ErrNotQuiet) && !errors.Is(err, fastpath.ErrUnsettled) {
				return err
			}
			l.srv.log.Debug("kernel fast path: not resumed", "session", s.ls.rs.c.Session.ID, "err", err)
		} else {
			l.srv.kernelResumes.Add(1)
		}
	}
	return nil
}

// settled reports whether user space may write to s now: no byte the
// kernel redirected from s's peer is still on its way to s (after Hold,
// or while resumed, when the program passed a chunk too large for the
// journal). Until then the bytes wait in s's pending buffer, and the loop
// tries again when s is writable.
func (l *loop) settled(s *loopSide) (bool, error) {
	k := s.ls.kernel
	if k == nil || k.pair == nil {
		return true, nil
	}
	if k.pair.Resumed() {
		// The program passed a chunk too large for the journal: the
		// rest of the exchange goes through user space, and the pair
		// resumes at the session's next idle point. Writes from user
		// space and the kernel's redirects then never alternate on a
		// socket within an exchange.
		if err := l.hold(s.ls); err != nil {
			return false, err
		}
	}
	ok, err := k.pair.Settled(s.ls.index(s.peer))
	if err != nil {
		return false, fmt.Errorf("kernel fast path: %w", err)
	}
	switch now := l.srv.clk.Now(); {
	case ok:
		k.waiting = time.Time{}
	case k.waiting.IsZero():
		k.waiting = now
	case now.Sub(k.waiting) > fastpath.SettleLimit:
		return false, fmt.Errorf("kernel fast path: %w", fastpath.ErrStuck)
	}
	return ok, nil
}

// index is s's side number: 0 for the client's socket.
func (ls *loopSess) index(s *loopSide) int {
	if s == &ls.sides[0] {
		return 0
	}
	return 1
}

// drainJournal observes what the kernel relayed since the last drain, on
// the pumps that would have read it, in stream order. A session whose
// bytes the kernel may no longer relay (its binding, link, penalty or
// admission changed) is paused; one whose observer failed goes to its
// pumps' failure path.
func (l *loop) drainJournal() {
	if l.journal == nil || !l.journal.Pending() {
		return
	}
	l.later = l.later[:0]
	// Each chunk is observed at the time the kernel received it, so a
	// statement's times and a round trip's do not depend on when the
	// journal was read. A clock with no mapping (Fake) stamps the drain.
	mono, _ := l.srv.clk.(clock.Monotonic)
	var now time.Time
	if mono != nil {
		now = l.srv.clk.Now()
	}
	err := l.journal.Drain(func(r fastpath.Record) {
		s := l.byCookie[r.Cookie]
		if s == nil || !s.ls.on {
			return
		}
		p := s.rd
		l.srv.kernelBytes.Add(uint64(len(r.Bytes)))
		var at time.Time
		if mono != nil {
			at = mono.FromMonotonic(r.At, now)
		}
		if err := l.replay(s.ls, p, r.Bytes, at); err != nil {
			l.later = append(l.later, laterAct{ls: s.ls, p: p, err: err})
			return
		}
		if k := s.ls.kernel; k.pair.Resumed() && !kernelOK(s.ls) {
			l.later = append(l.later, laterAct{ls: s.ls})
		}
	})
	if err != nil {
		l.srv.log.Error("kernel fast path: journal", "err", err)
	}
	// Acting may drain again (toPumps): take the list first.
	acts := append([]laterAct(nil), l.later...)
	for _, a := range acts {
		switch {
		case !a.ls.on || a.ls.leaving:
		case a.err != nil:
			l.failed(a.ls, a.p, a.err)
		default:
			if err := l.hold(a.ls); err != nil {
				l.failed(a.ls, a.ls.rs.up, err)
			}
		}
	}
}

// laterAct is what drainJournal does for a session after the drain.
type laterAct struct {
	ls  *loopSess
	p   *pump
	err error // the observer's error: the session fails; nil: it is held
}

// replay shows p's observer a chunk the kernel relayed at at (zero: now),
// as p.chunk would have before sending it. A Rewriter is shown it too (it
// observes), and must pass it whole: kernelOK kept the session off the
// kernel while it might hold.
func (l *loop) replay(ls *loopSess, p *pump, b []byte, at time.Time) (err error) {
	defer panics.Catch(p.dir.pump(), &err)
	// The observer, or a rewriter that observes (admission), stamps the
	// chunk's time.
	if r, ok := p.obs.(wire.Replayer); ok && !at.IsZero() {
		r.ReplayAt(at)
		defer r.ReplayAt(time.Time{})
	}
	if r, ok := p.rw.(wire.Replayer); ok && !at.IsZero() {
		r.ReplayAt(at)
		defer r.ReplayAt(time.Time{})
	}
	if err := p.obs.Observe(b); err != nil {
		return err
	}
	p.addBytes(len(b))
	if err := p.account(len(b)); err != nil {
		return err
	}
	if p.rw != nil {
		out, err := p.rw.Rewrite(ls.ctx, b)
		if err != nil {
			return err
		}
		if len(out) != len(b) {
			return fmt.Errorf("%s: the kernel relayed %d bytes the rewriter held %d of", p.dir, len(b), len(b)-len(out))
		}
	}
	return nil
}

// account counts n bytes the kernel relayed on p's flow, at the class
// send would have sent them at, so the link's and the pool's byte counts
// are the same on both paths.
func (p *pump) account(n int) error {
	if v := p.srv.policy.Version(); !p.bound || v != p.version {
		p.bind(v)
	}
	class := p.class
	if p.sess.Penalized() {
		class = link.Low
	}
	if _, _, err := p.flow.TrySend(n, class); err != nil {
		return fmt.Errorf("%s link: %w", p.dir, err)
	}
	return nil
}

// hold hands a resumed session's bytes back to user space, without
// waiting: from its return each chunk is passed to the loop, which
// writes nothing to a socket until the bytes the kernel redirected to it
// are queued (settled).
func (l *loop) hold(ls *loopSess) error {
	k := ls.kernel
	if k == nil || k.pair == nil {
		return nil
	}
	k.resume = false
	if !k.pair.Resumed() {
		return nil
	}
	if err := k.pair.Hold(); err != nil {
		return fmt.Errorf("kernel fast path: hold: %w", err)
	}
	l.srv.kernelPauses.Add(1)
	return nil
}

// leaveKernel is called before ls leaves the loop (toPumps, remove): the
// pair is held, the journal drained so that the observers have seen
// every byte the kernel relayed, and the pair's sockets are forgotten by
// cookie. The pair is closed when the session's sockets are.
func (l *loop) leaveKernel(ls *loopSess) error {
	k := ls.kernel
	if k == nil || k.pair == nil {
		return nil
	}
	err := l.hold(ls)
	l.drainJournal()
	delete(l.byCookie, k.pair.Cookie(0))
	delete(l.byCookie, k.pair.Cookie(1))
	return err
}

// drained is for the end of stream on s while paired: every byte the
// kernel relayed from s must be queued on its peer before the peer's
// write side ends. It reports done, or, when not, whether s must be read
// again first (its last chunks are on their way to user space) or the
// peer's queue waited for (the loop asks again when the peer is
// writable).
func (l *loop) drained(s *loopSide) (done, read bool, err error) {
	k := s.ls.kernel
	if k == nil || k.pair == nil {
		return true, false, nil
	}
	ok, err := k.pair.DrainedNow(s.ls.index(s))
	if errors.Is(err, fastpath.ErrUnread) {
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("kernel fast path: %w", err)
	}
	return ok, false, nil
}

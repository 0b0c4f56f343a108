package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/evloop"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/panics"
	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// relay is one accepted connection: the opening exchange, then two pumps.
type relay struct {
	srv   *Server
	route *Route
	start time.Time

	mu       sync.Mutex
	client   net.Conn         // guarded by mu once the session relays (the opening reads it alone); the accepted socket, detached while on a loop, then the one the loop gave back
	upstream net.Conn         // guarded by mu; nil until dialled, detached while on a loop
	sess     *session.Session // guarded by mu; nil until registered
	pumps    [2]*pump         // guarded by mu; nil until relaying, by direction
	ls       *loopSess        // guarded by mu; non-nil while an event loop relays the session
	kpair    *fastpath.Pair   // guarded by mu; the session's pair in the kernel once it left the loop, closed when the session ends
	aborted  bool             // guarded by mu
	// endOpening cancels the opening's context; guarded by mu, nil
	// outside the opening. abort calls it, so that a write of the opening
	// waiting out the emulated delay (delayedConn) ends at once.
	endOpening context.CancelFunc
}

func newRelay(s *Server, r *Route, c net.Conn) *relay {
	return &relay{srv: s, route: r, client: c, start: s.clk.Now()}
}

// abort closes both sockets, ending the pumps; a session on an event
// loop is handed to its pumps first (by the loop's runner).
func (r *relay) abort() {
	r.mu.Lock()
	r.aborted = true
	endOpening := r.endOpening
	r.mu.Unlock()
	if endOpening != nil {
		endOpening()
	}
	if !r.onLoopDo(cmdAbort, nil) {
		r.abortPumps()
	}
}

// onLoopDo asks the loop relaying the session, if one does, to run k, and
// reports whether it asked; ran (nil or not) is closed once the runner
// has run k.
func (r *relay) onLoopDo(k cmdKind, ran chan struct{}) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ls := r.ls; ls != nil {
		ls.l.post(ls, k, ran)
		return true
	}
	return false
}

// abortPumps is abort for a session not on a loop.
func (r *relay) abortPumps() {
	r.mu.Lock()
	r.aborted = true
	up, client := r.upstream, r.client
	pumps := r.pumps
	r.mu.Unlock()
	for _, p := range pumps {
		if p != nil {
			p.stop()
		}
	}
	client.Close()
	if up != nil {
		up.Close()
	}
}

// unsent returns the bytes written to the client's socket that the
// kernel has not sent yet (UnsentBytes).
func (r *relay) unsent() (int, error) {
	r.mu.Lock()
	ls, client := r.ls, r.client
	r.mu.Unlock()
	if ls == nil {
		return UnsentBytes(client)
	}
	return notSent(ls.sides[0].sock)
}

// serve runs the session's opening exchange on the calling goroutine,
// then its up pump (see relay) and returns once that pump ends or parks;
// finished is called once, when the session has ended (on the calling
// goroutine if it ends before relaying, else on the goroutine of the pump
// that ends last). No goroutine waits for the session's end, so an idle
// session whose pumps have parked holds none. A panic that escapes the
// code run and relay guard themselves (the pumps and the opening exchange
// return theirs as errors) ends only this session: it is logged and
// counted, and both sockets and the session are closed.
func (r *relay) serve(finished func()) {
	var err error
	relaying := false
	func() {
		defer panics.Catch("session", &err)
		relaying = r.run(finished)
	}()
	if pe := panics.As(err); pe != nil {
		r.crashed(pe)
		relaying = false
	}
	if !relaying {
		finished()
	}
}

// crashed ends the session after a panic that escaped its guards.
func (r *relay) crashed(pe *panics.Error) {
	r.panicked(pe)
	r.abort()
	r.mu.Lock()
	s := r.sess
	r.mu.Unlock()
	if s != nil {
		s.Close(r.srv.clk.Now())
	}
}

// run opens the session and, if that succeeds, starts relaying it and
// reports true: finished is then called when it ends.
func (r *relay) run(finished func()) bool {
	conn, ok := r.opening()
	if !ok {
		return false
	}
	r.relay(conn, finished)
	return true
}

// opening runs the route's opening exchange (or dials, for a tcp route)
// and reports whether the session may be relayed; if not, it has closed
// everything. Its context ends with it, or earlier when the session is
// aborted (Shutdown, RemoveRoute, DrainRoute): nothing it derives outlives
// the opening, and a write waiting out the emulated delay ends at once.
func (r *relay) opening() (wire.Conn, bool) {
	log := r.srv.log
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.endOpening = cancel
	if r.aborted {
		cancel()
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.endOpening = nil
		r.mu.Unlock()
		cancel()
	}()
	if err := setNotSentLowat(r.client, r.route.lowat()); err != nil {
		log.Debug("socket option", "route", r.route.Name, "err", err)
	}
	dial := r.route.dialer()
	// The opening's bytes cross the route's emulated path as every later
	// chunk does (delayedConn), in the unbound user's binding.
	var client, upDelayed net.Conn = r.client, nil
	if r.route.Frontend != nil {
		b := r.srv.policy.Bind(r.route.Name, "")
		client = newDelayed(ctx, r.client, r.srv.clk, b.Down, b.Down.Seed+int64(dirDown))
		upParams := b.Up
		dial = func(dctx context.Context) (net.Conn, error) {
			c, err := r.route.dialer()(dctx)
			if err != nil {
				return nil, err
			}
			// The opening's context, not the dial's, which may end with
			// the dial.
			upDelayed = newDelayed(ctx, c, r.srv.clk, upParams, upParams.Seed+int64(dirUp))
			return upDelayed, nil
		}
	}
	// The front end dials the session's upstream once, during the
	// opening, and may keep the dialer for side connections (a MySQL
	// session's KILL QUERY) made later, at any time and several at once:
	// those are dialled as they are, neither delayed with the opening's
	// context nor taken for the session's upstream.
	trackedDial := func(ctx context.Context) (net.Conn, error) {
		r.mu.Lock()
		side, aborted := r.upstream != nil, r.aborted
		r.mu.Unlock()
		if aborted {
			return nil, net.ErrClosed
		}
		if side {
			return r.route.dialer()(ctx)
		}
		c, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.upstream = c
		aborted = r.aborted
		r.mu.Unlock()
		if aborted {
			c.Close()
			return nil, net.ErrClosed
		}
		return c, nil
	}
	register := func() *session.Session {
		s := r.srv.reg.Open(r.route.sessionInfo(r.client), r.srv.clk.Now())
		r.mu.Lock()
		r.sess = s
		r.mu.Unlock()
		r.srv.mu.Lock()
		r.srv.bySess[s] = r
		r.srv.mu.Unlock()
		return s
	}

	var conn wire.Conn
	var err error
	if r.route.Frontend == nil {
		s := register()
		var up net.Conn
		up, err = trackedDial(ctx)
		conn = wire.Conn{Session: s, Client: r.client, Upstream: up}
	} else {
		conn, err = r.open(ctx, client, register, trackedDial)
		conn.Client = unwrapOpening(conn.Client, client)
		conn.Upstream = unwrapOpening(conn.Upstream, upDelayed)
	}
	if err != nil {
		if pe := panics.As(err); pe != nil {
			r.panicked(pe)
			if f, ok := r.route.Frontend.(openFailer); ok {
				if reply := f.OpenFailure(internalErrorMsg); len(reply) > 0 {
					r.client.SetWriteDeadline(clock.SocketDeadline(time.Second))
					r.client.Write(reply)
				}
			}
		}
		r.client.Close()
		r.mu.Lock()
		s, up := r.sess, r.upstream
		r.mu.Unlock()
		if up != nil {
			up.Close()
		}
		if s != nil {
			s.Close(r.srv.clk.Now())
		}
		if errors.Is(err, wire.ErrHandled) {
			return conn, false
		}
		log.Warn("session refused", "route", r.route.Name, "client", r.client.RemoteAddr().String(), "err", err)
		return conn, false
	}
	return conn, true
}

// open runs the route's opening exchange, a panic in it returned as an
// error.
func (r *relay) open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (c wire.Conn, err error) {
	defer panics.Catch("opening exchange", &err)
	return r.route.Frontend.Open(ctx, client, register, dial)
}

// internalErrorMsg is what a client reads when sluice ends its session for
// a panic. The panic itself goes to the log only.
const internalErrorMsg = "sluice: internal error; the session was closed (see sluice's log)"

// openFailer is implemented by front ends that can tell a client, at any
// point of the opening exchange, that sluice ended it for an internal
// error.
type openFailer interface {
	OpenFailure(msg string) []byte
}

// panicked logs and counts a panic recovered in one of the session's
// goroutines.
func (r *relay) panicked(pe *panics.Error) {
	r.srv.countPanic(r.route.Name)
	r.mu.Lock()
	var id uint64
	var client string
	if r.sess != nil {
		id, client = r.sess.ID, r.sess.Info.Client
	} else {
		client = r.client.RemoteAddr().String()
	}
	r.mu.Unlock()
	r.srv.log.Error("session panicked; closing it", "route", r.route.Name, "session", id,
		"client", client, "where", pe.Where, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
}

// relay relays an opened session: it starts the down pump and runs the up
// pump on the calling goroutine, returning when that pump ends or parks.
// The pump that ends last ends the session and calls finished.
func (r *relay) relay(c wire.Conn, finished func()) {
	ctx, cancel := context.WithCancel(context.Background())
	log := r.srv.log
	sess := c.Session
	if c.Up == nil {
		c.Up = wire.Nop{}
	}
	if c.Down == nil {
		c.Down = wire.Nop{}
	}
	r.mu.Lock()
	r.upstream = c.Upstream
	aborted := r.aborted
	r.mu.Unlock()
	if aborted {
		c.Upstream.Close()
	}
	// The wrappers get the sockets themselves (the options of a
	// *net.TCPConn), not the raw-I/O wrapper the opening read through.
	if r.route.WrapClient != nil {
		c.Client = r.route.WrapClient(rawconn.Unwrap(c.Client))
	}
	if r.route.WrapUpstream != nil {
		c.Upstream = r.route.WrapUpstream(rawconn.Unwrap(c.Upstream))
	}
	log.Info("session open", "route", r.route.Name, "session", sess.ID, "client", sess.Info.Client, "user", sess.User(), "database", sess.Database())

	up := newPump(r.srv, r.route, sess, dirUp, c.Up)
	down := newPump(r.srv, r.route, sess, dirDown, c.Down)
	if rem, ok := c.Down.(wire.Remainder); ok && c.Terminated != nil {
		down.fin = &finish{rem: rem}
	}
	rs := &relaying{r: r, c: c, up: up, down: down, cancel: cancel, finished: finished}
	up.rs, down.rs = rs, rs
	if up.rw != nil {
		// A rewriter may wait (admission): its wait ends as soon as either
		// pump ends or the session fails, not only when both have ended.
		// Not a child of ctx: every path that cancels ctx ends the wait
		// first (ended), and a child would cost each session its parent's
		// map of children and done channel.
		up.rwCtx, rs.stopWait = context.WithCancel(context.Background())
	}
	if c.Inject != nil {
		down.inj = c.Inject
		c.Inject.SetWake(rs.kick)
	}
	// An administrator's terminate ends the session as a panic does: the
	// server side closes, the client side stays open for the protocol's
	// message, sent once both pumps have stopped.
	sess.SetHooks(func() int64 {
		n, err := r.unsent()
		if err != nil {
			return 0
		}
		return int64(n)
	}, rs.terminateAny)
	rs.pending.Store(2)
	rs.downRunning.Add(1)
	if r.onLoop(ctx, rs) {
		return
	}
	c = rs.c
	// Each socket is wrapped once: its reads belong to one pump, its
	// writes to the other.
	rclient, rupstream := rawconn.Wrap(c.Client), rawconn.Wrap(c.Upstream)
	up.attach(c.Client, c.Upstream, rclient, rupstream)
	down.attach(c.Upstream, c.Client, rupstream, rclient)
	r.mu.Lock()
	r.pumps = [2]*pump{up, down}
	r.mu.Unlock()
	down.start(ctx, nil)
	// The up pump takes over the calling goroutine, whose stack the
	// opening exchange has grown already: one goroutine fewer to make per
	// session.
	up.runHere(ctx, c.Buffered)
}

// onLoop hands the session to one of the server's event loops if it can
// run there (plain sockets, a binding without emulation on a link that
// admits at once, observers that never block but in admission) and
// reports whether it did; the calling goroutine is then free.
func (r *relay) onLoop(ctx context.Context, rs *relaying) bool {
	c := rs.c
	if r.route.WrapClient != nil || r.route.WrapUpstream != nil || !plainSocket(c.Client) || !plainSocket(c.Upstream) {
		return false
	}
	if rs.up.rw != nil {
		if _, ok := rs.up.rw.(yielder); !ok {
			return false
		}
	}
	if rs.down.rw != nil || !rs.up.loopable() || !rs.down.loopable() {
		return false
	}
	l := r.srv.loops.pick(r.srv)
	if l == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.aborted {
		return false
	}
	cs, err := evloop.Detach(rawconn.Unwrap(c.Client))
	if err != nil {
		return false
	}
	us, err := evloop.Detach(rawconn.Unwrap(c.Upstream))
	if err != nil {
		// c.Client is closed: give the pumps its socket back.
		cc, aerr := cs.Attach()
		if aerr != nil {
			cs.Close()
			return false
		}
		rs.c.Client, r.client = cc, cc
		return false
	}
	if c.Sockets != nil {
		c.Sockets.Set(cs, us)
	}
	// Nothing keeps the runtime's closed connections (their descriptors'
	// state and addresses) while the session is on the loop: an idle
	// session costs less. toPumps gives the session real ones again, and
	// the gate its peer, before anything but Close could use them.
	if sp, ok := rs.up.rw.(peerSetter); ok {
		sp.SetPeer(nil)
	}
	rs.c.Client, rs.c.Upstream = detachedConn{}, detachedConn{}
	r.client, r.upstream = detachedConn{}, detachedConn{}
	ls := &loopSess{l: l, r: r, rs: rs, ctx: ctx, kernel: l.kernelFor(rs, r.route.Protocol)}
	ls.sides[0] = loopSide{ls: ls, sock: cs, rd: rs.up, wr: rs.down}
	ls.sides[1] = loopSide{ls: ls, sock: us, rd: rs.down, wr: rs.up}
	ls.sides[0].peer, ls.sides[1].peer = &ls.sides[1], &ls.sides[0]
	rs.up.ls, rs.down.ls = ls, ls
	rs.up.rewatch()
	rs.down.rewatch()
	rs.up.wr, rs.down.wr = loopWriter{&ls.sides[1]}, loopWriter{&ls.sides[0]}
	rs.up.enlistCtx(ctx)
	rs.down.enlistCtx(ctx)
	if rs.up.rwCtx != nil {
		rs.up.rwCtx = wire.WithYield(rs.up.rwCtx, ls.yield)
	}
	r.pumps = [2]*pump{rs.up, rs.down}
	r.ls = ls
	r.srv.loops.taken.Add(1)
	l.add(ls)
	return true
}

// plainSocket reports whether c is a socket the loop can take.
func plainSocket(c net.Conn) bool {
	switch rawconn.Unwrap(c).(type) {
	case *net.TCPConn, *net.UnixConn, *rawconn.TCPSocket:
		return true
	}
	return false
}

// relaying is a session whose pumps run. Its methods are called by the
// pumps as they end; the one that ends last ends the session.
type relaying struct {
	r        *relay
	c        wire.Conn
	up, down *pump
	cancel   context.CancelFunc // ends the pumps' context
	stopWait context.CancelFunc // ends the up pump's rewriter context (pump.rwCtx); nil without one
	finished func()             // the caller of serve's, called once at the end

	errOnce     sync.Once
	firstErr    error          // set once, through errOnce; read once both pumps have ended
	fatal       atomic.Bool    // the up pump is sending the client a protocol error
	terminated  atomic.Bool    // sluice ended the session (Session.Terminate); terminate runs once
	terminating atomic.Bool    // Session.Terminate was called: the loop acts on it before its next read
	reason      atomic.Uint32  // why, a session.EndReason; stored before terminated
	pending     atomic.Int32   // pumps still running
	downRunning sync.WaitGroup // the down pump, until it ends
	downEnded   atomic.Bool    // the down pump has ended (set before downRunning is done)

	// engaged is the link on which the session has a statement above the
	// Low class marked running (link.Link.Engage), nil for none. Read
	// without engageMu on each chunk; changed, and Engage called, under
	// it, so that each link sees its ons and offs in pairs and in order.
	engaged  atomic.Pointer[link.Link]
	engageMu sync.Mutex
}

// engage marks on link l that a statement of the session above the Low
// class runs (on), or that none does (l is then ignored), as the pump
// that saw the change sends its chunk; a mark moves with the session's
// link.
func (rs *relaying) engage(l *link.Link, on bool) {
	if cur := rs.engaged.Load(); on && cur == l || !on && cur == nil {
		return
	}
	rs.engageMu.Lock()
	defer rs.engageMu.Unlock()
	cur := rs.engaged.Load()
	if on && cur == l || !on && cur == nil {
		return
	}
	now := rs.r.srv.clk.Now()
	if cur != nil {
		cur.Engage(now, false)
	}
	if on {
		l.Engage(now, true)
		rs.engaged.Store(l)
	} else {
		rs.engaged.Store(nil)
	}
}

// kick is the front end's Injector wake (see pump.kick): the loop runs
// the injection for a session it relays.
func (rs *relaying) kick() {
	if !rs.r.onLoopDo(cmdKick, nil) {
		rs.down.kick()
	}
}

// terminateAny is terminate from any goroutine but a loop's runner, for
// reason: a session on a loop is handed to its pumps first, by the
// runner, and terminateAny returns once it has been. So when it returns
// no request of the client goes on to the server: not through the
// kernel fast path, which relays without the runner until the runner
// holds the pair, nor through the pumps, which have stopped.
func (rs *relaying) terminateAny(reason session.EndReason) {
	rs.reason.Store(uint32(reason))
	rs.terminating.Store(true)
	ran := make(chan struct{})
	if rs.r.onLoopDo(cmdTerminate, ran) {
		<-ran
		return
	}
	rs.terminate()
}

// stop comes before every close or read deadline of a socket below, so
// that a parked pump sees it (see pump.stop).
func (rs *relaying) stop() {
	rs.up.stop()
	rs.down.stop()
}

// endWait ends a wait of the up pump's rewriter: the session is ending.
func (rs *relaying) endWait() {
	if rs.stopWait != nil {
		rs.stopWait()
	}
}

// terminate ends the session for an administrator: the client reads
// wire.Conn.Terminated once both pumps have stopped.
func (rs *relaying) terminate() {
	c := rs.c
	if rs.terminated.Swap(true) {
		return
	}
	// fatal before anything ends a pump: a pump that ends sooner (a
	// rewriter's wait, ended by endWait) must leave the client open.
	rs.fatal.Store(true)
	rs.endWait()
	if f := rs.down.fin; f != nil {
		// The down pump forwards the rest of the server's message in
		// flight, then ends (pump.finishChunk); the past deadline wakes it
		// from its read. The server side closes when it has ended.
		f.on.Store(true)
		rs.stop()
		c.Upstream.SetReadDeadline(clock.LongAgo)
		c.Client.SetReadDeadline(clock.LongAgo)
		return
	}
	rs.stop()
	c.Upstream.Close()
	c.Client.SetReadDeadline(clock.LongAgo)
}

// finishing reports whether the down pump is still forwarding the rest of
// the server's message after a terminate: nothing closes the server side
// until it has ended.
func (rs *relaying) finishing() bool {
	f := rs.down.fin
	return f != nil && f.on.Load() && !rs.downEnded.Load()
}

// fail ends the session for err.
func (rs *relaying) fail(err error) {
	c := rs.c
	rs.endWait()
	rs.errOnce.Do(func() { rs.firstErr = err })
	rs.stop()
	if rs.finishing() && panics.As(err) == nil {
		// The up pump ended for the terminate; the down pump closes
		// nothing until it has finished the message in flight.
		return
	}
	if panics.As(err) != nil {
		// Keep the client socket open for the protocol's error, sent once
		// both pumps have stopped (fatal is set before the upstream
		// closes, so the down pump's failure leaves it); a read deadline
		// in the past stops the up pump's read.
		rs.fatal.Store(true)
		c.Upstream.Close()
		c.Client.SetReadDeadline(clock.LongAgo)
		return
	}
	c.Upstream.Close()
	if !rs.fatal.Load() {
		c.Client.Close()
	}
}

// ended is called once by each pump when it ends, err nil at the end of
// its stream.
func (rs *relaying) ended(d direction, err error) {
	c := rs.c
	rs.endWait()
	if d == dirDown {
		rs.downEnded.Store(true)
		if errors.Is(err, errFinished) {
			// The message in flight has gone whole; end the session as a
			// terminate without finishing would have.
			rs.c.Upstream.Close()
			err = nil
		}
		if err != nil {
			rs.fail(err)
		}
		rs.downRunning.Done()
	} else if err != nil {
		var f *wire.Fatal
		if errors.As(err, &f) && panics.As(err) == nil {
			// Stop the server side first so nothing else is written to the
			// client, then send the client the protocol's error.
			rs.fatal.Store(true)
			rs.stop()
			c.Upstream.Close()
			c.Client.SetWriteDeadline(clock.SocketDeadline(time.Second))
			rs.downRunning.Wait()
			if len(f.Reply) > 0 {
				c.Client.SetWriteDeadline(clock.SocketDeadline(time.Second))
				c.Client.Write(f.Reply)
			}
			rs.fatal.Store(false)
		}
		rs.fail(err)
	}
	if rs.pending.Add(-1) > 0 {
		return
	}
	rs.engage(nil, false)
	var perr error
	func() {
		defer panics.Catch("session", &perr)
		rs.r.finish(c, rs.up, rs.down, rs.firstErr, rs.terminated.Load(), session.EndReason(rs.reason.Load()))
	}()
	if pe := panics.As(perr); pe != nil {
		rs.r.crashed(pe)
	}
	rs.r.mu.Lock()
	kp := rs.r.kpair
	rs.r.kpair = nil
	rs.r.mu.Unlock()
	if kp != nil {
		kp.Close() // the sockets are closed
	}
	rs.endWait()
	rs.cancel()
	rs.finished()
}

// finish ends a session whose pumps have both ended, firstErr the first
// error of either; terminated when sluice ended it, for reason.
func (r *relay) finish(c wire.Conn, up, down *pump, firstErr error, terminated bool, reason session.EndReason) {
	log := r.srv.log
	sess := c.Session
	pe := panics.As(firstErr)
	if pe != nil {
		r.panicked(pe)
	}
	if pe != nil && c.InternalError != nil {
		// Both pumps have stopped (the panic closed the server side), so
		// the protocol's error is the last thing the client reads.
		if reply := r.internalError(c); len(reply) > 0 {
			c.Client.SetWriteDeadline(clock.SocketDeadline(time.Second))
			c.Client.Write(reply)
		}
	}
	if pe == nil && terminated && c.Terminated != nil {
		c.Client.SetWriteDeadline(clock.SocketDeadline(time.Second))
		c.Client.Write(c.Terminated(reason))
	}
	c.Client.Close()
	c.Upstream.Close()
	if c.Close != nil {
		r.closeConn(c)
	}
	up.close()
	down.close()
	now := r.srv.clk.Now()
	sess.Close(now)
	attrs := []any{"route", r.route.Name, "session", sess.ID, "user", sess.User(),
		"bytes_up", sess.BytesUp(), "bytes_down", sess.BytesDown(),
		"statements", sess.Statements(), "duration", now.Sub(r.start).Round(time.Microsecond).String()}
	if terminated {
		log.Info("session terminated by an administrator", attrs...)
		return
	}
	if firstErr != nil && !isClosedErr(firstErr) {
		log.Warn("session closed", append(attrs, "err", firstErr)...)
		return
	}
	log.Info("session closed", attrs...)
}

// internalError builds c's internal-error reply; a panic while building it
// sends nothing.
func (r *relay) internalError(c wire.Conn) (reply []byte) {
	defer func() {
		if recover() != nil {
			reply = nil
		}
	}()
	return c.InternalError(internalErrorMsg)
}

// closeConn calls the front end's Close, a panic in it logged and counted.
func (r *relay) closeConn(c wire.Conn) {
	var err error
	func() {
		defer panics.Catch("session close", &err)
		c.Close()
	}()
	if pe := panics.As(err); pe != nil {
		r.panicked(pe)
	}
}

// isClosedErr reports whether err is the ordinary end of a connection.
func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled)
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/evloop"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/panics"
	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/wire"
)

// maxEvents is how many events a loop takes per wait.
const maxEvents = 128

// errToPumps is pump.send's error on the loop when the chunk needs what
// only the pumps do (a delay line, a link that may make it wait); the
// chunk is kept in pump.unsent and the session goes to its pumps.
var errToPumps = errors.New("the session needs its pumps")

// loops are a server's event loops, started on first use. Safe for
// concurrent use.
type loops struct {
	n    int // loops to run; 0: none
	once sync.Once
	ls   []*loop // set once, by once
	next atomic.Uint32
	// kernel is the loop that relays in the kernel (the first), set once
	// by once when the server has a fast path; nil until then and without
	// one. Read by Server.SyncRegistry from any goroutine.
	kernel atomic.Pointer[loop]

	stopOnce sync.Once

	taken  atomic.Uint64 // sessions a loop has relayed
	handed atomic.Uint64 // of those, sessions handed to their pumps before they ended
}

// pick returns a loop for a new session, round robin, or nil when the
// server runs none (or they could not start).
func (ls *loops) pick(s *Server) *loop {
	if ls.n <= 0 {
		return nil
	}
	ls.once.Do(func() {
		for i := range ls.n {
			l, err := newLoop(s)
			if err != nil {
				s.log.Warn("event loop not started; sessions use their pumps", "err", err)
				break
			}
			if i == 0 && s.kernel != nil {
				l.openJournal()
				if l.journal != nil {
					ls.kernel.Store(l)
				}
			}
			ls.ls = append(ls.ls, l)
		}
	})
	if len(ls.ls) == 0 {
		return nil
	}
	return ls.ls[int(ls.next.Add(1))%len(ls.ls)]
}

// stop ends the loops once they hold no session (the server has closed
// every session first).
func (ls *loops) stop() {
	ls.once.Do(func() {}) // none may start after this
	ls.stopOnce.Do(func() {
		for _, l := range ls.ls {
			l.stop()
		}
	})
}

// loop is one event loop: a Poller, a read buffer its sessions share, and
// the sessions it relays (see the package comment). The fields after mu's
// group belong to the runner, the one goroutine that runs the loop at a
// time (run; yield hands the loop to a new one).
type loop struct {
	srv  *Server
	poll *evloop.Poller
	done chan struct{} // closed when the loop has stopped

	mu       sync.Mutex
	queue    []*loopSess     // guarded by mu; handed to the loop, not yet registered
	cmds     []loopCmd       // guarded by mu; requests from other goroutines, in order
	running  bool            // guarded by mu; a runner exists (it ends when the loop holds no session)
	stopping bool            // guarded by mu
	syncs    []chan struct{} // guarded by mu; Server.SyncRegistry's, each closed once the journal is drained

	bufp   *[]byte // the read buffer, from readPool or, after a paired socket's read, wholeReads (yield leaves it to the yielding chunk)
	events []unix.EpollEvent
	sides  []*loopSide // by descriptor
	count  int         // sessions registered

	journal  *fastpath.Journal    // the kernel's, on the first loop of a server with one; else nil
	byCookie map[uint64]*loopSide // paired sockets by cookie, for the journal's records
	later    []laterAct           // drainJournal's, reused
}

// loopCmd is a request to the runner about one of its sessions.
type loopCmd struct {
	ls   *loopSess
	kind cmdKind
	ran  chan struct{} // closed once the runner has run it; nil: nobody waits
}

type cmdKind uint8

const (
	cmdKick      cmdKind = iota // the front end has answers to inject (pump.kick)
	cmdTerminate                // an administrator ends the session (relaying.terminate)
	cmdAbort                    // the server closes the session (relay.abort)
	cmdHold                     // a statement of the session was penalised, or a shard linked to it: back from the kernel (Server.toUserSpace)
)

// loopSess is a session relayed by a loop. Its fields are the runner's
// while the session is on the loop (on), then its pumps'.
type loopSess struct {
	l       *loop
	r       *relay
	rs      *relaying
	ctx     context.Context // the pumps'
	sides   [2]loopSide     // the client's, the server's
	on      bool            // registered and relayed by the loop
	ended   [2]bool         // by direction: ended on the loop (rs.ended called)
	inChunk bool            // the runner is in the up pump's chunk (yield may hand over)
	yielded bool            // yield ran: the goroutine that ran it owns the up pump
	yerr    error           // the chunk's error, after yield
	keep    *[]byte         // the loop's read buffer the chunk that yielded was in; back to wholeReads in carryOn
	kernel  *kernelSess     // the fast path's state; nil when the kernel cannot relay the session
	leaving bool            // toPumps is handing the session to its pumps
}

// loopSide is one socket of a loopSess.
type loopSide struct {
	ls     *loopSess
	sock   *evloop.Socket
	rd     *pump // the pump that reads this socket
	wr     *pump // the pump that writes to it
	peer   *loopSide
	pbuf   *[]byte // the buffer of pend, from readPool; nil while nothing is pending
	pend   []byte  // bytes accepted for this socket that its send buffer did not take; pend[off:] remain
	off    int     //
	shut   bool    // end the write side once pend is written
	eof    bool    // the read side has ended
	paused bool    // not read until the peer's pending bytes are written
	rdhup  bool    // the peer has ended its write side
	// drain: s's end of stream waits for the bytes the kernel relayed
	// from s to be queued on its peer (s is not read; the peer's
	// writability is watched)
	drain  bool
	events uint32 // registered
}

func (s *loopSide) pending() bool { return s.pbuf != nil }

func newLoop(s *Server) (*loop, error) {
	p, err := evloop.NewPoller()
	if err != nil {
		return nil, err
	}
	return &loop{srv: s, poll: p, done: make(chan struct{}), bufp: readPool.Get(),
		events: make([]unix.EpollEvent, maxEvents)}, nil
}

// stop waits for the runner to end, once the loop holds no session, and
// releases the poller. Called once; no session is added afterwards.
func (l *loop) stop() {
	l.mu.Lock()
	l.stopping = true
	running := l.running
	l.mu.Unlock()
	if running {
		l.poll.Wake()
		<-l.done
	}
	l.poll.Close()
	if l.journal != nil {
		l.journal.Close()
	}
	wholeReads.Put(l.bufp)
}

// add hands the loop a session, starting a runner if none runs; r.mu is
// held (lock order: relay.mu, then loop.mu), so a command about the
// session queues after it.
func (l *loop) add(ls *loopSess) {
	l.mu.Lock()
	l.queue = append(l.queue, ls)
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		go l.run()
		return
	}
	l.poll.Wake()
}

// post queues a command for the runner, ran (nil or not) closed once
// it has run. Safe from any goroutine, the runner included.
func (l *loop) post(ls *loopSess, k cmdKind, ran chan struct{}) {
	l.mu.Lock()
	l.cmds = append(l.cmds, loopCmd{ls: ls, kind: k, ran: ran})
	l.mu.Unlock()
	l.poll.Wake()
}

// run is the runner. It returns when the loop holds no session, or when
// yield has handed the loop to a new runner, this goroutine then carrying
// on as the up pump of the session that yielded.
func (l *loop) run() {
	if l.woken() {
		return // the first registration yielded, or nothing was queued
	}
	for {
		n, woken := l.poll.WaitReady(l.events)
		for i := range n {
			ev := &l.events[i]
			d := evloop.Data(ev)
			if d == journalData {
				l.drainJournal()
				continue
			}
			if d >= uint64(len(l.sides)) || l.sides[d] == nil {
				continue
			}
			if ls := l.ready(l.sides[d], ev.Events); ls != nil {
				ls.carryOn() // no longer the runner
				return
			}
		}
		// After the batch: a session registered now may take the
		// descriptor number of one closed in it.
		if woken {
			l.poll.Drain()
		}
		if (woken || l.count == 0) && l.woken() {
			return
		}
	}
}

// woken registers the sessions handed over and runs the commands posted.
// It reports whether the runner is done: a session yielded (the goroutine
// has carried on as its up pump, see run), or the loop holds no session
// and nothing is queued, when the runner ends.
func (l *loop) woken() (done bool) {
	for {
		l.mu.Lock()
		var ls *loopSess
		var cmd loopCmd
		have := false
		switch {
		case len(l.queue) > 0:
			ls, l.queue[0] = l.queue[0], nil
			l.queue = l.queue[1:]
		case len(l.cmds) > 0:
			cmd, l.cmds[0] = l.cmds[0], loopCmd{}
			l.cmds = l.cmds[1:]
			have = true
		}
		syncs := l.syncs
		l.syncs = nil
		// Not idle while a sync waits: the runner drains the journal
		// for it first, and gives the loop up (running false) only
		// once it will touch nothing of the loop's again; from then
		// on the journal is the next runner's, or stop's to close.
		idle := ls == nil && !have && syncs == nil && l.count == 0
		stopping := l.stopping
		if idle {
			l.running = false
		}
		l.mu.Unlock()
		if syncs != nil {
			l.drainJournal()
			for _, c := range syncs {
				close(c)
			}
		}
		switch {
		case ls != nil:
			if y := l.register(ls); y != nil {
				y.carryOn()
				return true
			}
		case have:
			l.command(cmd)
			if cmd.ran != nil {
				close(cmd.ran)
			}
		case idle:
			if stopping {
				close(l.done)
			}
			return true
		case syncs != nil:
			// Look again: the loop may be idle now.
		default:
			return false
		}
	}
}

// register starts relaying ls on the loop, beginning with the client
// bytes the opening exchange read past its end.
func (l *loop) register(ls *loopSess) *loopSess {
	ls.on = true
	l.count++
	for i := range ls.sides {
		s := &ls.sides[i]
		fd := s.sock.FD()
		for fd >= len(l.sides) {
			l.sides = append(l.sides, nil)
		}
		l.sides[fd] = s
		s.events = evloop.In | evloop.RDHup
		if err := l.poll.Add(fd, s.events, uint64(fd)); err != nil {
			l.sides[fd] = nil
			s.events = 0
			l.failed(ls, s.rd, err)
			return nil
		}
	}
	if b := ls.rs.c.Buffered; len(b) > 0 {
		if l.chunk(ls, ls.rs.up, b) {
			return ls
		}
	}
	if ls.on {
		l.update(ls)
	}
	return nil
}

// command runs one request about ls; a session no longer on the loop gets
// what its pumps would.
func (l *loop) command(c loopCmd) {
	ls := c.ls
	switch c.kind {
	case cmdKick:
		if !ls.on {
			ls.rs.down.kick()
			return
		}
		if ls.ended[dirDown] {
			return
		}
		down := ls.rs.down
		err := catch(dirDown.pump(), func() error { return down.inject(ls.ctx) })
		switch {
		case errors.Is(err, errToPumps):
			l.toPumps(ls, nil)
		case err != nil:
			l.failed(ls, down, err)
		default:
			l.update(ls)
		}
	case cmdTerminate:
		if ls.on {
			l.toPumps(ls, nil)
		}
		ls.rs.terminate()
	case cmdAbort:
		if ls.on {
			l.toPumps(ls, nil)
		}
		ls.r.abortPumps()
	case cmdHold:
		if !ls.on {
			return
		}
		l.drainJournal()
		if ls.on && !kernelOK(ls) {
			if err := l.hold(ls); err != nil {
				l.failed(ls, ls.rs.up, err)
			}
		}
	}
}

// catch runs f, a panic in it returned as an error.
func catch(where string, f func() error) (err error) {
	defer panics.Catch(where, &err)
	return f()
}

// runChunk runs p.chunk(b), a panic in it returned as an error. It
// allocates nothing (a closure passed to catch would).
func (l *loop) runChunk(ls *loopSess, p *pump, b []byte) (err error) {
	defer panics.Catch(p.dir.pump(), &err)
	return p.chunk(ls.ctx, b)
}

// ready handles the events reported for s. It returns s's session when
// the goroutine has yielded the loop (see run).
func (l *loop) ready(s *loopSide, ev uint32) *loopSess {
	ls := s.ls
	if ev&(evloop.RDHup|evloop.Hup) != 0 {
		s.rdhup = true
	}
	if ev&(evloop.Out|evloop.Err|evloop.Hup) != 0 && s.pending() {
		l.flush(s)
		if !ls.on {
			return nil
		}
	}
	if s.peer.drain && !s.pending() {
		if y := l.eof(s.peer); y != nil {
			return y
		}
		if !ls.on {
			return nil
		}
	}
	if !s.paused && !s.eof && ev&(evloop.In|evloop.RDHup|evloop.Hup|evloop.Err) != 0 {
		if y := l.readable(s); y != nil {
			return y
		}
	}
	if ls.on {
		l.update(ls)
	}
	return nil
}

// readable reads s until a short read (or, once its peer has ended, to
// the end of the stream), handing each chunk to the pump that reads it.
func (l *loop) readable(s *loopSide) *loopSess {
	ls, p := s.ls, s.rd
	for ls.on && !s.paused {
		if ls.rs.terminating.Load() {
			// A terminate asked for before this read (its command may
			// still be queued) takes effect first: what the server
			// sends after it, such as the error of the statement
			// cancelled with it, goes through the pumps' finishing
			// path, never to the client.
			l.command(loopCmd{ls: ls, kind: cmdTerminate})
			return nil
		}
		paired := ls.kernel != nil && ls.kernel.pair != nil
		if paired {
			// A paired socket is read whole (wholeReads): the loop's
			// buffer is traded for one sized to what the socket holds.
			l.bufp = wholeReads.Fit(uintptr(s.sock.FD()), l.bufp)
		}
		buf := *l.bufp
		n, err := s.sock.Read(buf)
		if paired {
			// What the kernel relayed before the bytes just read (or
			// the end of the stream) is in the journal by now, and
			// nothing after them on this socket: it is observed first.
			l.drainJournal()
			if !ls.on {
				return nil
			}
		}
		switch {
		case err == unix.EAGAIN:
			return nil
		case err != nil:
			l.failed(ls, p, fmt.Errorf("%s read: %w", p.dir, os.NewSyscallError("read", err)))
			return nil
		case n == 0:
			return l.eof(s)
		}
		if l.chunk(ls, p, buf[:n]) {
			return ls
		}
		if s.peer.pending() {
			s.paused = true
			return nil
		}
		if n < len(buf) && !s.rdhup {
			return nil
		}
	}
	return nil
}

// chunk runs p's chunk on the loop and handles its outcome. It reports
// whether the chunk yielded the loop (the goroutine then owns the
// session's up pump, with the chunk's error in ls.yerr).
func (l *loop) chunk(ls *loopSess, p *pump, b []byte) (yielded bool) {
	ls.inChunk = p.dir == dirUp
	err := l.runChunk(ls, p, b)
	if ls.yielded {
		ls.yerr = err
		return true
	}
	ls.inChunk = false
	switch {
	case errors.Is(err, errToPumps):
		l.toPumps(ls, nil)
	case err != nil:
		l.failed(ls, p, err)
	}
	return false
}

// eof ends s's direction on the loop: what its rewriter holds back goes
// on, then the peer's write side ends once its pending bytes are written.
func (l *loop) eof(s *loopSide) *loopSess {
	ls, p := s.ls, s.rd
	done, read, err := l.drained(s)
	if err != nil {
		l.failed(ls, p, err)
		return nil
	}
	if !done {
		s.drain = !read
		return nil
	}
	s.drain = false
	s.eof = true
	if p.rw != nil {
		if l.chunk(ls, p, nil) {
			return ls
		}
		if !ls.on {
			return nil
		}
	}
	if s.peer.pending() {
		s.peer.shut = true
		return nil
	}
	l.endDir(s.peer)
	return nil
}

// endDir ends the direction that writes to d, whose pending bytes are
// all written: d's write side ends, and the relay is told; the session
// leaves the loop once both directions have ended.
func (l *loop) endDir(d *loopSide) {
	ls, p := d.ls, d.wr
	d.sock.Shutdown()
	d.shut = false
	ls.ended[p.dir] = true
	if ls.ended[dirUp] && ls.ended[dirDown] {
		l.remove(ls)
	}
	ls.rs.ended(p.dir, nil)
}

// flush writes s's pending bytes; once they are all written it ends s's
// write side if asked, and lets the paused peer be read again.
func (l *loop) flush(s *loopSide) {
	if ok, err := l.settled(s); !ok {
		if err != nil {
			l.failed(s.ls, s.wr, err)
		}
		return
	}
	wrote := 0
	for s.off < len(s.pend) {
		n, err := s.sock.Write(s.pend[s.off:])
		s.off += n
		wrote += n
		if err == unix.EAGAIN {
			if werr := l.written(s, wrote); werr != nil {
				l.failed(s.ls, s.wr, werr)
			}
			return
		}
		if err != nil {
			l.failed(s.ls, s.wr, fmt.Errorf("%s write: %w", s.wr.dir, os.NewSyscallError("write", err)))
			return
		}
	}
	s.release() // before written, which may resume the pair once nothing is pending
	if err := l.written(s, wrote); err != nil {
		l.failed(s.ls, s.wr, err)
		return
	}
	if s.shut {
		l.endDir(s)
		return
	}
	// Level-triggered: the next wait reports what the peer has.
	s.peer.paused = false
}

// release gives back s's pending buffer, all of it written.
func (s *loopSide) release() {
	*s.pbuf = s.pend[:cap(s.pend)]
	readPool.Put(s.pbuf)
	s.pbuf, s.pend, s.off = nil, nil, 0
}

// update registers, level-triggered, the events ls's sockets wait for.
func (l *loop) update(ls *loopSess) {
	for i := range ls.sides {
		s := &ls.sides[i]
		var want uint32
		if !s.paused && !s.eof && !s.drain {
			want = evloop.In | evloop.RDHup
		}
		if s.pending() || s.peer.drain {
			want |= evloop.Out
		}
		if want != s.events {
			s.events = want
			fd := s.sock.FD()
			if err := l.poll.Mod(fd, want, uint64(fd)); err != nil {
				l.failed(ls, s.rd, err)
				return
			}
		}
	}
}

// unregister takes ls's sockets out of the loop.
func (l *loop) unregister(ls *loopSess) {
	ls.on = false
	l.count--
	for i := range ls.sides {
		s := &ls.sides[i]
		fd := s.sock.FD()
		if fd < len(l.sides) && l.sides[fd] == s {
			l.sides[fd] = nil
			l.poll.Del(fd)
		}
	}
}

// remove ends a session whose directions have both ended on the loop.
func (l *loop) remove(ls *loopSess) {
	ls.leaving = true
	if err := l.leaveKernel(ls); err != nil {
		l.srv.log.Debug("kernel fast path: leave", "session", ls.rs.c.Session.ID, "err", err)
	}
	l.unregister(ls)
	if k := ls.kernel; k != nil && k.pair != nil {
		defer k.pair.Close() // once the sockets are closed
	}
	ls.r.mu.Lock()
	ls.r.ls = nil
	ls.r.mu.Unlock()
	for i := range ls.sides {
		s := &ls.sides[i]
		if s.pbuf != nil {
			s.release()
		}
		s.sock.Close()
	}
}

// failed ends p's direction with err: the session goes to its pumps, the
// other direction's pump runs on until the relay's failure path stops it.
func (l *loop) failed(ls *loopSess, p *pump, err error) {
	if !ls.on {
		return
	}
	l.toPumps(ls, p)
	ls.ended[p.dir] = true
	go ls.rs.ended(p.dir, err)
}

// toPumps hands ls to its pumps: its sockets leave the loop and become
// the runtime's again, each pump that has not ended (other than skip)
// starts on a goroutine of its own, from where the loop left it (the
// bytes the loop accepted but could not write yet, a chunk the link or
// the emulation must handle), and the relay's paths that touch sockets
// (terminate, abort, UnsentBytes) see the new ones. Called by the runner,
// or by yield on the goroutine that runs it.
func (l *loop) toPumps(ls *loopSess, skip *pump) {
	l.srv.loops.handed.Add(1)
	ls.leaving = true
	kerr := l.leaveKernel(ls)
	if k := ls.kernel; k != nil && k.pair != nil {
		ls.r.mu.Lock()
		ls.r.kpair = k.pair
		ls.r.mu.Unlock()
		// Each pump waits, on its own goroutine, for what the kernel
		// redirected its way to be queued before it writes.
		ls.rs.up.settle, ls.rs.down.settle = k.pair, k.pair
	}
	l.unregister(ls)
	if kerr != nil {
		// The session is ending (its context is done) or the maps failed;
		// its pumps find out which.
		l.srv.log.Warn("kernel fast path: pause", "session", ls.rs.c.Session.ID, "err", kerr)
	}
	rs := ls.rs
	var conns [2]net.Conn
	var aerr error
	for i := range ls.sides {
		c, err := ls.sides[i].sock.Attach()
		if err != nil {
			aerr = errors.Join(aerr, err)
			ls.sides[i].sock.Close()
		}
		conns[i] = c
	}
	if aerr != nil {
		ls.r.mu.Lock()
		ls.r.ls = nil
		ls.r.mu.Unlock()
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		for _, p := range [2]*pump{rs.up, rs.down} {
			if p != skip && !ls.ended[p.dir] {
				ls.ended[p.dir] = true
				go rs.ended(p.dir, aerr)
			}
		}
		return
	}
	client, upstream := conns[0], conns[1]
	if k := ls.kernel; k != nil && k.pair != nil {
		k.pair.Reseat(rawconn.ControllerOf(client), rawconn.ControllerOf(upstream))
	}
	rclient, rupstream := rawconn.Wrap(client), rawconn.Wrap(upstream)
	rs.up.attach(client, upstream, rclient, rupstream)
	rs.down.attach(upstream, client, rupstream, rclient)
	rs.up.rewatch()
	rs.down.rewatch()
	for i := range ls.sides {
		s := &ls.sides[i]
		if s.pbuf != nil {
			k := copy(s.pend, s.pend[s.off:]) // from the start: readPool.Put needs the whole capacity
			*s.pbuf = s.pend[:k]
			s.wr.owed, s.wr.owedShut = s.pbuf, s.shut
			s.pbuf, s.pend, s.off = nil, nil, 0
		}
	}
	if sp, ok := rs.up.rw.(peerSetter); ok {
		sp.SetPeer(client)
	}
	if rs.c.Sockets != nil {
		rs.c.Sockets.Set(rawconn.ControllerOf(client), rawconn.ControllerOf(upstream))
	}
	r := ls.r
	r.mu.Lock()
	rs.c.Client, rs.c.Upstream = client, upstream
	r.client, r.upstream = client, upstream
	r.ls = nil
	r.mu.Unlock()
	for _, p := range [2]*pump{rs.up, rs.down} {
		if p == skip || ls.ended[p.dir] || ls.yielded && p == rs.up {
			continue
		}
		p.enlist(ls.ctx)
		go p.proceed(nil)
	}
}

// detachedConn stands for a socket an event loop holds: the runtime's
// connection, closed by evloop.Detach, is dropped so that an idle session
// does not keep it. Every method but Close fails with net.ErrClosed.
type detachedConn struct{}

func (detachedConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (detachedConn) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (detachedConn) Close() error                     { return nil }
func (detachedConn) LocalAddr() net.Addr              { return detachedAddr{} }
func (detachedConn) RemoteAddr() net.Addr             { return detachedAddr{} }
func (detachedConn) SetDeadline(time.Time) error      { return net.ErrClosed }
func (detachedConn) SetReadDeadline(time.Time) error  { return net.ErrClosed }
func (detachedConn) SetWriteDeadline(time.Time) error { return net.ErrClosed }

// detachedAddr is a detachedConn's address.
type detachedAddr struct{}

func (detachedAddr) Network() string { return "detached" }
func (detachedAddr) String() string  { return "detached" }

// peerSetter is an up Rewriter the loop may run (see yielder): it checks
// its client through the socket it was last given.
type peerSetter interface {
	SetPeer(client net.Conn)
}

// yielder is an up Rewriter the loop may run: it blocks only in
// wire.Gate.Wait, which yields first under the loop's context
// (wire.WithYield).
type yielder interface {
	wire.Rewriter
	peerSetter
}

// yield is the up Rewriter's wire.WithYield hook: the chunk is about to
// wait (admission). On the loop, the session goes to its pumps, a new
// runner takes the loop over, and the calling goroutine, no longer the
// runner, waits and carries on as the session's up pump (see run). Off
// the loop it does nothing.
func (ls *loopSess) yield() {
	if !ls.inChunk {
		return
	}
	ls.inChunk = false
	ls.yielded = true
	l := ls.l
	l.toPumps(ls, nil)
	// The chunk being rewritten may be in the read buffer: it stays with
	// this goroutine, and the new runner reads into another.
	ls.keep, l.bufp = l.bufp, readPool.Get()
	go l.run() // it looks at what was queued meanwhile first
}

// carryOn is the up pump of a session that yielded, on the goroutine
// that was the loop's runner: its chunk is done; it goes on reading.
func (ls *loopSess) carryOn() {
	wholeReads.Put(ls.keep)
	ls.keep = nil
	up := ls.rs.up
	if ls.yerr != nil {
		ls.rs.ended(dirUp, ls.yerr)
		return
	}
	up.enlist(ls.ctx)
	up.proceed(nil)
}

// loopWriter is a pump's writer on the loop: it writes what the socket
// takes now and keeps the rest as the side's pending bytes (the reading
// side then pauses), so it never blocks.
type loopWriter struct{ s *loopSide }

func (w loopWriter) Write(b []byte) (int, error) {
	s := w.s
	if len(b) == 0 {
		return 0, nil
	}
	n := 0
	ok, err := s.ls.l.settled(s)
	if err != nil {
		return 0, err
	}
	if ok && !s.pending() {
		var err error
		n, err = s.sock.Write(b)
		if err != nil && err != unix.EAGAIN {
			return n, os.NewSyscallError("write", err)
		}
		if n == len(b) {
			return n, s.ls.l.written(s, n)
		}
		if n > 0 {
			if err := s.ls.l.written(s, n); err != nil {
				return n, err
			}
		}
	}
	if s.pbuf == nil {
		s.pbuf = readPool.Get()
		s.pend = (*s.pbuf)[:0]
	} else if s.off > 0 {
		k := copy(s.pend, s.pend[s.off:])
		s.pend, s.off = s.pend[:k], 0
	}
	s.pend = append(s.pend, b[n:]...)
	return len(b), nil
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

type direction uint8

const (
	dirUp   direction = iota // client to server
	dirDown                  // server to client
)

func (d direction) String() string {
	if d == dirUp {
		return "up"
	}
	return "down"
}

// pump names d's pump, as a recovered panic names where it happened.
func (d direction) pump() string {
	if d == dirUp {
		return "up pump"
	}
	return "down pump"
}

// readBuf is the size of a pump's read buffer, in bytes. A pump takes its
// buffer from readPool only when its socket has bytes to read and gives it
// back once the chunk has been handed on, so an idle pump holds none.
// A reader that cannot wait without a buffer (TLS) starts with one of
// smallBuf bytes of its own, so that idle TLS sessions cost little, and
// moves to a pooled one the first time a read fills it.
const (
	readBuf  = 32 << 10
	smallBuf = 4 << 10
)

// readPool holds the pumps' read buffers, shared by every server in the
// process (a buffer holds no state between reads).
var readPool = rawconn.NewPool(readBuf)

// pump moves one direction of one session. Its fields are owned by the
// goroutine running run.
type pump struct {
	srv   *Server
	route *Route
	sess  *session.Session
	src   net.Conn
	dst   net.Conn
	rd    io.Reader     // src, with raw reads on a plain socket (rawconn)
	prd   *rawconn.Conn // rd, if it reads into pooled buffers (a plain socket); else nil
	wr    io.Writer     // dst, with raw writes on a plain socket (rawconn)
	obs   wire.Observer
	rw    wire.Rewriter   // obs as a Rewriter, or nil
	inj   wire.Injector   // down pump: the front end's own answers to the client, or nil
	rwCtx context.Context // up pump: Rewrite's context, done when either pump ends; nil: the pump's

	version uint64     // policy version of the current binding
	lnk     *link.Link // link of the current flow
	pool    string     // pool of the current flow
	flow    *link.Flow
	detach  func()     // ends the socket watcher's watch of src and dst for flow; nil: none
	em      *emulation // nil until a binding carries emulation or a chunk must wait

	ls     *loopSess      // the loop that runs this pump's chunks; nil once the pump runs itself (attach)
	settle *fastpath.Pair // set when the session left the kernel: wait for its redirects to dst to be queued before the first write
	owed   *[]byte        // from readPool: bytes the loop accepted for dst and could not write yet; written first
	unsent *[]byte        // from readPool: a chunk the loop observed and rewrote but could not send (errToPumps)

	ctx context.Context // set by start
	rs  *relaying       // the session, told when the pump ends
	fin *finish         // down pump: the terminate's finishing of the message in flight; nil when the observer cannot find its end
	pk  parkState
	own *[]byte // the read buffer of a reader without ReadPooled; nil until its first read

	// Small fields together, so that a pump fits a smaller allocation.
	dir        direction
	class      link.Class    // class from the binding
	boundClass atomic.Uint32 // class, for the socket watcher's goroutine
	bound      bool          // a binding has been made
	plain      bool          // this direction's emulation is zero, kept by bind
	owedShut   bool          // end dst's write side after owed: the direction ended on the loop
	large      bool          // own came from readPool
}

// emulation is the state of a pump whose binding carries emulation or
// whose chunks have had to wait for a release time; most pumps never need
// it, so it is allocated on first use.
type emulation struct {
	params netem.Params // emulation of this direction
	ack    netem.Params // emulation of the other direction (its delay returns ACKs)
	path   *netem.Path
	line   *netem.Line  // non-nil once chunks must wait for a release time
	coarse bool         // line releases at timer precision (class Low)
	late   *dirLateness // the route's release histograms for this direction, set with line
	stamps stamper      // rd, once it reports kernel receive times (set with line); nil if it cannot
	wall   clock.Wall   // clk, when stamps is set
}

// newPump returns the pump of one direction, with no sockets yet (see
// attach; the event loop gives it a writer of its own).
func newPump(s *Server, r *Route, sess *session.Session, dir direction, obs wire.Observer) *pump {
	p := &pump{srv: s, route: r, sess: sess, dir: dir, obs: obs}
	p.rw, _ = obs.(wire.Rewriter)
	return p
}

// attach makes the pump move bytes from src to dst itself. rsrc and rdst
// are src and dst as rawconn.Wrap returned them, shared with the other
// direction's pump.
func (p *pump) attach(src, dst, rsrc, rdst net.Conn) {
	p.pk.mu.Lock()
	defer p.pk.mu.Unlock()
	p.src, p.dst, p.rd, p.wr, p.ls = src, dst, rsrc, rdst, nil
	p.prd, _ = rsrc.(*rawconn.Conn)
	if p.prd != nil {
		// A plain socket's pump may park; TLS keeps decrypted bytes of
		// its own, which readiness of the socket would not show.
		p.pk.rc = p.prd.RawConn()
	}
}

// run pumps until src ends, an error, or the pump parks (parked true: see
// park). first is forwarded before anything read from src. At end of
// stream dst is half-closed after every byte has been written.
func (p *pump) run(ctx context.Context, first []byte) (parked bool, err error) {
	if kp := p.settle; kp != nil {
		p.settle = nil
		from := 0 // the client's socket
		if p.dir == dirDown {
			from = 1
		}
		if err := kp.Settle(ctx, from); err != nil {
			return false, fmt.Errorf("%s: kernel fast path: %w", p.dir, err)
		}
	}
	if p.owed != nil {
		if err := p.writeOwed(); err != nil || p.owedShut {
			if err == nil {
				closeWrite(p.dst)
			}
			return false, err
		}
	}
	if b := p.unsent; b != nil {
		p.unsent = nil
		err := p.send(ctx, *b)
		readPool.Put(b)
		if err != nil {
			return false, err
		}
	}
	if p.inj != nil {
		// Started, or resumed by a wake-up while parked.
		p.unkick()
		if err := p.inject(ctx); err != nil {
			return false, err
		}
	}
	if len(first) > 0 {
		if err := p.chunk(ctx, first); err != nil {
			return false, err
		}
	}
	for {
		buf, n, rerr := p.read()
		if n > 0 {
			var err error
			if p.fin != nil && p.fin.on.Load() {
				err = p.finishChunk(ctx, (*buf)[:n])
			} else {
				err = p.chunk(ctx, (*buf)[:n])
			}
			p.release(buf, n)
			if err != nil {
				return false, err
			}
		} else if buf != nil {
			p.release(buf, 0)
		}
		if rerr != nil && p.fin != nil && p.fin.on.Load() {
			if p.fin.more(rerr, p.src) {
				continue
			}
			return false, errFinished
		}
		if rerr != nil {
			if parked, retry := p.park(rerr); parked || retry {
				if parked {
					return true, nil
				}
				if p.inj != nil {
					if err := p.inject(ctx); err != nil {
						return false, err
					}
				}
				continue
			}
			if !errors.Is(rerr, io.EOF) {
				return false, fmt.Errorf("%s read: %w", p.dir, rerr)
			}
			if p.rw != nil {
				// What the rewriter holds back goes on before the half-close.
				if err := p.chunk(ctx, nil); err != nil {
					return false, err
				}
			}
			if p.em != nil && p.em.line != nil {
				if err := p.em.line.Flush(ctx); err != nil {
					return false, fmt.Errorf("%s write: %w", p.dir, err)
				}
			}
			closeWrite(p.dst)
			return false, nil
		}
	}
}

// Finishing the server's message in flight when a session is terminated.
const (
	// maxFinish bounds the bytes a terminated session's down pump
	// forwards to end the message in flight; a longer rest is not
	// waited for, and the session closes without the protocol's error.
	maxFinish = 64 << 10
	// finishWait bounds the wait for the rest of the message.
	finishWait = time.Second
)

// errFinished ends a down pump that has forwarded the server's message
// in flight to its end after a terminate.
var errFinished = errors.New("terminated at a message boundary")

// finish is the down pump's part in an administrator's terminate: the
// server's message in flight goes on to its end, so that the protocol's
// error the client reads after it is a message of its own. on is set by
// relaying.terminate; the rest belongs to the pump's goroutine.
type finish struct {
	on       atomic.Bool
	rem      wire.Remainder
	sent     int  // bytes forwarded since on
	extended bool // the read deadline was pushed out once for the rest
}

// more reports, for a read that failed with err after the terminate,
// whether the pump should read on: the deadline that woke it passed, the
// message in flight has a rest of at most maxFinish bytes, and the
// deadline has not been pushed out before; it then gives src finishWait.
func (f *finish) more(err error, src net.Conn) bool {
	if f.extended || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	n, ok := f.rem.Remaining()
	if !ok || n == 0 || f.sent+n > maxFinish {
		return false
	}
	f.extended = true
	return src.SetReadDeadline(clock.SocketDeadline(finishWait)) == nil
}

// finishChunk forwards of b, read after a terminate, what belongs to the
// server's message in flight, and returns errFinished once that message
// has ended (the rest of b, which the client will never read, is
// dropped), or when it has no end to be found within maxFinish.
func (p *pump) finishChunk(ctx context.Context, b []byte) error {
	f := p.fin
	for {
		n, ok := f.rem.Remaining()
		if !ok || n == 0 || f.sent >= maxFinish {
			return errFinished
		}
		if len(b) == 0 {
			return nil
		}
		k := min(n, len(b))
		if err := p.chunk(ctx, b[:k]); err != nil {
			return err
		}
		f.sent += k
		b = b[k:]
	}
}

// inject forwards what the front end has to send the client in the
// server's place (wire.Injector), as chunks of the down direction.
func (p *pump) inject(ctx context.Context) error {
	for {
		b := p.inj.Pending()
		if len(b) == 0 {
			return nil
		}
		if err := p.chunk(ctx, b); err != nil {
			return err
		}
	}
}

// addBytes counts n bytes the pump has read.
func (p *pump) addBytes(n int) {
	if p.dir == dirUp {
		p.sess.AddUp(n)
	} else {
		p.sess.AddDown(n)
	}
}

// bytes returns how many bytes the pump has read so far.
func (p *pump) bytes() int64 {
	if p.dir == dirUp {
		return p.sess.BytesUp()
	}
	return p.sess.BytesDown()
}

// read reads the next chunk from src into a buffer from readPool, or from
// wholeReads while the session's sockets are paired in the kernel, which
// the caller gives back (release). On a plain socket the buffer is taken
// only once bytes are there (rawconn.Conn.ReadPooled), so a pump waiting
// for its peer holds none; another reader (TLS) holds one while it waits.
func (p *pump) read() (*[]byte, int, error) {
	if p.prd != nil {
		if p.ls != nil && p.ls.kernel != nil && p.ls.kernel.pair != nil {
			return p.prd.ReadPooled(wholeReads)
		}
		return p.prd.ReadPooled(readPool)
	}
	if p.own == nil {
		b := make([]byte, smallBuf)
		p.own = &b
	}
	n, err := p.rd.Read(*p.own)
	return p.own, n, err
}

// release gives back buf, which read returned with n bytes, to the pool
// of its size, unless it is the pump's own buffer, which it keeps, moving
// to a pooled one of readBuf bytes the first time a read fills its small
// one.
func (p *pump) release(buf *[]byte, n int) {
	if buf != p.own {
		wholeReads.Put(buf)
		return
	}
	if n == len(*buf) && n < readBuf {
		p.own, p.large = readPool.Get(), true
	}
}

// writeOwed writes what the loop accepted for dst and could not write.
func (p *pump) writeOwed() error {
	b := p.owed
	p.owed = nil
	_, err := p.wr.Write(*b)
	readPool.Put(b)
	if err != nil {
		return fmt.Errorf("%s write: %w", p.dir, err)
	}
	return nil
}

// chunk observes, schedules and forwards one chunk.
func (p *pump) chunk(ctx context.Context, b []byte) error {
	if err := p.obs.Observe(b); err != nil {
		return err
	}
	p.addBytes(len(b))
	if p.ls != nil && p.ls.kernel != nil && p.dir == dirDown {
		p.ls.l.answered(p.ls, len(b))
	}
	if p.rw != nil {
		rctx := ctx
		if p.rwCtx != nil {
			rctx = p.rwCtx
		}
		var err error
		if b, err = p.rw.Rewrite(rctx, b); err != nil || len(b) == 0 {
			return err
		}
	}
	return p.send(ctx, b)
}

// send schedules and forwards b, which has been observed. On the loop
// (p.ls set) it never blocks: a chunk that needs a delay line or a link
// that may make it wait is kept in p.unsent, and send returns
// errToPumps.
func (p *pump) send(ctx context.Context, b []byte) error {
	if p.owed != nil {
		if err := p.writeOwed(); err != nil {
			return err
		}
	}
	if v := p.srv.policy.Version(); !p.bound || v != p.version {
		p.bind(v)
	}
	class := p.class
	if p.sess.Penalized() {
		class = link.Low
	}
	if p.rs != nil && (p.lnk.Yields() || p.rs.engaged.Load() != nil) {
		// The Low class yields while a statement above it runs (see
		// link.Link.Engage); the pump that sees it begin or end says so.
		// On a link where it never yields this costs one atomic load.
		p.rs.engage(p.lnk, class != link.Low && p.sess.Running())
	}
	if p.ls != nil {
		if (p.em == nil || p.em.line == nil) && p.plain {
			_, ok, err := p.flow.TrySend(len(b), class)
			if err != nil {
				return fmt.Errorf("%s link: %w", p.dir, err)
			}
			if ok {
				if _, err := p.wr.Write(b); err != nil {
					return fmt.Errorf("%s write: %w", p.dir, err)
				}
				return nil
			}
		}
		u := readPool.Get()
		*u = append((*u)[:0], b...)
		p.unsent = u
		return errToPumps
	}
	depart, err := p.flow.Send(ctx, len(b), class)
	if err != nil {
		return fmt.Errorf("%s link: %w", p.dir, err)
	}
	if (p.em == nil || p.em.line == nil) && p.plain && !depart.After(p.srv.clk.Now()) {
		if _, err := p.wr.Write(b); err != nil {
			return fmt.Errorf("%s write: %w", p.dir, err)
		}
		return nil
	}
	if p.em == nil {
		p.em = new(emulation)
	}
	em := p.em
	if em.line == nil {
		em.late = p.srv.lateness(p.route.Name, p.dir)
		em.path = netem.NewPath(em.params, p.seed())
		em.line = netem.NewLine(p.srv.clk, p.wr, em.path, netem.LineOptions{
			AckDelay: p.ackDelay, Precise: &em.late.precise, Timed: &em.late.timed,
		})
		p.stampReads()
	}
	// Low-class bytes are bulk: released at timer precision, without a
	// precise wake-up per chunk (see netem.Line.SetCoarse).
	if low := class == link.Low; low != em.coarse {
		em.line.SetCoarse(low)
		em.coarse = low
	}
	at := depart
	if em.stamps != nil {
		if r := em.stamps.ReadStamp(); !r.IsZero() {
			now := p.srv.clk.Now()
			at = arrival(depart, now, em.wall.FromWall(r, now))
		}
	}
	if err := em.line.Write(ctx, b, at); err != nil {
		return fmt.Errorf("%s write: %w", p.dir, err)
	}
	return nil
}

// stamper is a reader that reports when the kernel received what it
// returned (rawconn.Conn).
type stamper interface {
	StampReads() error
	ReadStamp() time.Time // wall clock; zero for none
}

// stampReads asks for kernel receive times on src, if the clock can place
// them and the socket can give them; the flow's delay then counts from
// when its bytes reached the host rather than from when the pump got to
// them. A delayed flow is idle between chunks, and the wake-up that ends
// its read comes tens of microseconds after the bytes, more on a busy or
// virtual host: charged to every chunk, on top of the delay.
func (p *pump) stampReads() {
	w, ok := p.srv.clk.(clock.Wall)
	if !ok {
		return
	}
	st, ok := p.rd.(stamper)
	if !ok {
		return
	}
	if err := st.StampReads(); err != nil {
		p.srv.log.Debug("no receive timestamps", "route", p.route.Name, "dir", p.dir.String(), "err", err)
		return
	}
	p.em.stamps, p.em.wall = st, w
}

// maxStampAge bounds how old a receive time may be and still stand for a
// chunk's arrival. An older one means the wall clock stepped, or the
// bytes waited unread while the flow was held back, when the read time
// serves as well.
const maxStampAge = time.Second

// arrival returns when a chunk entered its emulated path: received, the
// kernel's receive time of its last segment (on the clock's time line),
// if the link let the chunk leave at once (depart not after now) and
// received lies at most maxStampAge before depart; depart otherwise.
func arrival(depart, now, received time.Time) time.Time {
	if depart.After(now) || received.After(depart) || depart.Sub(received) > maxStampAge {
		return depart
	}
	return received
}

func (p *pump) ackDelay() time.Duration { return p.em.ack.Delay }

// seed makes each flow's random sequence distinct but repeatable for a
// given seed setting and session order.
func (p *pump) seed() int64 {
	return p.em.params.Seed + int64(p.sess.ID)*2 + int64(p.dir)
}

// bind applies the policy's current binding for the session.
func (p *pump) bind(v uint64) {
	b := p.srv.policy.Bind(p.route.Name, p.sess.User())
	p.version, p.bound = v, true
	p.class = b.Class
	if c := p.sess.Coordinator(); c != nil {
		// A shard connection works for its coordinator session: its
		// bytes go at the class of the coordinator's pool (its pool,
		// weight and emulation stay its own).
		p.class = p.srv.policy.Bind(c.Info.Route, c.User()).Class
	}
	params, ack := b.Down, b.Up
	if p.dir == dirUp {
		params, ack = b.Up, b.Down
	}
	p.plain = params.IsZero()
	if p.em == nil && (!p.plain || !ack.IsZero()) {
		p.em = new(emulation)
	}
	if em := p.em; em != nil {
		em.params, em.ack = params, ack
		if em.path != nil {
			em.path.SetParams(params)
		}
	}
	l := b.Link
	if l == nil {
		l = p.srv.defaultLink()
	}
	if p.sess.Pool() != b.Pool {
		p.sess.SetPool(b.Pool)
	}
	p.boundClass.Store(uint32(p.class))
	if p.flow == nil || l != p.lnk || b.Pool != p.pool {
		if p.flow != nil {
			p.flow.Close()
		}
		d := link.Up
		if p.dir == dirDown {
			d = link.Down
		}
		p.flow = l.Flow(d, b.Pool)
		p.lnk, p.pool = l, b.Pool
		if p.detach != nil {
			p.detach()
		}
		if w := p.srv.sockets; w != nil {
			p.detach = w.Attach(l, d, p.socket(false), p.socket(true), p.watchedClass)
		}
	}
}

// rewatch tells the socket watcher the pump's sockets again, after they
// moved between the runtime and an event loop (a moved socket is a new
// descriptor). The caller owns the pump.
func (p *pump) rewatch() {
	w := p.srv.sockets
	if w == nil || p.detach == nil || p.lnk == nil {
		return
	}
	p.detach()
	d := link.Up
	if p.dir == dirDown {
		d = link.Down
	}
	p.detach = w.Attach(p.lnk, d, p.socket(false), p.socket(true), p.watchedClass)
}

// socket returns the socket the pump writes to (send) or reads from:
// dst's or src's, or the event loop's socket of that side while the
// loop runs the pump; nil when it has none.
func (p *pump) socket(send bool) rawconn.Controller {
	if ls := p.ls; ls != nil {
		for i := range ls.sides {
			s := &ls.sides[i]
			if (send && s.wr == p || !send && s.rd == p) && s.sock != nil {
				return s.sock
			}
		}
	}
	c := p.src
	if send {
		c = p.dst
	}
	if c == nil {
		return nil
	}
	return rawconn.ControllerOf(c)
}

// watchedClass is the class the pump's bytes go at now, for the socket
// watcher; safe for concurrent use.
func (p *pump) watchedClass() link.Class {
	if p.sess.Penalized() {
		return link.Low
	}
	return link.Class(p.boundClass.Load())
}

// close releases the pump's resources once run has returned.
func (p *pump) close() {
	if p.em != nil && p.em.line != nil {
		p.em.line.Close()
	}
	if p.large {
		readPool.Put(p.own)
		p.own, p.large = nil, false
	}
	if p.flow != nil {
		p.flow.Close()
	}
	if p.detach != nil {
		p.detach()
	}
	for _, b := range [2]**[]byte{&p.owed, &p.unsent} {
		if *b != nil {
			readPool.Put(*b)
			*b = nil
		}
	}
}

// loopable reports whether the pump's current binding lets the loop run
// it: no emulation in its direction, and a link that admits its chunks
// without making them wait.
func (p *pump) loopable() bool {
	if v := p.srv.policy.Version(); !p.bound || v != p.version {
		p.bind(v)
	}
	if !p.plain || p.em != nil && p.em.line != nil {
		return false
	}
	class := p.class
	if p.sess.Penalized() {
		class = link.Low
	}
	_, ok, err := p.flow.TrySend(0, class)
	return ok && err == nil
}

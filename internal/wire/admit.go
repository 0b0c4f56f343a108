package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// Admitter admits a session's statements under the limit of statements
// its resource pool may run at once (GaussDB's active_statements). The
// workload manager's admission (*wlm.Admission) implements it. It must be safe for
// concurrent use.
type Admitter interface {
	// Admit blocks until st may run, ctx is done or the wait is
	// cancelled, and returns the function that gives the slot back
	// (called once). It returns at once, with a release that does
	// nothing, when the session's pool has no limit. An error means st
	// must not run; its message (and SQLState, when it has one) is what
	// the client reads.
	Admit(ctx context.Context, st *session.Statement) (release func(), err error)
}

// TryAdmitter is an Admitter that can say, without waiting, whether a
// statement may run now. Gate.Wait uses it under a context from
// WithYield.
type TryAdmitter interface {
	// TryAdmit admits st if it may run at once, as Admit would, and
	// reports ok; when st would have to wait it takes nothing, leaves st
	// as it was and reports false.
	TryAdmit(st *session.Statement) (release func(), ok bool)
}

// Limiter is an Admitter that can say whether a session's statements
// are under a limit at all; Gate.MayHold asks it.
type Limiter interface {
	// Limits reports whether a statement of sess would take a slot now
	// (its pool or link has a limit), so that it might have to wait.
	Limits(sess *session.Session) bool
}

// yieldKey is the context key of WithYield's function.
type yieldKey struct{}

// WithYield returns ctx carrying yield. A Gate.Wait under the returned
// context first tries to admit its statement without waiting (the
// Admitter's TryAdmit, when it has one); only when that fails does it
// call yield, on the calling goroutine, and then wait. A caller that must
// not block (the proxy's event loop running a Rewriter) hands its other
// work on in yield. yield is called at most once per Wait.
func WithYield(ctx context.Context, yield func()) context.Context {
	return context.WithValue(ctx, yieldKey{}, yield)
}

// Injector is implemented by a front end that sometimes answers the
// client itself, in the server's place (a statement refused before it
// reached the server). The proxy hands its bytes to the session's down
// pump, which observes and forwards them as if the server had sent them,
// so they never interleave with the server's own bytes and pass the same
// link and emulation.
type Injector interface {
	// SetWake is called once by the proxy, before the pumps start, with
	// wake: a call makes the down pump call Pending soon (before its
	// next read, or at once when it waits for the server or is parked).
	// wake is safe from any goroutine; calls may coalesce.
	SetWake(wake func())
	// Pending returns the bytes to send the client now, or nil. The down
	// pump calls it, on its own goroutine, until it returns nil; a front
	// end returns nil while the server stream is in the middle of a
	// message and calls wake again once it is not.
	Pending() []byte
}

// ErrQueryCanceled is the cause of a wait ended by the client's own
// cancel (a PostgreSQL CancelRequest, MySQL KILL QUERY).
var ErrQueryCanceled = errors.New("canceling statement due to user request")

// ErrGateClosed is returned by Gate.Wait once the session has ended.
var ErrGateClosed = errors.New("session ended while its statement waited")

// SQLStater is implemented by errors that carry a SQLSTATE.
type SQLStater interface{ SQLState() string }

// Refused returns the SQLSTATE and message a client reads for err, the
// error of a wait that did not admit (Gate.Wait): the error's own
// SQLSTATE when it carries one (its text, without a leading "CODE: ", as
// the message), else 57014 and err's text.
func Refused(err error) (code, msg string) {
	code, msg = sqlstate.QueryCanceled, err.Error()
	var s SQLStater
	if errors.As(err, &s) {
		code = s.SQLState()
		msg = strings.TrimPrefix(msg, code+": ")
	}
	return code, msg
}

// Gate is one session's admission state, shared by its two observers:
// whether the session holds a slot, whether the server said a
// transaction is open, and how many of the client's requests the server
// has yet to answer. The client side asks Start at the first byte of
// each request and Wait before the first statement of a transaction
// goes upstream; the server side calls Answered at each final answer
// (PostgreSQL ReadyForQuery, MySQL's last OK, EOF or ERR of a command).
//
// The session holds at most one slot: taken by Wait, given back when the
// server has answered every request, no transaction is open and the
// client is not in the middle of a request (Answered), or when the
// session ends (Close). A session inside a transaction is never held.
//
// A nil *Gate admits everything; its methods are no-ops. Safe for
// concurrent use; mu is taken before session.Session.mu and no other
// lock (Admit and release run without it).
type Gate struct {
	adm  Admitter
	try  TryAdmitter // adm, when it is one; nil otherwise
	gone func() bool // set by SetPeer, on the goroutine that calls Wait; reports the client gone
	peer net.Conn    // set by SetPeer: the client socket Wait watches while it waits; nil: none
	// farewell, set by SetFarewell before the session relays, reports
	// whether the bytes a client sent before its end of stream only say
	// goodbye (PostgreSQL Terminate, MySQL COM_QUIT); nil: none do.
	farewell func(b []byte) bool

	mu      sync.Mutex
	release func()                  // guarded by mu; non-nil while the session holds a slot
	inTx    bool                    // guarded by mu; the server's last answer left a transaction open
	owed    int                     // guarded by mu; final answers the client's requests still earn
	open    bool                    // guarded by mu; a request is under way that earns no answer alone (PostgreSQL Parse... before Sync)
	waiting context.CancelCauseFunc // guarded by mu; ends the wait in progress; nil when none
	waitSt  *session.Statement      // guarded by mu; the statement waiting, with waiting
	closed  bool                    // guarded by mu; the session has ended
	idle    bool                    // guarded by mu; sess was told it is idle in a transaction
	ended   bool                    // guarded by mu; the session was ended for sitting idle (closed is set too)

	// sess and clk, set by Track before the session relays, are where
	// the gate records when the session sits idle in a transaction
	// (session.Session.SetIdleInTransaction, called under mu).
	sess *session.Session
	clk  clock.Clock

	// The wait's context, kept across waits while its parent is the same
	// and it was not cancelled, so a wait costs no allocation. Used by
	// Wait's caller only (one goroutine).
	parent context.Context
	wctx   context.Context
	cancel context.CancelCauseFunc
}

// NewGate returns the admission state of one session, or nil (admit
// everything) when a is nil.
func NewGate(a Admitter) *Gate {
	if a == nil {
		return nil
	}
	g := &Gate{adm: a}
	g.try, _ = a.(TryAdmitter)
	return g
}

// MayHold reports whether a request of the session might be held now:
// its pool or link limits statements, the Admitter cannot tell (it is no
// Limiter), the session is not tracked yet, a statement is waiting, or the gate
// is closed. A
// nil Gate holds nothing. Safe for concurrent use.
func (g *Gate) MayHold() bool {
	if g == nil {
		return false
	}
	l, ok := g.adm.(Limiter)
	if !ok || g.sess == nil {
		return true
	}
	g.mu.Lock()
	waiting := g.waiting != nil || g.closed
	g.mu.Unlock()
	return waiting || l.Limits(g.sess)
}

// SetPeer makes Wait watch the client while a statement waits
// (watchPeer): a client that goes away then (a reset, or its end of
// stream with nothing unread but its goodbye, see SetFarewell) ends the
// wait at once with ErrClientGone. Once a statement that had to wait is
// admitted, Wait checks again that the client is still there
// (PeerGone(client)): a client that went away gets no slot and its
// request is not sent. A statement admitted at once is not checked: its
// client sent it a moment before. Called before the session relays, and again,
// on the goroutine that calls Wait, whenever the session's client socket
// changes.
func (g *Gate) SetPeer(client net.Conn) {
	if g != nil {
		g.gone = PeerGone(client)
		g.peer = client
	}
}

// Track makes the gate record on sess when the session sits idle inside
// a transaction (session.Slot.IdleSince), on clk: from the server's
// final answer that leaves a transaction open with nothing owed, until
// the client's next request begins. Called before the session relays.
func (g *Gate) Track(sess *session.Session, clk clock.Clock) {
	if g != nil {
		g.sess, g.clk = sess, clk
	}
}

// SetFarewell gives the protocol's test of a client's last words: f
// reports whether b, all the client sent and sluice has not read before
// its end of stream, only ends the session (PostgreSQL Terminate, MySQL
// COM_QUIT). Such a client is gone as much as one that closed without a
// word. Called before the session relays.
func (g *Gate) SetFarewell(f func(b []byte) bool) {
	if g != nil {
		g.farewell = f
	}
}

// ErrClientGone is Wait's error when the client went away while its
// statement waited. The front ends end the session on it: nobody is
// there to answer. It wraps io.EOF: the session ends as when the client
// ends its stream.
var ErrClientGone = fmt.Errorf("the client went away while its statement waited for admission: %w", io.EOF)

// PeerGone returns a function that reports, without blocking or
// consuming a byte, whether c's peer has gone: it reset the connection
// (an error or hang-up on the socket), or closed its side with nothing
// left unread (a peek that sees end of stream). A peer that closed after
// more bytes is not gone: they are still to be read. It must not run
// concurrently with a read of c, nor with itself. A connection it cannot
// peek (TLS over anything but a socket, a pipe) is never reported gone.
func PeerGone(c net.Conn) func() bool {
	rc, _ := rawSocket(c)
	if rc == nil {
		return func() bool { return false }
	}
	p := &peek{rc: rc}
	p.fn = p.peek
	return p.gone
}

// rawSocket returns the socket under c (through TLS and wrappers that
// have NetConn), or nil when there is none; isTLS reports that c is TLS,
// whose unread bytes are records, not the protocol's messages.
func rawSocket(c net.Conn) (rc syscall.RawConn, isTLS bool) {
	for c != nil {
		if _, ok := c.(syscall.Conn); ok {
			break
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, false
		}
		if _, ok := c.(*tls.Conn); ok {
			isTLS = true
		}
		if n := nc.NetConn(); n != c {
			c = n
			continue
		}
		return nil, false
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	return rc, isTLS
}

// peek is PeerGone's state, made once per connection so that a check
// allocates nothing.
type peek struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) // p.peek, bound once
	b    [1]byte
	seen bool // the last peek saw end of stream
}

func (p *peek) gone() bool {
	p.seen = false
	if err := p.rc.Control(p.fn); err != nil {
		return false
	}
	return p.seen
}

// peek looks at the next byte without taking it or waiting: a socket
// that reads as end of stream, or fails, has lost its peer.
func (p *peek) peek(fd uintptr) {
	n, errno := peekFD(fd, p.b[:])
	p.seen = n == 0 && errno == 0 || errno != 0 && errno != syscall.EAGAIN && errno != syscall.EINTR
}

// peekFD peeks at up to len(b) bytes of socket fd without taking them or
// waiting: n is 0 at end of stream; errno EAGAIN when nothing is there.
func peekFD(fd uintptr, b []byte) (n int, errno syscall.Errno) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

// Start records a request's first byte, before it is forwarded: earns
// when the request earns a final answer of its own, open the client's
// in-a-request state after it (PostgreSQL: true from Parse, Bind,
// Execute..., false at Sync). It reports whether the request must wait
// for admission: the session holds no slot and is not in a transaction,
// or (a Wait that then fails) the session was ended for sitting idle in
// its transaction (session.Session.TerminateIdle) as the request began.
func (g *Gate) Start(earns, open bool) (admit bool) {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if earns {
		g.owed++
	}
	g.open = open
	if g.idle {
		g.idle = false
		if !g.sess.LeaveIdle() {
			// The session was ended for sitting idle: every request from
			// now is held, and its Wait fails, so no statement reaches the
			// server.
			g.closed, g.ended = true, true
		}
	}
	return g.ended || g.release == nil && !g.inTx && !g.closed
}

// Held reports whether the session holds a slot.
func (g *Gate) Held() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.release != nil
}

// Wait blocks until st is admitted (the session then holds the slot),
// ctx is done, CancelWait is called or the Admitter refuses. The error
// is ctx's when ctx ended the wait, the cause given to CancelWait when it
// did, otherwise the Admitter's.
func (g *Gate) Wait(ctx context.Context, st *session.Statement) error {
	if g == nil {
		return nil
	}
	y, _ := ctx.Value(yieldKey{}).(func())
	if y != nil || g.peer != nil {
		// A statement that may run at once needs no yield and no watch.
		if done, err := g.tryAdmit(st); done {
			return err
		}
		if y != nil {
			y() // may hand the session to its pumps, and SetPeer
		}
	}
	if g.parent != ctx || g.wctx.Err() != nil {
		if g.cancel != nil {
			g.cancel(nil)
		}
		g.parent = ctx
		g.wctx, g.cancel = context.WithCancelCause(ctx)
	}
	wctx, cancel := g.wctx, g.cancel
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrGateClosed
	}
	g.waiting, g.waitSt = cancel, st
	g.mu.Unlock()
	var stopWatch func()
	if g.peer != nil {
		// Nobody reads the client while its statement waits: watch it, so a
		// client that goes away ends the wait, and the session, at once.
		stopWatch = watchPeer(g.peer, g.farewell, func() { cancel(ErrClientGone) })
	}
	rel, err := g.adm.Admit(wctx, st)
	if stopWatch != nil {
		stopWatch()
	}
	g.mu.Lock()
	g.waiting, g.waitSt = nil, nil
	closed := g.closed
	if err == nil && !closed {
		g.release = rel
	}
	g.mu.Unlock()
	switch {
	case err == nil && closed:
		rel()
		return ErrGateClosed
	case err == nil && g.gone != nil && waited(st) && g.gone():
		g.mu.Lock()
		g.release = nil
		g.mu.Unlock()
		rel()
		return ErrClientGone
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if c := context.Cause(wctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

// tryAdmit admits st at once if the Admitter can say it may run now.
// done reports that Wait is over, with err its result.
func (g *Gate) tryAdmit(st *session.Statement) (done bool, err error) {
	if g.try == nil {
		return false, nil
	}
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return true, ErrGateClosed
	}
	rel, ok := g.try.TryAdmit(st)
	if !ok {
		return false, nil
	}
	g.mu.Lock()
	closed = g.closed
	if !closed {
		g.release = rel
	}
	g.mu.Unlock()
	if closed {
		rel()
		return true, ErrGateClosed
	}
	return true, nil
}

// waited reports whether st was held waiting for its slot: only then can
// its client have left since it sent the statement.
func waited(st *session.Statement) bool {
	if st == nil {
		return false
	}
	held, _ := st.HeldAt()
	return !held.IsZero()
}

// CancelWait ends the wait in progress as the client's cancel does, and
// reports whether there was one: through the statement
// (session.Statement.CancelWait with session.ErrCancelRequested, so the
// Admitter answers as for Registry.Cancel) once it is held, else with
// ErrQueryCanceled as Wait's error.
func (g *Gate) CancelWait() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	cancel, st := g.waiting, g.waitSt
	g.mu.Unlock()
	if cancel == nil {
		return false
	}
	if !st.CancelWait(session.ErrCancelRequested) {
		cancel(ErrQueryCanceled)
	}
	return true
}

// Answered records one final answer of the server; inTx is whether it
// leaves a transaction open. The slot goes back when nothing is owed, no
// transaction is open and no request is under way.
func (g *Gate) Answered(inTx bool) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.owed > 0 {
		g.owed--
	}
	g.inTx = inTx
	var rel func()
	if !inTx && g.owed == 0 && !g.open && g.release != nil {
		rel, g.release = g.release, nil
	}
	if idle := inTx && g.owed == 0 && !g.open && !g.closed; idle != g.idle && g.sess != nil {
		g.idle = idle
		since := time.Time{}
		if idle {
			since = g.clk.Now()
		}
		g.sess.SetIdleInTransaction(since)
	}
	g.mu.Unlock()
	if rel != nil {
		rel()
	}
}

// Close ends the session's admission: the slot it holds goes back, a
// wait in progress ends, and no later Wait admits. Safe to call more than
// once.
func (g *Gate) Close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.closed = true
	if g.idle {
		g.idle = false
		g.sess.SetIdleInTransaction(time.Time{})
	}
	rel := g.release
	g.release = nil
	if g.waiting != nil {
		g.waiting(ErrGateClosed)
		g.waiting = nil
	}
	g.mu.Unlock()
	if rel != nil {
		rel()
	}
}

// Canceler returns a session.Canceler that ends the wait of a held
// statement (CancelWait) and otherwise cancels through inner;
// nil inner cancels only waits (then session.ErrNotRunning when none).
func (g *Gate) Canceler(inner session.Canceler) session.Canceler {
	if g == nil {
		return inner
	}
	return gateCanceler{g: g, inner: inner}
}

type gateCanceler struct {
	g     *Gate
	inner session.Canceler
}

func (c gateCanceler) Cancel(ctx context.Context) error {
	if c.g.CancelWait() {
		return nil
	}
	if c.inner == nil {
		return session.ErrNotRunning
	}
	return c.inner.Cancel(ctx)
}

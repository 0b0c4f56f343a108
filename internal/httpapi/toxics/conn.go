package toxics

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netem"
)

// chain is one immutable generation of a proxy's toxics, in creation
// order. A new generation replaces it on every change.
type chain struct {
	version uint64
	toxics  []*toxic
}

// toxState is what one connection remembers about one toxic across its
// updates (Toxiproxy's per-connection toxic state).
type toxState struct {
	sent atomic.Int64 // limit_data: bytes passed so far
}

// applied is one toxic as one connection applies it. It is immutable;
// an update of the toxic makes a new one sharing st.
type applied struct {
	t   *toxic
	on  bool // the toxicity draw: the toxic acts on this connection
	st  *toxState
	exp *expiry // timeout toxics with a positive timeout, while on
}

func (a *applied) stop() {
	if a.exp != nil {
		a.exp.halt()
	}
}

// conn applies one stream's toxics to the writes to one socket: a
// downstream conn wraps the client socket, an upstream conn the server
// socket. Write and CloseWrite are called by one goroutine at a time (the
// proxy's pump); Close and refresh may be called from any goroutine.
type conn struct {
	net.Conn
	px      *proxyState
	stream  string
	clk     clock.Clock
	draw    func() float64
	rnd     *rand.Rand // slicer cuts and path seeds; writer goroutine only
	ctx     context.Context
	cancel  context.CancelFunc
	changed chan struct{} // capacity 1; the applied toxics changed

	version atomic.Uint64 // chain version applied; stored under mu
	fast    atomic.Bool   // no toxic applies and no delay line: plain writes

	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex
	// The fields below are guarded by mu.
	active []*applied          // in chain order; replaced, never modified
	byID   map[uint64]*applied // every toxic of the stream, on or off
	params netem.Params        // emulation asked for by latency and bandwidth toxics
	path   *netem.Path         // nil until a chunk needed emulation
	line   *netem.Line         // nil until a chunk needed emulation
	closed bool
}

func newConn(px *proxyState, stream string, nc net.Conn, clk clock.Clock, draw func() float64) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		Conn: nc, px: px, stream: stream, clk: clk, draw: draw,
		rnd:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		ctx:     ctx,
		cancel:  cancel,
		changed: make(chan struct{}, 1),
		byID:    make(map[uint64]*applied),
	}
}

// errClosed is returned by writes on a closed conn.
var errClosed = fmt.Errorf("toxics: %w", net.ErrClosed)

// refresh applies the proxy's current chain: toxics new to the
// connection, or updated since it last looked, get a fresh toxicity draw
// (updates keep their per-connection state, as in Toxiproxy); removed
// ones stop. It wakes a Write waiting for a change.
func (c *conn) refresh() {
	ch := c.px.chain.Load()
	c.mu.Lock()
	if c.closed || ch.version == c.version.Load() {
		c.mu.Unlock()
		return
	}
	next := make([]*applied, 0, len(ch.toxics))
	seen := make(map[uint64]bool, len(ch.toxics))
	for _, t := range ch.toxics {
		if t.stream != c.stream {
			continue
		}
		seen[t.id] = true
		old := c.byID[t.id]
		if old != nil && old.t.gen == t.gen {
			next = append(next, old)
			continue
		}
		a := &applied{t: t, on: c.draw() < t.toxicity, st: &toxState{}}
		if old != nil {
			a.st = old.st
			old.stop()
		}
		if a.on && t.kind == "timeout" && t.attr("timeout") > 0 {
			a.exp = startExpiry(c, t.millis("timeout"))
		}
		c.byID[t.id] = a
		next = append(next, a)
	}
	for id, a := range c.byID {
		if !seen[id] {
			a.stop()
			delete(c.byID, id)
		}
	}
	c.active = next
	p := pathParams(next)
	if c.path != nil && p != c.params {
		c.path.SetParams(p)
	}
	c.params = p
	c.fast.Store(len(next) == 0 && c.line == nil)
	c.version.Store(ch.version)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// current returns the toxics that apply now.
func (c *conn) current() []*applied {
	if c.px.chain.Load().version != c.version.Load() {
		c.refresh()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

// Write passes p through the stream's toxics to the socket.
func (c *conn) Write(p []byte) (int, error) {
	if c.px.chain.Load().version != c.version.Load() {
		c.refresh()
	}
	if c.fast.Load() {
		return c.Conn.Write(p)
	}
	var resetAt map[uint64]time.Time
	touched := false
	for {
		ops := c.current()
		var hold, reset *applied
		for _, a := range ops {
			if !a.on {
				continue
			}
			switch {
			case a.t.kind == "timeout" && hold == nil:
				hold = a
			case a.t.kind == "reset_peer" && reset == nil:
				reset = a
			}
		}
		switch {
		case reset != nil:
			// The data that triggers the reset never arrives, as in
			// Toxiproxy; the reset comes timeout after it.
			if resetAt == nil {
				resetAt = map[uint64]time.Time{}
			}
			at, ok := resetAt[reset.t.id]
			if !ok {
				at = c.clk.Now().Add(reset.t.millis("timeout"))
				resetAt[reset.t.id] = at
			}
			done, err := c.waitUntil(at)
			if err != nil {
				return 0, err
			}
			if !done {
				continue // the toxics changed
			}
			c.resetPeer()
			return 0, fmt.Errorf("toxic %s: connection reset: %w", reset.t.name, net.ErrClosed)
		case hold != nil:
			// Hold the data until the toxic goes; the expiry closes the
			// connection timeout after the last data arrived.
			if !touched {
				hold.exp.touch()
				touched = true
			}
			if err := c.hold(); err != nil {
				return 0, err
			}
			continue
		}
		return c.pass(ops, p)
	}
}

// holdProbe is how often a write held by a timeout toxic checks that the
// socket is still open.
const holdProbe = 100 * time.Millisecond

// hold waits until the toxics change or the connection closes. A session
// whose sockets are closed under it (the proxy's shutdown closes the raw
// sockets) is noticed within holdProbe by an empty write, which sends
// nothing on an open socket and fails on a closed one: a session whose
// two pumps are both held must still end.
func (c *conn) hold() error {
	t := c.clk.NewTimer(holdProbe)
	defer t.Stop()
	select {
	case <-c.changed:
		return nil
	case <-c.ctx.Done():
		return errClosed
	case <-t.C():
		if _, err := c.Conn.Write(nil); err != nil {
			c.Close()
			return errClosed
		}
		return nil
	}
}

// piece is a part of a write and the pause after it.
type piece struct {
	b    []byte
	wait time.Duration
}

// pass sends p through the limit_data and slicer toxics, then to the
// socket, through the delay line when latency or bandwidth apply.
func (c *conn) pass(ops []*applied, p []byte) (int, error) {
	pieces := []piece{{b: p}}
	var limited *applied
	for _, a := range ops {
		if !a.on {
			continue
		}
		switch a.t.kind {
		case "limit_data":
			limit := a.t.attr("bytes")
			sent := a.st.sent.Load()
			pieces = truncate(pieces, max(limit-sent, 0))
			n := total(pieces)
			a.st.sent.Add(n)
			if sent+n >= limit && limited == nil {
				limited = a
			}
		case "slicer":
			pieces = c.reslice(pieces, a.t)
		}
	}
	for _, pc := range pieces {
		if len(pc.b) > 0 {
			if err := c.output(pc.b); err != nil {
				return 0, err
			}
		}
		if pc.wait > 0 {
			if err := clock.Sleep(c.ctx, c.clk, pc.wait); err != nil {
				return 0, errClosed
			}
		}
	}
	if limited != nil {
		c.flush()
		c.Close()
		return len(p), fmt.Errorf("toxic %s: limit of %d bytes reached: %w", limited.t.name, limited.t.attr("bytes"), net.ErrClosed)
	}
	return len(p), nil
}

func total(ps []piece) int64 {
	var n int64
	for _, p := range ps {
		n += int64(len(p.b))
	}
	return n
}

// truncate keeps the first limit bytes of ps.
func truncate(ps []piece, limit int64) []piece {
	out := ps[:0]
	for _, p := range ps {
		if limit <= 0 {
			break
		}
		if int64(len(p.b)) > limit {
			p.b = p.b[:limit]
		}
		limit -= int64(len(p.b))
		out = append(out, p)
	}
	return out
}

// reslice cuts every piece as slicing toxic t does, with t's delay after
// each slice.
func (c *conn) reslice(ps []piece, t *toxic) []piece {
	avg, vari := int(t.attr("average_size")), int(t.attr("size_variation"))
	delay := time.Duration(t.attr("delay")) * time.Microsecond
	var out []piece
	var cuts []int
	for _, p := range ps {
		cuts = slice(cuts[:0], 0, len(p.b), avg, vari, c.rnd)
		start := 0
		for i, end := range cuts {
			w := delay
			if i == len(cuts)-1 {
				w += p.wait
			}
			out = append(out, piece{b: p.b[start:end], wait: w})
			start = end
		}
	}
	return out
}

// output writes b to the socket, through the delay line once latency or
// bandwidth have applied (later chunks keep going through it, so nothing
// overtakes what it holds).
func (c *conn) output(b []byte) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	if c.line == nil && !c.params.IsZero() {
		c.path = netem.NewPath(c.params, c.rnd.Int64())
		c.line = netem.NewLine(c.clk, c.Conn, c.path, netem.LineOptions{AckDelay: noAck})
		c.fast.Store(false)
	}
	line := c.line
	c.mu.Unlock()
	if line == nil {
		_, err := c.Conn.Write(b)
		return err
	}
	if err := line.Write(c.ctx, b, c.clk.Now()); err != nil {
		if errors.Is(err, context.Canceled) {
			return errClosed
		}
		return err
	}
	return nil
}

// noAck: Toxiproxy has no window; acknowledgements are not delayed.
func noAck() time.Duration { return 0 }

// flush waits until the delay line has written everything.
func (c *conn) flush() error {
	c.mu.Lock()
	line := c.line
	c.mu.Unlock()
	if line == nil {
		return nil
	}
	return line.Flush(c.ctx)
}

// waitUntil sleeps until t, and reports false early if the toxics change.
func (c *conn) waitUntil(t time.Time) (bool, error) {
	d := t.Sub(c.clk.Now())
	if d <= 0 {
		return true, nil
	}
	tm := c.clk.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C():
		return true, nil
	case <-c.changed:
		return false, nil
	case <-c.ctx.Done():
		return false, errClosed
	}
}

// resetPeer closes the socket so that the kernel sends a TCP RST.
func (c *conn) resetPeer() {
	type linger interface{ SetLinger(sec int) error }
	if l, ok := c.Conn.(linger); ok {
		l.SetLinger(0)
	}
	c.Close()
}

// CloseWrite half-closes the socket once the delay line is empty, after
// the delays of the slow_close toxics.
func (c *conn) CloseWrite() error {
	ops := c.current()
	if err := c.flush(); err != nil {
		return err
	}
	var d time.Duration
	for _, a := range ops {
		if a.on && a.t.kind == "slow_close" {
			d += a.t.millis("delay")
		}
	}
	if d > 0 {
		if err := clock.Sleep(c.ctx, c.clk, d); err != nil {
			return errClosed
		}
	}
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// Close closes the socket, discards what the delay line holds and stops
// the connection's timers. It is safe to call more than once.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.mu.Lock()
		c.closed = true
		line := c.line
		for _, a := range c.byID {
			a.stop()
		}
		c.mu.Unlock()
		c.closeErr = c.Conn.Close()
		if line != nil {
			line.Close()
		}
		c.px.forget(c)
	})
	return c.closeErr
}

// expiry closes a connection when a timeout toxic's timeout has passed
// since it began to apply or since data last arrived.
type expiry struct {
	kick     chan struct{} // capacity 1; data arrived: start over
	quit     chan struct{}
	quitOnce sync.Once
}

func startExpiry(c *conn, d time.Duration) *expiry {
	e := &expiry{kick: make(chan struct{}, 1), quit: make(chan struct{})}
	go e.run(c, d)
	return e
}

func (e *expiry) run(c *conn, d time.Duration) {
	t := c.clk.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			c.Close()
			return
		case <-e.kick:
			if !t.Stop() {
				select {
				case <-t.C():
				default:
				}
			}
			t.Reset(d)
		case <-e.quit:
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// touch restarts the timeout. Safe on a nil expiry (a zero timeout).
func (e *expiry) touch() {
	if e == nil {
		return
	}
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *expiry) halt() { e.quitOnce.Do(func() { close(e.quit) }) }

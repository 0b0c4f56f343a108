package whatif

import (
	"sync"
	"sync/atomic"
	"time"
)

// SampleEvery is the least time between two samples of a session's
// sockets' RTT.
const SampleEvery = time.Second

// Sampler returns the current kernel RTT (rawconn.RTT: tcpi_min_rtt) of a
// session's client and
// upstream sockets (0 for a socket that has none, a Unix socket). It is
// called from the server pump's goroutine, at most once per SampleEvery.
type Sampler func() (client, upstream time.Duration)

// Conn is one session's round-trip state machine. Its methods are safe
// for concurrent use, and a nil *Conn ignores every event, so a front end
// calls them unconditionally.
type Conn struct {
	t      *Table
	app    *app // fixed at Open
	sample Sampler

	awaiting atomic.Bool  // a round trip began and its first answer byte is not seen yet
	lastTxn  atomic.Int64 // unix second of the last completed transaction; 0 before one

	mu         sync.Mutex
	closed     bool          // guarded by mu
	busy       bool          // guarded by mu; the server owes an answer
	inTxn      bool          // guarded by mu; a transaction began and has not ended
	txnStart   time.Time     // guarded by mu; its first request
	roundTrips int64         // guarded by mu; round trips of the transaction so far
	server     time.Duration // guarded by mu; its server time so far
	client     time.Duration // guarded by mu; its client time so far
	lastSend   time.Time     // guarded by mu; latest request seen
	lastEnd    time.Time     // guarded by mu; end of the latest final answer
	stmt       bool          // guarded by mu; the transaction ran a statement
	gapOpen    bool          // guarded by mu; a transaction was recorded, the next has not been
	gapFrom    time.Time     // guarded by mu; when it ended
	lastSample time.Time     // guarded by mu; zero before the first sample
	clientRTT  time.Duration // guarded by mu; latest sample
	upRTT      time.Duration // guarded by mu; latest sample
}

// Open starts following a session of application k at now. sample may
// be nil (no RTT is sampled). The caller must Close the Conn when the
// session ends.
func (t *Table) Open(k Key, now time.Time, sample Sampler) *Conn {
	a := t.appFor(k, now)
	c := &Conn{t: t, app: a, sample: sample}
	t.mu.Lock()
	a.conns[c] = struct{}{}
	t.mu.Unlock()
	return c
}

// Awaiting reports whether the first answer byte of a round trip is
// awaited: only then does Answer need the time. It is one atomic load.
func (c *Conn) Awaiting() bool { return c != nil && c.awaiting.Load() }

// Send records a client request seen at now; stmt says it runs a
// statement (a PostgreSQL Query, Execute or FunctionCall, a MySQL
// COM_QUERY or COM_STMT_EXECUTE) rather than preparing one or asking
// for something else. The first request while the server owes nothing
// is a round trip (and, outside a transaction, the start of one); later
// ones only move the round trip's last request time.
func (c *Conn) Send(now time.Time, stmt bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if !c.busy {
		c.busy = true
		c.awaiting.Store(true)
		if !c.inTxn {
			c.inTxn, c.txnStart, c.stmt = true, now, false
			c.roundTrips, c.server, c.client = 0, 0, 0
		} else {
			c.client += max(now.Sub(c.lastEnd), 0)
		}
		c.roundTrips++
	}
	c.stmt = c.stmt || stmt
	c.lastSend = now
}

// Answer records server bytes seen at now; the first after a round trip
// began ends its server time.
func (c *Conn) Answer(now time.Time) {
	if c == nil || !c.awaiting.Load() {
		return
	}
	c.mu.Lock()
	if c.busy && c.awaiting.Load() {
		c.awaiting.Store(false)
		c.server += max(now.Sub(c.lastSend), 0)
	}
	c.mu.Unlock()
}

// Done records the end of a final answer at now. idle says the server
// owes nothing more (no pipelined request is outstanding); open that a
// transaction is still open after it. A Done with no request seen (an
// answer sluice did not see asked) is ignored. A transaction that ran
// no statement (a prepare round trip, a ping outside a transaction) is
// not one: its time stays in the client time around it.
func (c *Conn) Done(now time.Time, idle, open bool) {
	if c == nil {
		return
	}
	var x txn
	var gap time.Duration
	ended, gapped, sample := false, false, false
	c.mu.Lock()
	if c.closed || !c.busy {
		c.mu.Unlock()
		return
	}
	if c.awaiting.Load() {
		// The answer's first byte and its end came together.
		c.awaiting.Store(false)
		c.server += max(now.Sub(c.lastSend), 0)
	}
	if idle {
		c.busy = false
		c.lastEnd = now
	}
	if !open && c.inTxn {
		if c.stmt {
			ended = true
			x = txn{
				latency:    max(now.Sub(c.txnStart), 0),
				server:     c.server,
				client:     c.client,
				network:    time.Duration(c.roundTrips) * (c.clientRTT + c.upRTT),
				roundTrips: c.roundTrips,
			}
			if c.gapOpen {
				gap, gapped = max(c.txnStart.Sub(c.gapFrom), 0), true
			}
			c.gapOpen, c.gapFrom = true, now
		}
		c.inTxn = false
		if !idle {
			// Requests of the next transaction are already sent: it
			// begins now.
			c.inTxn, c.txnStart, c.stmt = true, now, false
			c.roundTrips, c.server, c.client = 0, 0, 0
		}
	}
	if c.sample != nil && (c.lastSample.IsZero() || now.Sub(c.lastSample) >= SampleEvery) {
		c.lastSample, sample = now, true
	}
	c.mu.Unlock()
	if ended {
		c.lastTxn.Store(now.Unix())
		c.t.record(c.app, now, x, gap, gapped)
	}
	if sample {
		cr, ur := c.sample()
		c.mu.Lock()
		c.clientRTT, c.upRTT = max(cr, 0), max(ur, 0)
		c.mu.Unlock()
		c.t.recordRTT(c.app, now, cr, ur)
	}
}

// Close ends the session at now: a transaction still open is not
// counted, and no later event counts.
func (c *Conn) Close(now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.busy, c.inTxn, c.gapOpen = true, false, false, false
	c.awaiting.Store(false)
	c.mu.Unlock()
	c.t.closeConn(c, now)
}

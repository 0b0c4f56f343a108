package proxy

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netem"
)

// delayedConn delays each Write of a session's opening exchange by its
// direction's emulated path (netem.Path.Release), as the pumps delay every
// later chunk: the round trips of a handshake (PostgreSQL's startup and
// authentication, MySQL's greeting, login and OK) cost what a query's do,
// as they do through tc netem or Toxiproxy. The opening's writes are
// request and answer in turn, so a wait before each write is the chunk's
// delay; nothing is pipelined behind it.
//
// The path is the one an unbound user's session gets (its link's, its
// route's and its route's pool's emulation): the user is not known yet.
// Everything a netem.Path models applies: the delay with its jitter,
// distribution and correlation, the rate's shaping and the stalls of lost
// segments (an RTO each). Knowingly left out, as small next to a round
// trip: the opening's paths are their own (the pumps start fresh ones, so
// the jitter's correlation, the token bucket's debt and the loss model's
// state do not carry over into the session); a write's delay counts from
// the write, not from the kernel's receive time of the bytes it answers;
// and the link's scheduler (its capacity, the Low class's limit) does not
// see the opening's bytes.
//
// A wait ends early, with ctx's error, when the opening's context ends:
// the opening's own end, or the session's abort (Shutdown, RemoveRoute).
// Once the opening ends, off is set and writes pass straight through, for
// a TLS connection that keeps the delayedConn underneath it; a plain
// socket is taken back out (unwrapOpening). Its methods are those of the
// net.Conn it wraps, safe for the use one opening makes of them.
type delayedConn struct {
	net.Conn
	ctx  context.Context // the opening's: a wait ends with it
	clk  clock.Clock
	path *netem.Path
	off  atomic.Bool
}

// newDelayed returns c delayed by p on clk while ctx lasts, or c itself
// when p emulates nothing.
func newDelayed(ctx context.Context, c net.Conn, clk clock.Clock, p netem.Params, seed int64) net.Conn {
	if p.IsZero() {
		return c
	}
	return &delayedConn{Conn: c, ctx: ctx, clk: clk, path: netem.NewPath(p, seed)}
}

func (c *delayedConn) Write(b []byte) (int, error) {
	if len(b) > 0 && !c.off.Load() {
		if err := clock.SleepUntil(c.ctx, c.clk, c.path.Release(c.clk.Now(), len(b))); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// NetConn returns the connection underneath, as tls.Conn's does, for
// code that looks for the socket (wire's peer watch).
func (c *delayedConn) NetConn() net.Conn { return c.Conn }

// unwrapOpening ends the opening's delay on c and returns the connection
// the session goes on with: the one underneath, if c is a delayedConn;
// c otherwise (a TLS connection over one, whose writes now pass through).
func unwrapOpening(c net.Conn, wrappers ...net.Conn) net.Conn {
	for _, w := range wrappers {
		if d, ok := w.(*delayedConn); ok {
			d.off.Store(true)
			if c == w {
				c = d.Conn
			}
		}
	}
	return c
}

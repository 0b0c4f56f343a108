package wire

import (
	"context"
	"errors"
	"net"
)

// WalkMode is what a Walk does with the client bytes being walked.
type WalkMode uint8

const (
	WalkPass WalkMode = iota // forwarded
	WalkHold                 // held back until the statement is admitted
	WalkDrop                 // discarded: the statement was refused or answered in the server's place
)

// maxHold bounds the bytes a Walk holds back, in bytes. Past it, what is
// held goes on without waiting.
const maxHold = 1 << 20

// Walk sorts the bytes of a client stream, chunk by chunk, into those a
// Rewriter under admission forwards, holds back until the statement is
// admitted, or drops. The protocol packages' client observers walk each
// chunk message by message and switch modes at message positions; Walk
// keeps what is held across chunks and builds each chunk's output. The
// zero value forwards. Not safe for concurrent use; a pump owns it.
type Walk struct {
	mode  WalkMode
	p     []byte // the chunk being walked
	start int    // where the run of bytes in the current mode began in p
	held  []byte // WalkHold: bytes held back from earlier chunks
	out   []byte // the chunk's output when it is not p itself
}

// Begin starts the walk of chunk p, in the mode the last chunk ended in.
func (w *Walk) Begin(p []byte) {
	w.p, w.start, w.out = p, 0, w.out[:0]
}

// Mode returns the current mode.
func (w *Walk) Mode() WalkMode { return w.mode }

// Start returns the offset in the chunk where the run of bytes walked in
// the current mode began.
func (w *Walk) Start() int { return w.start }

// Set disposes of the chunk's bytes from the run's start to i in the
// current mode and walks those from i on in mode m. Bytes held back go
// on when m is WalkPass after WalkHold, and are dropped when m is
// WalkDrop.
func (w *Walk) Set(i int, m WalkMode) {
	w.flush(w.p[w.start:i])
	if w.mode == WalkHold && m == WalkPass {
		w.out = append(w.out, w.held...)
		w.held = w.held[:0]
	}
	if m == WalkDrop {
		w.held = w.held[:0]
	}
	w.mode, w.start = m, i
}

// Result ends the walk of the chunk and returns the bytes to forward for
// it: the chunk itself when all of it passed, else a buffer valid until
// the next Begin.
func (w *Walk) Result() []byte {
	p := w.p
	w.p = nil
	if w.start == 0 && w.mode == WalkPass {
		return p
	}
	w.flush(p[w.start:])
	return w.out
}

// End returns what goes on at the end of the client stream: the bytes
// held back, unless the mode is WalkDrop. Nothing is held after it.
func (w *Walk) End() []byte {
	out := w.held
	w.held = nil
	if w.mode == WalkDrop {
		out = nil
	}
	return out
}

// flush disposes of a run of bytes walked in the current mode.
func (w *Walk) flush(b []byte) {
	switch w.mode {
	case WalkPass:
		w.out = append(w.out, b...)
	case WalkHold:
		if len(w.held)+len(b) > maxHold {
			// Too much to hold before the statement begins: it goes on
			// without waiting.
			w.out = append(append(w.out, w.held...), b...)
			w.held = w.held[:0]
			w.mode = WalkPass
			return
		}
		w.held = append(w.held, b...)
	}
}

// Ending reports whether err, from Gate.Wait under ctx, means the session
// is ending (ctx done, the client gone, the gate closed): nobody is left
// to answer the statement.
func Ending(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, ErrClientGone) || errors.Is(err, ErrGateClosed)
}

// Admitting is what a protocol's client observer under admission keeps
// besides its own framing: the session's gate and the walk of the
// client's bytes. Its Observe does nothing: the observer observes in
// Rewrite, which knows which bytes go upstream.
type Admitting struct {
	Gate *Gate
	Walk Walk
	err  error // sticky: set by Fail, returned by every later Begin
}

// Begin starts a Rewrite of the chunk p. When there is nothing to walk it
// reports done with what Rewrite returns: the error an earlier Rewrite
// failed with, or for an empty p the held bytes (Walk.End). Otherwise
// it begins the walk of p.
func (a *Admitting) Begin(p []byte) (out []byte, done bool, err error) {
	if a.err != nil {
		return nil, true, a.err
	}
	if len(p) == 0 {
		return a.Walk.End(), true, nil
	}
	a.Walk.Begin(p)
	return nil, false, nil
}

// Fail makes err sticky, so that every later Begin returns it, and
// returns it.
func (a *Admitting) Fail(err error) error {
	a.err = err
	return err
}

// Observe implements Observer. It does nothing; see Admitting.
func (a *Admitting) Observe([]byte) error { return nil }

// MayHold reports whether the gate might hold a request now; see
// Gate.MayHold.
func (a *Admitting) MayHold() bool { return a.Gate.MayHold() }

// SetPeer tells the gate which socket the client is on now (the proxy's
// event loop handing the session to its pumps); see Gate.SetPeer.
// Rewrite blocks only in the gate's Wait.
func (a *Admitting) SetPeer(client net.Conn) { a.Gate.SetPeer(client) }

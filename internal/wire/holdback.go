package wire

import "context"

// keepBuffer is the largest buffer a Holdback keeps between messages, in
// bytes; larger ones, grown for a long message, are dropped.
const keepBuffer = 64 << 10

// Holdback is the framing of a Rewriter for a protocol whose messages
// each begin with a header of fixed length that gives the message's
// whole size (PostgreSQL messages, MySQL packets). It passes the stream
// through untouched except for the messages Header picks: it holds each
// of those back until it is whole, however the chunks cut it, and shows
// it to Inspect, which may replace it. While every byte goes on
// unchanged and in order, a call's output is its input, not a copy.
//
// Set the fields before the first call and do not change them after.
// The zero value of the other state is a stream at a message boundary.
// A Holdback is not safe for concurrent use; a pump owns it.
type Holdback struct {
	// HeaderLen is the length of a message header in bytes, 1 to 8.
	HeaderLen int
	// Header is called once with each message header, HeaderLen bytes it
	// must not retain, and returns the whole size of the message in
	// bytes, header included, and whether to hold the message back and
	// show it to Inspect. A size below HeaderLen means the stream no
	// longer frames: the header and everything after it pass untouched
	// and Header is not called again.
	Header func(h []byte) (size int, inspect bool)
	// Inspect is called with each whole message Header picked, header
	// included, which it must not retain. It returns the bytes to forward
	// in its place, which the Holdback copies before it calls Inspect
	// again, or false to forward the message as it is.
	Inspect func(ctx context.Context, msg []byte) (repl []byte, ok bool)
	// Start, if not nil, is called where each message header begins,
	// before any of it is consumed, with the part of the current chunk
	// that precedes the header. An error ends Rewrite with that error.
	Start func(before []byte) error

	hdr     [8]byte // a header split across chunks
	hn      int     // bytes in hdr
	rem     int     // bytes of the current message still to pass untouched
	lost    bool    // the stream does not frame: pass everything
	holding bool    // a message is being held back in held
	held    []byte  // the message held back, header included
	size    int     // whole size of the held message
	out     []byte  // output of the current call when it is not the input
}

// Rewrite implements the framing of Rewriter.Rewrite: it returns the
// bytes to forward in place of p, valid until the next call. With an
// empty p, at the end of the stream, it returns the bytes of an
// incomplete message still held back, unchanged, and holds nothing
// more. Its only errors are those of Start.
func (h *Holdback) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	if len(p) == 0 {
		return h.heldBack(), nil
	}
	if cap(h.out) > keepBuffer {
		h.out = nil // the last call's output, no longer needed
	}
	o := NewOutput(p, h.out)
	for o.Pos() < len(p) {
		left := p[o.Pos():]
		switch {
		case h.lost:
			o.Pass(len(left))
			continue
		case h.rem > 0:
			n := min(h.rem, len(left))
			o.Pass(n)
			h.rem -= n
			continue
		case h.holding:
			n := min(h.size-len(h.held), len(left))
			h.held = append(h.held, left[:n]...)
			o.Skip(n)
			h.heldMore(ctx, &o)
			continue
		}
		// At a header.
		if h.hn == 0 && h.Start != nil {
			if err := h.Start(p[:o.Pos()]); err != nil {
				return nil, err
			}
		}
		var hdr []byte
		split := h.hn > 0 || len(left) < h.HeaderLen // assembled in h.hdr
		if !split {
			hdr = left[:h.HeaderLen]
		} else {
			n := copy(h.hdr[h.hn:h.HeaderLen], left)
			h.hn += n
			o.Skip(n)
			if h.hn < h.HeaderLen {
				continue
			}
			h.hn = 0
			hdr = h.hdr[:h.HeaderLen]
		}
		size, inspect := h.Header(hdr)
		switch {
		case size < h.HeaderLen || !inspect:
			if split {
				o.Emit(hdr)
			} else {
				o.Pass(h.HeaderLen)
			}
			h.lost = size < h.HeaderLen
			h.rem = max(0, size-h.HeaderLen)
		case split: // hold the message
			h.holding, h.size = true, size
			h.held = append(h.held[:0], hdr...)
			h.heldMore(ctx, &o)
		case len(left) >= size: // the whole message is here: no copy unless it changes
			if repl, ok := h.Inspect(ctx, left[:size]); ok {
				o.Skip(size)
				o.Emit(repl)
			} else {
				o.Pass(size)
			}
		default:
			h.holding, h.size = true, size
			h.held = append(h.held[:0], left...)
			o.Skip(len(left))
		}
	}
	h.out = o.Buffer()
	return o.Result(), nil
}

// heldMore emits the held message once it is whole.
func (h *Holdback) heldMore(ctx context.Context, o *Output) {
	if len(h.held) < h.size {
		return
	}
	h.holding = false
	if repl, ok := h.Inspect(ctx, h.held); ok {
		o.Emit(repl)
	} else {
		o.Emit(h.held)
	}
	if cap(h.held) > keepBuffer {
		h.held = nil
	}
}

// heldBack ends the stream: it returns, unchanged, the bytes of an
// incomplete message still held back, and holds nothing more.
func (h *Holdback) heldBack() []byte {
	var b []byte
	switch {
	case h.holding:
		b, h.holding = h.held, false
	case h.hn > 0:
		b, h.hn = h.hdr[:h.hn], 0
	}
	return b
}

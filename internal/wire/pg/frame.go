package pg

import (
	"encoding/binary"
	"fmt"
)

// headerLen is the size of a regular message header: one type byte and a
// four-byte big-endian length that counts itself but not the type byte.
const headerLen = 5

// framer splits one direction of a PostgreSQL v3 stream into messages
// without copying it. It holds at most one header (five bytes) and, when
// asked to, a capped prefix of the current message's payload; everything
// else is skipped by count. The zero value is not usable: set max.
//
// A framer is used by one goroutine.
type framer struct {
	max  int // largest accepted value of the length field, bytes
	hdr  [headerLen]byte
	hn   int    // header bytes held, 0..5
	typ  byte   // type of the current message, valid once hn == 5
	size int    // whole current message including its header, bytes
	rem  int    // payload bytes of the current message still to come
	keep int    // payload bytes to buffer for the current message
	buf  []byte // buffered payload prefix, len(buf) <= keep
}

// frameError describes a malformed message header.
type frameError struct {
	typ    byte
	length int64
	reason string
}

func (e *frameError) Error() string {
	return fmt.Sprintf("%s (message type %s, length %d)", e.reason, typeName(e.typ), e.length)
}

// inHeader reports whether the next byte belongs to a message header.
func (f *framer) inHeader() bool { return f.hn < headerLen }

// fillHeader copies header bytes from p and returns how many it took. The
// header is complete when inHeader turns false.
func (f *framer) fillHeader(p []byte) int {
	n := copy(f.hdr[f.hn:], p)
	f.hn += n
	return n
}

// parseHeader validates the completed header and prepares to skip the
// payload. It does not choose what to buffer: the caller sets keep.
func (f *framer) parseHeader() error {
	f.typ = f.hdr[0]
	n := int64(binary.BigEndian.Uint32(f.hdr[1:]))
	if n < 4 {
		return &frameError{typ: f.typ, length: n, reason: "invalid message length"}
	}
	if n > int64(f.max) {
		return &frameError{typ: f.typ, length: n,
			reason: fmt.Sprintf("message length exceeds the limit of %d bytes", f.max)}
	}
	f.rem = int(n) - 4
	f.size = int(n) + 1
	f.keep = 0
	f.buf = f.buf[:0]
	return nil
}

// payload consumes up to rem bytes of p, buffering what keep allows, and
// returns how many it consumed.
func (f *framer) payload(p []byte) int {
	n := min(len(p), f.rem)
	if room := f.keep - len(f.buf); room > 0 {
		f.buf = append(f.buf, p[:min(n, room)]...)
	}
	f.rem -= n
	return n
}

// complete reports whether the current message has been consumed whole.
func (f *framer) complete() bool { return f.hn == headerLen && f.rem == 0 }

// truncated reports whether the buffered prefix is shorter than the
// payload.
func (f *framer) truncated() bool { return len(f.buf) < f.size-headerLen }

// next forgets the current message so the following byte starts a header.
func (f *framer) next() { f.hn = 0 }

// setKeep asks to buffer up to n bytes of the current payload. The buffer
// grows to the largest n ever asked for and is then reused, so the steady
// path does not allocate.
func (f *framer) setKeep(n int) {
	n = min(n, f.rem)
	f.keep = n
	if cap(f.buf) < n {
		f.buf = make([]byte, 0, n)
	}
}

// messageHandler is what walk reports a stream's messages to.
type messageHandler interface {
	// header is called once a header is complete; it validates it
	// (parseHeader) and picks what of the payload to keep. An error
	// stops the walk.
	header() error
	// count is called with every run of bytes consumed, header or
	// payload.
	count(n int)
	// payloadRead is called after each run of payload bytes.
	payloadRead()
	// message is called when the current message has been consumed
	// whole, before the framer moves on to the next one.
	message()
}

// walk splits p into messages, continuing the one in progress, and
// reports them to h. It returns the first error of h.header.
func (f *framer) walk(p []byte, h messageHandler) error {
	for len(p) > 0 {
		if f.inHeader() {
			p = p[f.fillHeader(p):]
			if f.inHeader() {
				return nil
			}
			if err := h.header(); err != nil {
				return err
			}
			h.count(headerLen)
		} else {
			n := f.payload(p)
			p = p[n:]
			h.count(n)
			h.payloadRead()
		}
		if f.complete() {
			h.message()
			f.next()
		}
	}
	return nil
}

// typeName renders a message type byte for error messages.
func typeName(t byte) string {
	if t >= 0x21 && t <= 0x7e {
		return fmt.Sprintf("%q", t)
	}
	return fmt.Sprintf("0x%02x", t)
}

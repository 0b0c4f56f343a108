package mysql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// maxPayload is the largest payload of one physical packet. A payload of
// exactly this length says the logical packet continues in the next one.
const maxPayload = 0xffffff

// event is what framer.feed stopped at.
type event uint8

const (
	evNone     event = iota // every byte given was consumed
	evBegin                 // first header of a logical packet parsed
	evCaptured              // the capture reached want before the packet ended
	evEnd                   // logical packet complete
	evTooLarge              // logical packet exceeds max
)

// framer splits one direction's byte stream into logical packets without
// copying it: it keeps the 4-byte header it is assembling, counts payload
// bytes down, and copies only a bounded prefix of each logical packet
// (want bytes, at most cap(buf)) for the owner to decode.
//
// The owner calls feed until it returns evNone, handling each event in
// between; events are reported at the exact stream position where they
// occur, whatever the chunking. A framer is not safe for concurrent use.
type framer struct {
	hdr     [4]byte
	nhdr    int  // header bytes held
	payload bool // reading a payload (header complete)
	left    int  // payload bytes of the current physical packet still to come
	more    bool // current physical packet is maximal: the logical packet continues
	inside  bool // inside a logical packet (its first header has been read)

	max int64 // largest logical payload accepted; 0 means no limit

	// Current logical packet.
	seq     uint8  // sequence id of its first physical packet
	lastSeq uint8  // sequence id of the latest physical packet
	size    int64  // payload bytes announced so far
	buf     []byte // captured payload prefix; capacity set by the owner
	want    int    // capture target; the owner raises it at evBegin/evCaptured
	notify  bool   // report evCaptured when buf reaches want
	badSeq  int    // continuation packets whose sequence id did not follow
	held    int64  // bytes consumed (headers included) not yet claimed by the owner
	packets int64  // logical packets completed, for tests and logs
}

// feed consumes a prefix of p and reports the event that stopped it. It
// returns evNone only after consuming all of p. Consumed bytes are added
// to f.held, except that the first header of a logical packet is added
// whole when it completes (at evBegin): bytes are never credited to a
// packet before it has begun.
func (f *framer) feed(p []byte) (int, event) {
	n := 0
	for {
		if !f.payload {
			if len(p) == 0 {
				return n, evNone
			}
			k := copy(f.hdr[f.nhdr:], p)
			f.nhdr += k
			p = p[k:]
			n += k
			if f.inside {
				f.held += int64(k)
			}
			if f.nhdr < 4 {
				continue
			}
			f.nhdr = 0
			length := int(f.hdr[0]) | int(f.hdr[1])<<8 | int(f.hdr[2])<<16
			seq := f.hdr[3]
			f.payload, f.left, f.more = true, length, length == maxPayload
			first := !f.inside
			if first {
				f.inside = true
				f.held += 4
				f.seq, f.size, f.buf, f.want, f.notify = seq, 0, f.buf[:0], 0, false
			} else if seq != f.lastSeq+1 {
				f.badSeq++
			}
			f.lastSeq = seq
			f.size += int64(length)
			if f.max > 0 && f.size > f.max {
				return n, evTooLarge
			}
			if first {
				return n, evBegin
			}
			continue
		}
		if f.left == 0 {
			f.payload = false
			if !f.more {
				f.inside = false
				f.packets++
				return n, evEnd
			}
			continue
		}
		if len(p) == 0 {
			return n, evNone
		}
		k := min(f.left, len(p))
		captured := false
		if room := min(f.want, cap(f.buf)) - len(f.buf); room > 0 {
			c := min(room, k)
			f.buf = append(f.buf, p[:c]...)
			if f.notify && c == room {
				// Stop where the capture is complete: the owner may want more.
				captured, k = true, c
			}
		}
		f.left -= k
		f.held += int64(k)
		p = p[k:]
		n += k
		if captured && (f.left > 0 || f.more) {
			f.notify = false
			return n, evCaptured
		}
	}
}

// capture asks for the first want payload bytes of the current logical
// packet, and for evCaptured when they are in (unless the packet ends
// first). It is called at evBegin or evCaptured.
func (f *framer) capture(want int) {
	f.want = want
	f.notify = len(f.buf) < min(want, cap(f.buf))
}

// take returns and clears the bytes consumed since the last take.
func (f *framer) take() int64 {
	n := f.held
	f.held = 0
	return n
}

// tally credits the bytes a framer consumes to the statement they belong
// to, in batches: what the observers of both directions share. The zero
// value credits the client's bytes (AddUp), and nothing until st is set.
type tally struct {
	st   *session.Statement // where the current bytes go; nil if nowhere yet
	acc  int64              // bytes for st not yet added
	down bool               // the bytes are the server's: credit AddDown
}

// packetHandler is the observer a tally's observe reports to.
type packetHandler interface {
	// begin is called at evBegin, before the bytes so far are claimed:
	// the header is the new packet's, which begin may give another
	// statement.
	begin()
	// event is called at every other event but evNone; an error ends
	// observe.
	event(ev event) error
}

// observe feeds all of p to f, reporting its events to o and crediting
// the bytes it consumes to st, and returns o's first error.
func (t *tally) observe(f *framer, p []byte, o packetHandler) error {
	for {
		n, ev := f.feed(p)
		p = p[n:]
		if ev == evBegin {
			o.begin()
		}
		if t.st != nil {
			t.acc += f.take()
		}
		var err error
		if ev != evNone && ev != evBegin {
			err = o.event(ev)
		}
		if ev == evNone || err != nil {
			t.flush()
			return err
		}
	}
}

// flush adds the bytes held to st.
func (t *tally) flush() {
	if t.acc > 0 && t.st != nil {
		if t.down {
			t.st.AddDown(int(t.acc))
		} else {
			t.st.AddUp(int(t.acc))
		}
	}
	t.acc = 0
}

// Length-encoded integers.

// lenenc decodes a length-encoded integer at the start of b. It returns
// the value and its size; ok is false if b is too short or starts with
// 0xff (not an integer) or 0xfb (NULL).
func lenenc(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch c := b[0]; {
	case c < 0xfb:
		return uint64(c), 1, true
	case c == 0xfc:
		n = 3
	case c == 0xfd:
		n = 4
	case c == 0xfe:
		n = 9
	default:
		return 0, 0, false
	}
	if len(b) < n {
		return 0, 0, false
	}
	for i := n - 1; i >= 1; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, n, true
}

// okInfo is what an OK packet (0x00 or 0xfe header) or EOF packet says.
type okInfo struct {
	affected uint64
	status   uint16
	warnings uint16
}

// parseOK decodes the head of an OK packet (either header byte). ok is
// false if the captured prefix is too short.
func parseOK(b []byte, caps uint32) (okInfo, bool) {
	if len(b) < 1 {
		return okInfo{}, false
	}
	var r okInfo
	var n int
	var ok bool
	p := b[1:]
	if r.affected, n, ok = lenenc(p); !ok {
		return r, false
	}
	p = p[n:]
	if _, n, ok = lenenc(p); !ok { // last insert id
		return r, false
	}
	p = p[n:]
	if caps&capProtocol41 != 0 {
		if len(p) < 4 {
			return r, false
		}
		r.status = binary.LittleEndian.Uint16(p)
		r.warnings = binary.LittleEndian.Uint16(p[2:])
	} else if caps&capTransactions != 0 {
		if len(p) < 2 {
			return r, false
		}
		r.status = binary.LittleEndian.Uint16(p)
	}
	return r, true
}

// parseEOF decodes an EOF packet: 0xfe, warnings, status (protocol 4.1).
// The 1-byte EOF of older servers has neither.
func parseEOF(b []byte) okInfo {
	if len(b) < 5 {
		return okInfo{}
	}
	return okInfo{warnings: binary.LittleEndian.Uint16(b[1:]), status: binary.LittleEndian.Uint16(b[3:])}
}

// parseERR returns the error number of an ERR packet, or 0 if b is too
// short to hold one.
func parseERR(b []byte) uint16 {
	if len(b) < 3 || b[0] != 0xff {
		return 0
	}
	return binary.LittleEndian.Uint16(b[1:])
}

// Error numbers sluice sends or recognises. Those sluice sends are from
// the server's range: clients print a server error's message, while
// libmariadb answers a client-range number (2000-2999) from a server
// with "Received malformed packet" (CR_MALFORMED_PACKET).
const (
	erHandshake       = 1043 // ER_HANDSHAKE_ERROR
	erNetPacketTooBig = 1153 // ER_NET_PACKET_TOO_LARGE
	erUnknown         = 1105 // ER_UNKNOWN_ERROR: sluice ended the session for an internal error
	erQueryInterrupt  = 1317 // ER_QUERY_INTERRUPTED: what KILL QUERY produces

	erConnectionKilled = 1927 // ER_CONNECTION_KILLED: an administrator ended the session (pg_terminate_backend)
	// erUpstream says sluice could not reach the upstream or set up the
	// session with it (refused, timed out, TLS failed). ProxySQL uses
	// 9001 for its connect timeout to a backend.
	erUpstream   = 9001
	progressCode = 0xffff
)

// errPacket builds a protocol 4.1 ERR packet, header included.
func errPacket(seq uint8, code uint16, state, msg string) []byte {
	if len(state) != 5 {
		state = sqlstate.MySQLGeneral
	}
	if len(msg) > 512 {
		msg = msg[:512]
	}
	n := 1 + 2 + 1 + 5 + len(msg)
	b := make([]byte, 4, 4+n)
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), seq
	b = append(b, 0xff, byte(code), byte(code>>8), '#')
	b = append(b, state...)
	return append(b, msg...)
}

// errPacketTooLarge is what a *tooLargeError is.
var errPacketTooLarge = errors.New("packet too large")

// tooLargeError is returned by readPacket for a packet above its limit.
type tooLargeError struct {
	seq       uint8 // sequence id of the packet
	size, max int   // announced payload length and limit, bytes
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("packet too large: %d bytes, at most %d expected", e.size, e.max)
}

func (e *tooLargeError) Is(target error) bool { return target == errPacketTooLarge }

// readPacket reads one physical packet whose payload is at most max
// bytes (and never a continued one) and returns it with its header. Its
// buffer grows with the bytes that arrive, never ahead of them to the
// announced length: a peer that announces a large packet and stalls
// costs what it sent. A packet over max is not read past its header, and
// the error is a *tooLargeError.
func readPacket(r io.Reader, max int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	if n > max || n == maxPayload {
		return nil, &tooLargeError{seq: h[3], size: n, max: max}
	}
	b := make([]byte, 4, 4+min(n, readStep))
	copy(b, h[:])
	return readAppend(r, b, n)
}

// readStep is the first allocation readAppend makes for a payload: most
// handshake packets fit.
const readStep = 512

// readAppend reads n more bytes from r onto buf, growing buf as they
// arrive (at most doubling it at each step), so it never holds much
// more than twice what came. On error it returns buf with what was read,
// and io.ErrUnexpectedEOF for an end of stream after some of the n
// bytes, as io.ReadFull does.
func readAppend(r io.Reader, buf []byte, n int) ([]byte, error) {
	want := len(buf) + n
	got := 0
	for len(buf) < want {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(want-len(buf), max(readStep, cap(buf))))
		}
		k, err := r.Read(buf[len(buf):min(cap(buf), want)])
		buf = buf[:len(buf)+k]
		got += k
		if err != nil && len(buf) < want {
			if err == io.EOF && got > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

// packet prepends a header to payload.
func packet(seq uint8, payload []byte) []byte {
	n := len(payload)
	b := make([]byte, 4, 4+n)
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), seq
	return append(b, payload...)
}

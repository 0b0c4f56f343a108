package pg

import (
	"fmt"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// serverObserver watches server-to-client bytes from the first byte the
// server sends after the startup message. It attributes each message to
// the oldest request in flight, ends statements, and installs the cancel
// key. It runs in the server pump's goroutine only.
type serverObserver struct {
	fr    framer
	t     *tracker
	clk   *clock.Replay    // the session's clock; set to a chunk's time while it is replayed
	onKey func(key []byte) // called with BackendKeyData's payload (pid + secret)
	gate  *wire.Gate       // the session's admission, told of each ReadyForQuery; nil admits all
	inj   *injector        // answers sluice gives in the server's place; nil without admission
	wi    *whatif.Conn     // the session's round trips, told of answers; nil without
	err   error            // sticky

	ready bool  // the first ReadyForQuery (end of startup) has been seen
	lastZ bool  // the last complete message was a ReadyForQuery
	cur   entry // oldest request in flight, valid when curOK
	curOK bool  // only this goroutine pops, so a cached front stays the front

	prev     *session.Statement // last statement ended since the last ReadyForQuery
	batchErr string             // SQLSTATE of the error that aborted the batch
	rows     int64              // simple query: rows summed over its results; -1 none
	code     string             // simple query: SQLSTATE of its error
	dataRows int64              // DataRows of the front statement so far

	tgt target
	st  *session.Statement // owner of the current message when tgt == toStatement
}

// Observe implements wire.Observer. A malformed header or a type byte no
// server sends is an error; every later call returns it again.
func (s *serverObserver) Observe(p []byte) error {
	if s.wi.Awaiting() && s.ready {
		s.wi.Answer(s.clk.Now())
	}
	if s.err == nil {
		s.err = s.fr.walk(p, s)
	}
	if s.inj != nil && s.inj.Queued() {
		s.inj.check()
	}
	return s.err
}

// ReplayAt implements wire.Replayer.
func (s *serverObserver) ReplayAt(at time.Time) { s.clk.Set(at) }

// atBoundary reports whether the server's bytes observed so far end at
// a message boundary, so that a message sluice sends the client now is
// read as a message of its own; false after a malformed message. It is
// called only once the down pump has stopped.
func (s *serverObserver) atBoundary() bool { return s.err == nil && s.fr.hn == 0 }

// Remaining implements wire.Remainder: the bytes left of the header or
// the payload of the message in flight.
func (s *serverObserver) Remaining() (int, bool) {
	switch f := &s.fr; {
	case s.err != nil:
		return 0, false
	case f.hn == 0:
		return 0, true
	case f.inHeader():
		return headerLen - f.hn, true
	default:
		return f.rem, true
	}
}

// payloadRead implements messageHandler; the server's messages act only
// once complete.
func (s *serverObserver) payloadRead() {}

// header validates a completed header and picks the message's owner.
func (s *serverObserver) header() error {
	if !serverType(s.fr.hdr[0]) {
		return fmt.Errorf("pg: malformed server message: unknown message type %s", typeName(s.fr.hdr[0]))
	}
	if err := s.fr.parseHeader(); err != nil {
		return fmt.Errorf("pg: malformed server message: %w", err)
	}
	switch s.fr.typ {
	case 'D': // DataRow: the hot path
		s.dataRows++
	case 'C': // CommandComplete
		s.fr.setKeep(maxTag)
	case 'E': // ErrorResponse
		s.fr.setKeep(maxErrorPrefix)
	case 'Z': // ReadyForQuery
		s.fr.setKeep(1)
	case 'K': // BackendKeyData
		s.fr.setKeep(4 + maxSecret)
	}
	s.st = nil
	switch {
	case !s.ready:
		s.tgt = toNone // authentication and session parameters
	case s.front() && s.cur.st != nil:
		s.tgt, s.st = toStatement, s.cur.st
	case s.curOK && s.prev != nil:
		s.tgt, s.st = toStatement, s.prev // ReadyForQuery after a batch
	default:
		// A batch that executes nothing (a prepare round trip), or no
		// request at all: the next statement owns it, queued or not.
		if s.st = s.t.nextStatement(); s.st != nil {
			s.tgt = toStatement
		} else {
			s.tgt = toPending
		}
	}
	return nil
}

// serverType reports whether t is a message type a server sends.
func serverType(t byte) bool {
	switch t {
	case 'R', 'K', '2', '3', 'C', 'd', 'c', 'G', 'H', 'W', 'D', 'I', 'E', 'V',
		'n', 'N', 'A', 't', 'S', '1', 's', 'Z', 'T', 'v':
		return true
	}
	return false
}

// front loads the oldest request in flight into cur and reports whether
// there is one.
func (s *serverObserver) front() bool {
	if !s.curOK {
		s.cur, s.curOK = s.t.front()
	}
	return s.curOK
}

// count attributes n bytes of the current message.
func (s *serverObserver) count(n int) {
	switch s.tgt {
	case toStatement:
		s.st.AddDown(n)
	case toPending:
		s.t.addPending(n)
	}
}

// Idle reports whether the server's bytes observed so far end with a
// ReadyForQuery that answered every request the client sent: neither
// peer has more to say until the client's next request (but for the
// server's asynchronous messages).
func (s *serverObserver) Idle() bool {
	return s.err == nil && s.ready && s.lastZ && s.fr.hn == 0 && s.t.queued() == 0
}

// message acts on a complete message.
func (s *serverObserver) message() {
	s.lastZ = s.fr.typ == 'Z'
	if !s.ready {
		// Startup: only the key, a fatal error and the first
		// ReadyForQuery matter.
		switch s.fr.typ {
		case 'K':
			s.onBackendKeyData()
		case 'Z':
			s.ready = true
		case 'E':
			if code, fatal := errorFields(s.fr.buf); fatal {
				s.failAll(session.Failed, code)
			}
		}
		return
	}
	switch s.fr.typ {
	case 'C':
		s.onCommandComplete()
	case 'I': // EmptyQueryResponse
		s.endExtended(session.OK, -1, "")
	case 's': // PortalSuspended: the rows sent so far
		s.endExtended(session.OK, s.dataRows, "")
	case 'E':
		s.onErrorResponse()
	case 'Z':
		s.onReadyForQuery()
	case 'K':
		s.onBackendKeyData()
	case 'G', 'H', 'W':
		s.onCopyResponse()
	}
}

// endExtended ends the front statement if it is an Execute, and reports
// whether it did.
func (s *serverObserver) endExtended(o session.Outcome, rows int64, code string) bool {
	if !s.front() || s.cur.kind != kindExtended {
		return false
	}
	s.t.pop()
	s.curOK = false
	s.cur.st.End(s.clk.Now(), o, rows, code)
	s.prev = s.cur.st
	s.dataRows = 0
	return true
}

// failAll ends every request in flight: the server is closing the session.
func (s *serverObserver) failAll(o session.Outcome, code string) {
	now := s.clk.Now()
	for {
		e, ok := s.t.pop()
		if !ok {
			break
		}
		if e.st != nil {
			e.st.End(now, o, -1, code)
		}
	}
	s.curOK = false
}

// outcomeOf maps a SQLSTATE to an outcome: none is OK, query_canceled
// (57014) is Cancelled, anything else Failed.
func outcomeOf(code string) session.Outcome {
	switch code {
	case "":
		return session.OK
	case sqlstate.QueryCanceled:
		return session.Cancelled
	}
	return session.Failed
}

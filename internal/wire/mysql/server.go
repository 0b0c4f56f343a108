package mysql

// This file holds the server-to-client observer: it follows each answer
// (result sets, OK, ERR, EOF, prepare and authentication replies) to its
// end and closes the statement it belongs to.

import (
	"encoding/binary"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// Response states.
type rstate uint8

const (
	rsFirst       rstate = iota // first packet of a result: OK, ERR, LOCAL INFILE or column count
	rsDefs                      // definitions to go (d.defs), then maybe an EOF, then d.next
	rsDefsEOF                   // the EOF closing a block of definitions
	rsRows                      // rows until an EOF/OK terminator or ERR
	rsPrepare                   // PREPARE_OK or ERR
	rsPrepareCols               // (transient) column definitions of a PREPARE_OK
	rsDone                      // (transient) the answer is complete
	rsFieldList                 // column definitions until EOF or ERR
	rsAuth                      // authentication until OK or ERR
	rsSimple                    // any one packet
	rsStream                    // packets until EOF or ERR
)

// downCapture is how much of each server packet is copied: enough for
// the head of OK, ERR, EOF, PREPARE_OK and column count packets.
const downCapture = 48

// downObserver watches server-to-client bytes. It is called from one
// goroutine.
type downObserver struct {
	c   *conn
	clk *clock.Replay // the session's clock; set to a chunk's time while it is replayed
	f   framer
	arr [downCapture]byte

	active   bool    // an answer is being read
	cur      pending // the command answered
	state    rstate
	defs     uint64 // definitions still to come in rsDefs
	defsEOF  bool   // an EOF follows the definitions
	next     rstate // state after the definitions
	cols     uint64 // column definitions of a PREPARE_OK, after its parameters
	rows     int64  // rows reported so far in this answer
	reported bool   // rows holds a count the server reported
	setRows  int64  // rows of the result set being read

	tally // the server's bytes, credited with AddDown

	gate   *wire.Gate    // the session's admission, told of each final answer; nil admits all
	inj    *injector     // answers sluice gives in the server's place; nil without admission
	status atomic.Uint32 // status flags of the server's last OK or EOF

	expect     int  // sequence id expected next; -1 when unknown
	clientTurn bool // the client speaks before the server's next packet
	seqWarned  bool // a sequence mismatch was logged
}

var _ wire.Observer = (*downObserver)(nil)

// ReplayAt implements wire.Replayer.
func (d *downObserver) ReplayAt(at time.Time) { d.clk.Set(at) }

// Observe implements wire.Observer.
func (d *downObserver) Observe(p []byte) error {
	if d.c.wi.Awaiting() {
		d.c.wi.Answer(d.clk.Now())
	}
	err := d.observe(&d.f, p, d)
	if d.inj != nil && d.inj.Queued() {
		d.inj.check()
	}
	return err
}

// Idle reports whether the server's bytes observed so far end an answer
// and no command of the client's waits for one, past authentication:
// neither peer has more to say until the client's next command.
func (d *downObserver) Idle() bool {
	if f := &d.f; d.active || f.payload || f.inside || f.nhdr > 0 {
		return false
	}
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.c.phase == phCommand && d.c.head == len(d.c.queue)
}

// errSeq returns the sequence id of a packet sluice sends the client in
// the server's place now: after the server's latest packet while an
// answer is under way, else afterCommand (the client's command's + 1).
// It reports false when the server's bytes stopped inside a packet,
// where no packet can follow. It is called only once the down pump has
// stopped.
func (d *downObserver) errSeq(afterCommand uint8) (uint8, bool) {
	if d.f.payload || d.f.inside || d.f.nhdr > 0 {
		return 0, false
	}
	if d.active {
		return d.f.lastSeq + 1, true
	}
	return afterCommand, true
}

// Remaining implements wire.Remainder: the bytes left of the physical
// packet's header or payload in flight, or the next header's 4 when a
// logical packet continues.
func (d *downObserver) Remaining() (int, bool) {
	switch f := &d.f; {
	case f.nhdr > 0:
		return len(f.hdr) - f.nhdr, true
	case f.payload:
		return f.left, true
	case f.inside:
		return len(f.hdr), true
	}
	return 0, true
}

// event implements packetHandler: an answer moves on at each packet's
// end.
func (d *downObserver) event(ev event) error {
	if ev == evEnd {
		d.end()
	}
	return nil
}

func (d *downObserver) begin() {
	d.f.capture(downCapture)
	seq := d.f.seq
	if !d.active {
		p, ok := d.c.pop()
		if !ok {
			p = pending{kind: respSimple}
			d.expect = -1
			d.c.log.Debug("mysql: server packet answering no command", "session", d.c.sess.ID)
		} else {
			d.expect = int(p.seq) + 1
		}
		d.active, d.cur, d.rows, d.reported = true, p, 0, false
		d.state = initialState(p.kind)
		d.flush()
		d.st = p.st
	}
	if d.expect >= 0 && uint8(d.expect) != seq && !d.seqWarned {
		d.seqWarned = true
		d.c.log.Warn("mysql: unexpected sequence id from the server",
			"session", d.c.sess.ID, "got", seq, "want", uint8(d.expect))
	}
}

func initialState(k respKind) rstate {
	switch k {
	case respResult:
		return rsFirst
	case respPrepare:
		return rsPrepare
	case respFieldList:
		return rsFieldList
	case respRows:
		return rsRows
	case respAuth:
		return rsAuth
	case respStream:
		return rsStream
	}
	return rsSimple
}

func (d *downObserver) end() {
	if d.f.badSeq > 0 && !d.seqWarned {
		d.seqWarned = true
		d.c.log.Warn("mysql: unexpected sequence id in a continued server packet", "session", d.c.sess.ID)
	}
	b := d.f.buf
	// MariaDB progress reports look like ERR 65535 and answer nothing.
	if !(len(b) >= 3 && b[0] == 0xff && parseERR(b) == progressCode) {
		d.dispatch(b, d.f.size)
	}
	d.expect = int(d.f.lastSeq) + 1
	if d.clientTurn {
		d.expect, d.clientTurn = -1, false
	}
	if d.st == nil {
		d.f.take()
	}
}

// isTerminator reports whether a packet in a row or definition stream
// ends it: an EOF packet, or with CLIENT_DEPRECATE_EOF an OK packet with
// the 0xfe header (a row starting with 0xfe is at least 16 MiB).
func (d *downObserver) isTerminator(b []byte, size int64) bool {
	if len(b) == 0 || b[0] != 0xfe {
		return false
	}
	if d.c.caps&capDeprecateEOF != 0 {
		return size < maxPayload
	}
	return size < 9
}

// terminatorInfo decodes a terminator found by isTerminator.
func (d *downObserver) terminatorInfo(b []byte, size int64) okInfo {
	if d.c.caps&capDeprecateEOF != 0 && size > 5 {
		r, _ := parseOK(b, d.c.caps)
		return r
	}
	return parseEOF(b)
}

// dispatch advances the answer by one server packet, b being its
// captured prefix and size its length.
func (d *downObserver) dispatch(b []byte, size int64) {
	if len(b) > 0 && b[0] == 0xff {
		d.finishErr(b)
		return
	}
	switch d.state {
	case rsFirst:
		d.first(b, size)
	case rsDefs:
		d.defs--
		if d.defs == 0 {
			if d.defsEOF {
				d.state = rsDefsEOF
			} else {
				d.enter(d.next)
			}
		}
	case rsDefsEOF:
		if !d.isTerminator(b, size) {
			// Not the EOF expected: take it for what follows.
			d.enter(d.next)
			if d.active && d.state != rsDefsEOF {
				d.dispatch(b, size)
			}
			return
		}
		if info := parseEOF(b); d.next == rsRows && info.status&statusCursorExists != 0 {
			d.finish(session.OK) // a cursor is open: rows come with COM_STMT_FETCH
			return
		}
		d.enter(d.next)
	case rsRows:
		if !d.isTerminator(b, size) {
			d.setRows++
			return
		}
		info := d.terminatorInfo(b, size)
		if d.cur.kind == respResult && d.setRows == 0 && info.status&statusCursorExists != 0 {
			d.finish(session.OK) // a cursor is open: rows come with COM_STMT_FETCH
			return
		}
		d.rows += d.setRows
		d.setRows, d.reported = 0, true
		if info.status&statusMoreResults != 0 {
			d.state = rsFirst
			return
		}
		d.finish(session.OK)
	case rsPrepare:
		if len(b) < 9 || b[0] != 0x00 {
			d.finish(session.OK)
			return
		}
		id := binary.LittleEndian.Uint32(b[1:])
		d.cols = uint64(binary.LittleEndian.Uint16(b[5:]))
		params := uint64(binary.LittleEndian.Uint16(b[7:]))
		c := d.c
		c.mu.Lock()
		if _, ok := c.prepared[id]; ok || len(c.prepared) < maxPrepared {
			c.prepared[id] = d.cur.sql
		}
		c.mu.Unlock()
		d.expectDefs(params, params > 0 && c.caps&capDeprecateEOF == 0, rsPrepareCols)
	case rsFieldList:
		if d.isTerminator(b, size) {
			d.finish(session.OK)
		}
	case rsStream:
		if d.isTerminator(b, size) {
			d.finish(session.OK)
			return
		}
		if d.cur.cmd != comTableDump && d.c.sess.Kind() != session.KindReplication {
			d.c.sess.SetKind(session.KindReplication) // the server streams its binlog
			d.c.wi.Close(d.clk.Now())
		}
	case rsAuth:
		if len(b) > 0 && b[0] == 0x00 {
			d.authDone(true)
			d.okPacket(b)
			d.finish(session.OK)
			return
		}
		d.clientTurn = true // auth switch (0xfe) or more data (0x01)
	case rsSimple:
		if len(b) > 0 && b[0] == 0x00 {
			d.okPacket(b)
			switch d.cur.cmd {
			case comInitDB:
				s := d.c.sess
				s.SetIdentity(s.User(), d.cur.db, s.Application())
			case comResetConnection:
				d.forgetPrepared()
			case comRegisterSlave:
				d.c.sess.SetKind(session.KindReplication) // the server took the replica
				d.c.wi.Close(d.clk.Now())
			}
		}
		d.finish(session.OK)
	}
}

// first handles the first packet of a result.
func (d *downObserver) first(b []byte, size int64) {
	if len(b) == 0 {
		d.finish(session.OK)
		return
	}
	switch b[0] {
	case 0x00:
		info, _ := d.okPacket(b)
		if info.status&statusMoreResults == 0 {
			d.finish(session.OK)
		}
	case 0xfb: // LOCAL INFILE: the client sends the file, then an empty packet
		c := d.c
		c.mu.Lock()
		c.phase, c.infile = phInfile, d.cur.st
		c.mu.Unlock()
		d.clientTurn = true
	case 0xfe:
		if info := d.terminatorInfo(b, size); info.status&statusMoreResults == 0 {
			d.finish(session.OK)
		}
	default:
		n, k, ok := lenenc(b)
		if !ok {
			d.finish(session.OK)
			return
		}
		if d.c.caps&capOptionalMetadata != 0 || d.c.ext&extCacheMetadata != 0 {
			if len(b) > k && b[k] == 0 {
				n = 0 // metadata not sent
			}
		}
		d.setRows = 0
		d.expectDefs(n, d.c.caps&capDeprecateEOF == 0, rsRows)
	}
}

// okPacket adds an OK packet's affected rows to the answer.
func (d *downObserver) okPacket(b []byte) (okInfo, bool) {
	info, ok := parseOK(b, d.c.caps)
	if ok {
		d.rows += int64(info.affected)
		d.reported = true
	}
	return info, ok
}

// expectDefs arranges for n definitions, then an EOF if eof, then next.
func (d *downObserver) expectDefs(n uint64, eof bool, next rstate) {
	d.defs, d.defsEOF, d.next = n, eof, next
	switch {
	case n > 0:
		d.state = rsDefs
	case eof:
		d.state = rsDefsEOF
	default:
		d.enter(next)
	}
}

func (d *downObserver) enter(s rstate) {
	switch s {
	case rsPrepareCols:
		d.expectDefs(d.cols, d.cols > 0 && d.c.caps&capDeprecateEOF == 0, rsDone)
	case rsDone:
		d.finish(session.OK)
	default:
		d.state = s
	}
}

func (d *downObserver) authDone(ok bool) {
	c := d.c
	c.mu.Lock()
	c.phase, c.authSt = phCommand, nil
	c.mu.Unlock()
	if ok && d.cur.cmd == comChangeUser {
		s := d.c.sess
		s.SetIdentity(d.cur.user, d.cur.db, s.Application())
		d.forgetPrepared()
	}
}

// forgetPrepared drops the session's prepared statements, as the server
// does on COM_CHANGE_USER and COM_RESET_CONNECTION.
func (d *downObserver) forgetPrepared() {
	c := d.c
	c.mu.Lock()
	clear(c.prepared)
	c.mu.Unlock()
}

// finishErr ends the answer with the ERR packet b.
func (d *downObserver) finishErr(b []byte) {
	if d.cur.kind == respAuth {
		d.authDone(false)
	}
	code := parseERR(b)
	o := session.Failed
	if code == erQueryInterrupt || (d.st != nil && d.st.CancelRequested()) {
		o = session.Cancelled
	}
	d.end0(o, errCode(code))
}

// finish ends the answer with outcome o.
func (d *downObserver) finish(o session.Outcome) { d.end0(o, "") }

func (d *downObserver) end0(o session.Outcome, code string) {
	rows := int64(-1)
	if d.reported {
		rows = d.rows
	}
	d.flush()
	var now time.Time
	if d.st != nil || d.c.wi != nil {
		now = d.clk.Now()
	}
	if d.st != nil {
		d.st.End(now, o, rows, code)
	}
	if d.gate != nil && d.cur.st != nil {
		d.noteStatus()
		d.gate.Answered(d.status.Load()&statusInTrans != 0)
	}
	if d.c.wi != nil && d.cur.st != nil && d.cur.kind != respAuth {
		d.noteStatus()
		d.c.wi.Done(now, d.c.idle(), d.status.Load()&statusInTrans != 0)
	}
	d.active, d.st, d.cur, d.state = false, nil, pending{}, rsSimple
}

// noteStatus records the status flags of the packet that ends an answer,
// when it is an OK or EOF packet (an ERR, or a PREPARE_OK, has none: the
// last ones stand).
func (d *downObserver) noteStatus() {
	b, size := d.f.buf, d.f.size
	switch {
	case len(b) == 0:
	case b[0] == 0x00 && d.cur.kind != respPrepare:
		if info, ok := parseOK(b, d.c.caps); ok {
			d.status.Store(uint32(info.status))
		}
	case d.isTerminator(b, size):
		d.status.Store(uint32(d.terminatorInfo(b, size).status))
	}
}

// errCode formats a server error number as recorded in a statement.
func errCode(code uint16) string {
	switch code {
	case erQueryInterrupt:
		return "1317"
	}
	return strconv.Itoa(int(code))
}

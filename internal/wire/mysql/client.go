package mysql

// This file holds the client-to-server observer: it frames the commands a
// client sends, opens a statement for each and attributes its bytes.

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wire"
)

// upObserver watches client-to-server bytes. It is called from one
// goroutine.
type upObserver struct {
	c   *conn
	clk *clock.Replay // the session's clock; set to a chunk's time while it is replayed
	f   framer
	buf []byte // capture buffer, fixed capacity

	// Current logical packet.
	mode    phase
	decoded bool
	start   time.Time
	p       pending // the command being read

	tally       // the client's bytes, credited with AddUp
	carry int64 // bytes of answerless commands, for the next statement

	lastSQL      [4]string // recent COM_QUERY texts, reused to spare an allocation
	lastSQLNext  int
	lastPrepared string // SQL of the latest COM_STMT_PREPARE (statement id -1)

	adm *admitUp // the session's admission, told of each command decoded; nil without

	dump *session.Statement // the binlog dump last sent; nil before one
}

var _ wire.Observer = (*upObserver)(nil)

// Observe implements wire.Observer.
func (u *upObserver) Observe(p []byte) error { return u.observe(&u.f, p, u) }

// ReplayAt implements wire.Replayer.
func (u *upObserver) ReplayAt(at time.Time) { u.clk.Set(at) }

// event implements packetHandler. A packet over the limit is fatal.
func (u *upObserver) event(ev event) error {
	switch ev {
	case evTooLarge:
		return u.fatal(erNetPacketTooBig, fmt.Sprintf(
			"sluice: packet from the client exceeds the route's limit of %d bytes", u.f.max))
	case evCaptured:
		u.captured()
	case evEnd:
		u.end()
	}
	return nil
}

// target sends the bytes that follow (and those of the current packet
// not yet claimed) to st.
func (u *upObserver) target(st *session.Statement) {
	u.flush()
	u.st = st
	if st != nil {
		u.acc = u.f.take()
	}
}

func (u *upObserver) fatal(code uint16, msg string) error {
	return &wire.Fatal{
		Err:   fmt.Errorf("mysql: %s", msg),
		Reply: errPacket(u.f.lastSeq+1, code, sqlstate.MySQLCommunication, msg),
	}
}

func (u *upObserver) begin() {
	c := u.c
	c.mu.Lock()
	u.mode = c.phase
	var st *session.Statement
	switch u.mode {
	case phInfile:
		st = c.infile
	case phAuth:
		st = c.authSt
	}
	c.mu.Unlock()
	u.decoded = false
	if u.mode != phCommand {
		u.target(st)
		return
	}
	u.target(nil)
	u.start = u.clk.Now()
	u.f.capture(1)
}

func (u *upObserver) captured() {
	if u.mode != phCommand || u.decoded {
		return
	}
	if len(u.f.buf) == 1 {
		if want := u.wants(u.f.buf[0]); want > 1 {
			u.f.capture(want)
			if u.f.notify {
				return // more to come
			}
		}
	}
	u.decode()
}

// wants is how many payload bytes decoding cmd needs.
func (u *upObserver) wants(cmd byte) int {
	switch cmd {
	case comQuery, comStmtPrepare, comInitDB, comChangeUser, comFieldList:
		return cap(u.buf)
	case comStmtExecute, comStmtFetch, comStmtBulkExecute:
		return 10
	case comStmtClose, comStmtReset, comStmtSendLongData:
		return 7
	}
	return 1
}

// decode reads the command from the captured prefix and opens its
// statement. A command shorter than its fixed fields is decoded as far
// as it goes and forwarded like any other: the server answers it with
// an error (a COM_STMT_CLOSE or COM_STMT_SEND_LONG_DATA, with nothing),
// and the session goes on.
func (u *upObserver) decode() {
	u.decodeCommand()
	if u.adm != nil {
		u.adm.decv = u.p
		u.adm.dec = &u.adm.decv
	}
}

func (u *upObserver) decodeCommand() {
	u.decoded = true
	c := u.c
	b := u.f.buf
	if len(b) == 0 { // an empty packet: the server answers "unknown command"
		u.p = pending{kind: respSimple, cmd: comSleep}
		u.open(commandName(comSleep))
		return
	}
	cmd := b[0]
	if u.dump != nil {
		if u.dump.Outcome() == session.Running {
			// A semi-synchronous replica's acknowledgement (0xef, binlog
			// position and file): no answer; its bytes are the dump's.
			u.p = pending{kind: respNone, cmd: cmd}
			u.target(u.dump)
			return
		}
		u.dump = nil
	}
	u.p = pending{kind: respSimple, cmd: cmd}
	switch cmd {
	case comQuit:
		u.p.kind = respNone
	case comQuery:
		u.p.kind = respResult
		u.open(u.querySQL(b[1:]))
	case comStmtPrepare:
		sql := string(c.sqlText(b[1:]))
		u.p.kind, u.p.sql, u.lastPrepared = respPrepare, sql, sql
		u.open("COM_STMT_PREPARE " + sql)
	case comStmtExecute, comStmtBulkExecute:
		u.p.kind = respResult
		u.open(u.preparedSQL(b[1:], cmd))
	case comStmtFetch:
		u.p.kind = respRows
		u.open("COM_STMT_FETCH " + u.preparedSQL(b[1:], cmd))
	case comStmtClose:
		u.p.kind = respNone
		if len(b) >= 5 {
			c.mu.Lock()
			delete(c.prepared, binary.LittleEndian.Uint32(b[1:]))
			c.mu.Unlock()
		}
	case comStmtSendLongData:
		u.p.kind = respNone
	case comInitDB:
		db := c.sqlText(b[1:])
		u.p.db = string(db)
		u.open("COM_INIT_DB " + u.p.db)
	case comFieldList:
		u.p.kind = respFieldList
		table, _, _ := cstring(b[1:])
		u.open("COM_FIELD_LIST " + string(c.sqlText(table)))
	case comProcessInfo:
		u.p.kind = respResult
		u.open(commandName(cmd))
	case comChangeUser:
		u.p.kind = respAuth
		u.p.user, u.p.db = changeUserIdentity(b[1:], c.caps)
		u.open(commandName(cmd) + " " + u.p.user)
	case comBinlogDump, comBinlogDumpGTID:
		u.p.kind = respStream
		u.open(commandName(cmd))
		u.dump = u.p.st
	case comTableDump:
		u.p.kind = respStream
		u.open(commandName(cmd))
	default:
		u.open(commandName(cmd))
	}
}

// open begins the command's statement at the time its first byte came.
func (u *upObserver) open(sql string) {
	st := u.c.sess.Begin(sql, u.start)
	u.p.st = st
	if u.carry > 0 {
		st.AddUp(int(u.carry))
		u.carry = 0
	}
	u.target(st)
}

// querySQL returns the statement text of a COM_QUERY payload (after the
// command byte), skipping query attributes when they were negotiated,
// and reusing a recent identical string when there is one.
func (u *upObserver) querySQL(b []byte) string {
	if u.c.caps&capQueryAttributes != 0 {
		b = skipQueryAttributes(b)
	}
	b = u.c.sqlText(b)
	for _, s := range u.lastSQL {
		if s == string(b) && s != "" {
			return s
		}
	}
	s := string(b)
	u.lastSQL[u.lastSQLNext] = s
	u.lastSQLNext = (u.lastSQLNext + 1) % len(u.lastSQL)
	return s
}

// preparedSQL is the recorded text of the prepared statement whose id
// starts args, the payload after the command byte: the prepared SQL if
// known, else the command's name with the id, or alone if args is too
// short to hold one.
func (u *upObserver) preparedSQL(args []byte, cmd byte) string {
	if len(args) < 4 {
		return commandName(cmd)
	}
	id := binary.LittleEndian.Uint32(args)
	if id == 0xffffffff { // MariaDB: the statement prepared last
		return u.lastPrepared
	}
	c := u.c
	c.mu.Lock()
	sql, ok := c.prepared[id]
	c.mu.Unlock()
	if !ok {
		return commandName(cmd) + " " + strconv.FormatUint(uint64(id), 10)
	}
	return sql
}

func (u *upObserver) end() {
	c := u.c
	switch u.mode {
	case phInfile:
		if u.f.size == 0 { // end of the file content
			c.mu.Lock()
			c.phase, c.infile = phCommand, nil
			c.mu.Unlock()
		}
	case phCommand:
		if !u.decoded {
			u.decode()
		}
		p := u.p
		p.seq = u.f.lastSeq
		switch p.kind {
		case respNone:
			if u.st == nil {
				u.carry += u.f.take()
			}
		case respAuth:
			c.mu.Lock()
			c.phase, c.authSt = phAuth, p.st
			c.queue = append(c.queue, p)
			c.mu.Unlock()
		default:
			c.push(p)
			if c.wi != nil {
				c.wi.Send(u.clk.Now(), runsStatement(p.cmd))
			}
		}
		u.p = pending{}
	}
	if u.st == nil {
		u.f.take() // bytes that belong to no statement
	}
}

// skipQueryAttributes returns the statement text of a COM_QUERY payload
// that starts with query attributes (CLIENT_QUERY_ATTRIBUTES). If the
// attributes do not fit the captured prefix, it returns nothing.
func skipQueryAttributes(b []byte) []byte {
	count, n, ok := lenenc(b)
	if !ok {
		return nil
	}
	b = b[n:]
	if _, n, ok = lenenc(b); !ok { // parameter set count, always 1
		return nil
	}
	b = b[n:]
	if count == 0 {
		return b
	}
	if count > 1<<16 {
		return nil
	}
	nullMap := int(count+7) / 8
	if len(b) < nullMap+1 {
		return nil
	}
	nulls := b[:nullMap]
	bound := b[nullMap]
	b = b[nullMap+1:]
	if bound != 1 {
		return b // no types: no values either
	}
	types := b // count times: type (2 bytes), name (length-encoded)
	for range count {
		if len(b) < 2 {
			return nil
		}
		_, rest, ok := lenencString(b[2:])
		if !ok {
			return nil
		}
		b = rest
	}
	for i := range int(count) {
		t := types[0]
		_, rest, _ := lenencString(types[2:])
		types = rest
		if nulls[i/8]&(1<<(i%8)) != 0 {
			continue
		}
		n, ok := binaryValueSize(t, b)
		if !ok {
			return nil
		}
		b = b[n:]
	}
	return b
}

// binaryValueSize is the encoded size of a binary-protocol value of type
// t at the start of b.
func binaryValueSize(t byte, b []byte) (int, bool) {
	var n int
	switch t {
	case 0x06: // NULL
		return 0, true
	case 0x01: // TINY
		n = 1
	case 0x02, 0x0d: // SHORT, YEAR
		n = 2
	case 0x03, 0x09, 0x04: // LONG, INT24, FLOAT
		n = 4
	case 0x08, 0x05: // LONGLONG, DOUBLE
		n = 8
	case 0x0a, 0x07, 0x0c, 0x0b: // DATE, TIMESTAMP, DATETIME, TIME
		if len(b) < 1 {
			return 0, false
		}
		n = 1 + int(b[0])
	default: // strings, decimals, blobs, JSON, ...
		v, k, ok := lenenc(b)
		if !ok || uint64(len(b)-k) < v {
			return 0, false
		}
		return k + int(v), true
	}
	if len(b) < n {
		return 0, false
	}
	return n, true
}

// changeUserIdentity reads the user and database of a COM_CHANGE_USER
// payload (after the command byte). Fields it cannot read are "".
func changeUserIdentity(b []byte, caps uint32) (user, db string) {
	u, rest, ok := cstring(b)
	if !ok {
		return string(b), ""
	}
	user = string(u)
	if caps&capSecureConnection != 0 {
		if len(rest) < 1 || len(rest)-1 < int(rest[0]) {
			return user, ""
		}
		rest = rest[1+int(rest[0]):]
	} else if _, rest, ok = cstring(rest); !ok {
		return user, ""
	}
	d, _, ok := cstring(rest)
	if !ok {
		return user, ""
	}
	return user, string(d)
}

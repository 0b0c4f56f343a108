package mysql

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// Commands (COM_*).
const (
	comSleep            = 0x00
	comQuit             = 0x01
	comInitDB           = 0x02
	comQuery            = 0x03
	comFieldList        = 0x04
	comCreateDB         = 0x05
	comDropDB           = 0x06
	comRefresh          = 0x07
	comShutdown         = 0x08
	comStatistics       = 0x09
	comProcessInfo      = 0x0a
	comConnect          = 0x0b
	comProcessKill      = 0x0c
	comDebug            = 0x0d
	comPing             = 0x0e
	comTime             = 0x0f
	comDelayedInsert    = 0x10
	comChangeUser       = 0x11
	comBinlogDump       = 0x12
	comTableDump        = 0x13
	comConnectOut       = 0x14
	comRegisterSlave    = 0x15
	comStmtPrepare      = 0x16
	comStmtExecute      = 0x17
	comStmtSendLongData = 0x18
	comStmtClose        = 0x19
	comStmtReset        = 0x1a
	comSetOption        = 0x1b
	comStmtFetch        = 0x1c
	comDaemon           = 0x1d
	comBinlogDumpGTID   = 0x1e
	comResetConnection  = 0x1f
	comStmtBulkExecute  = 0xfa // MariaDB
)

// commandNames label statements that carry no SQL of their own.
var commandNames = [...]string{
	comSleep: "COM_SLEEP", comQuit: "COM_QUIT", comInitDB: "COM_INIT_DB",
	comQuery: "COM_QUERY", comFieldList: "COM_FIELD_LIST", comCreateDB: "COM_CREATE_DB",
	comDropDB: "COM_DROP_DB", comRefresh: "COM_REFRESH", comShutdown: "COM_SHUTDOWN",
	comStatistics: "COM_STATISTICS", comProcessInfo: "COM_PROCESS_INFO",
	comConnect: "COM_CONNECT", comProcessKill: "COM_PROCESS_KILL", comDebug: "COM_DEBUG",
	comPing: "COM_PING", comTime: "COM_TIME", comDelayedInsert: "COM_DELAYED_INSERT",
	comChangeUser: "COM_CHANGE_USER", comBinlogDump: "COM_BINLOG_DUMP",
	comTableDump: "COM_TABLE_DUMP", comConnectOut: "COM_CONNECT_OUT",
	comRegisterSlave: "COM_REGISTER_SLAVE", comStmtPrepare: "COM_STMT_PREPARE",
	comStmtExecute: "COM_STMT_EXECUTE", comStmtSendLongData: "COM_STMT_SEND_LONG_DATA",
	comStmtClose: "COM_STMT_CLOSE", comStmtReset: "COM_STMT_RESET",
	comSetOption: "COM_SET_OPTION", comStmtFetch: "COM_STMT_FETCH", comDaemon: "COM_DAEMON",
	comBinlogDumpGTID: "COM_BINLOG_DUMP_GTID", comResetConnection: "COM_RESET_CONNECTION",
}

func commandName(cmd byte) string {
	if int(cmd) < len(commandNames) && commandNames[cmd] != "" {
		return commandNames[cmd]
	}
	if cmd == comStmtBulkExecute {
		return "COM_STMT_BULK_EXECUTE"
	}
	return fmt.Sprintf("COM_0x%02x", cmd)
}

// respKind is the shape of the answer a command gets.
type respKind uint8

const (
	respNone      respKind = iota // no answer (COM_QUIT, COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA)
	respSimple                    // one packet of any kind
	respResult                    // OK, ERR, LOCAL INFILE or result sets, possibly several
	respPrepare                   // PREPARE_OK with definitions, or ERR
	respFieldList                 // column definitions until EOF, or ERR
	respRows                      // rows until EOF, or ERR (COM_STMT_FETCH)
	respAuth                      // authentication exchange until OK or ERR
	respStream                    // packets until EOF or ERR (binlog dump)
)

// phase is what the client's next packet is.
type phase uint8

const (
	phCommand phase = iota // a command
	phAuth                 // authentication data (handshake or COM_CHANGE_USER)
	phInfile               // LOCAL INFILE content; an empty packet ends it
)

// pending is a command whose answer has not begun.
type pending struct {
	kind respKind
	cmd  byte
	st   *session.Statement // nil for the handshake's authentication
	seq  uint8              // sequence id of the command's last packet
	sql  string             // COM_STMT_PREPARE: the text to map the statement id to
	user string             // COM_CHANGE_USER: the user to record when accepted
	db   string             // COM_CHANGE_USER, COM_INIT_DB: the database to record
}

// maxPrepared bounds the prepared statements remembered per session; the
// SQL of statements prepared beyond it is not recorded.
const maxPrepared = 16384

// conn is the state the two observers of one session share: the
// commands waiting for an answer, the prepared statements, and what the
// client is sending. Each observer runs in its own goroutine and keeps
// the rest of its state to itself.
type conn struct {
	sess   *session.Session
	clock  clock.Clock
	log    *slog.Logger
	maxSQL int
	caps   uint32 // negotiated capabilities; fixed after the handshake
	ext    uint32 // negotiated MariaDB extended capabilities

	mu       sync.Mutex
	phase    phase              // guarded by mu
	queue    []pending          // guarded by mu; queue[head:] await an answer, oldest first
	head     int                // guarded by mu
	infile   *session.Statement // guarded by mu; statement whose LOCAL INFILE data the client sends
	authSt   *session.Statement // guarded by mu; COM_CHANGE_USER being authenticated
	prepared map[uint32]string  // guarded by mu; statement id to SQL
}

// connConfig is what the observers need to know about a session.
type connConfig struct {
	sess      *session.Session
	clock     clock.Clock
	log       *slog.Logger
	maxSQL    int   // SQL bytes kept per statement
	maxPacket int64 // largest logical packet from the client
	caps      uint32
	ext       uint32
	auth      bool  // the authentication exchange is still to be observed
	authSeq   uint8 // sequence id of the handshake response, when auth
}

// newObservers returns the client-to-server and server-to-client
// observers of one session.
func newObservers(cfg connConfig) (*upObserver, *downObserver) {
	c := &conn{
		sess: cfg.sess, clock: cfg.clock, log: cfg.log, maxSQL: cfg.maxSQL,
		caps: cfg.caps, ext: cfg.ext,
		queue:    make([]pending, 0, 8),
		prepared: make(map[uint32]string),
	}
	if cfg.auth {
		c.phase = phAuth
		c.queue = append(c.queue, pending{kind: respAuth, seq: cfg.authSeq})
	}
	u := &upObserver{c: c, buf: make([]byte, 0, captureSize(cfg.maxSQL, cfg.caps))}
	u.f.max = cfg.maxPacket
	u.f.buf = u.buf
	d := &downObserver{c: c, expect: -1}
	d.f.buf = d.arr[:0]
	return u, d
}

// captureSize is how much of a command sluice copies to decode it: the
// command byte, the SQL kept, room for query attributes, and never less
// than a COM_CHANGE_USER needs.
func captureSize(maxSQL int, caps uint32) int {
	n := 1 + maxSQL
	if caps&capQueryAttributes != 0 {
		n += 512
	}
	return max(n, 1024)
}

func (c *conn) push(p pending) {
	c.mu.Lock()
	c.queue = append(c.queue, p)
	c.mu.Unlock()
}

// pop removes the oldest pending command; ok is false if there is none.
func (c *conn) pop() (p pending, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.head == len(c.queue) {
		return p, false
	}
	p = c.queue[c.head]
	c.queue[c.head] = pending{}
	c.head++
	if c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	}
	return p, true
}

// sqlText truncates b to maxSQL bytes, cutting before a character that
// would not fit whole.
func (c *conn) sqlText(b []byte) []byte {
	if len(b) <= c.maxSQL {
		return b
	}
	n := c.maxSQL
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(b[n]); i++ {
		n--
	}
	return b[:n]
}

// upObserver watches client-to-server bytes. It is called from one
// goroutine.
type upObserver struct {
	c   *conn
	f   framer
	buf []byte // capture buffer, fixed capacity

	// Current logical packet.
	mode    phase
	decoded bool
	start   time.Time
	p       pending // the command being read

	st    *session.Statement // where the current bytes go; nil if nowhere yet
	acc   int64              // bytes for st not yet added
	carry int64              // bytes of answerless commands, for the next statement

	lastSQL      [4]string // recent COM_QUERY texts, reused to spare an allocation
	lastSQLNext  int
	lastPrepared string // SQL of the latest COM_STMT_PREPARE (statement id -1)
}

var _ wire.Observer = (*upObserver)(nil)

// Observe implements wire.Observer.
func (u *upObserver) Observe(p []byte) error {
	for {
		n, ev := u.f.feed(p)
		p = p[n:]
		if ev == evBegin {
			u.begin() // before claiming: the header is the new packet's
		}
		if u.st != nil {
			u.acc += u.f.take()
		}
		switch ev {
		case evNone:
			u.flush()
			return nil
		case evTooLarge:
			u.flush()
			return u.fatal(erNetPacketTooBig, fmt.Sprintf(
				"sluice: packet from the client exceeds the route's limit of %d bytes", u.f.max))
		case evCaptured:
			u.captured()
		case evEnd:
			u.end()
		}
	}
}

func (u *upObserver) flush() {
	if u.acc > 0 && u.st != nil {
		u.st.AddUp(int(u.acc))
	}
	u.acc = 0
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
		Reply: errPacket(u.f.lastSeq+1, code, "08S01", msg),
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
	u.start = c.clock.Now()
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
	u.decoded = true
	c := u.c
	b := u.f.buf
	if len(b) == 0 { // an empty packet: the server answers "unknown command"
		u.p = pending{kind: respSimple, cmd: comSleep}
		u.open(commandName(comSleep))
		return
	}
	cmd := b[0]
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
	case comBinlogDump, comBinlogDumpGTID, comTableDump:
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

	st  *session.Statement // where the current bytes go
	acc int64              // bytes for st not yet added

	expect     int  // sequence id expected next; -1 when unknown
	clientTurn bool // the client speaks before the server's next packet
	seqWarned  bool // a sequence mismatch was logged
}

var _ wire.Observer = (*downObserver)(nil)

// Observe implements wire.Observer.
func (d *downObserver) Observe(p []byte) error {
	for {
		n, ev := d.f.feed(p)
		p = p[n:]
		if ev == evBegin {
			d.begin() // before claiming: the header may open a new answer
		}
		if d.st != nil {
			d.acc += d.f.take()
		}
		switch ev {
		case evNone:
			d.flush()
			return nil
		case evEnd:
			d.end()
		}
	}
}

func (d *downObserver) flush() {
	if d.acc > 0 && d.st != nil {
		d.st.AddDown(int(d.acc))
	}
	d.acc = 0
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
	case rsFieldList, rsStream:
		if d.isTerminator(b, size) {
			d.finish(session.OK)
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
	if d.st != nil {
		d.st.End(d.c.clock.Now(), o, rows, code)
	}
	d.active, d.st, d.cur, d.state = false, nil, pending{}, rsSimple
}

// errCode formats a server error number as recorded in a statement.
func errCode(code uint16) string {
	switch code {
	case erQueryInterrupt:
		return "1317"
	}
	return strconv.Itoa(int(code))
}

package mysql

// This file holds what the two observers of a connection share: the
// command table, the queue of commands awaiting an answer and the capture
// of SQL text.

import (
	"fmt"
	"log/slog"
	"sync"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
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
	log    *slog.Logger
	maxSQL int
	caps   uint32       // negotiated capabilities; fixed after the handshake
	wi     *whatif.Conn // the session's round trips; nil without; set before relaying
	ext    uint32       // negotiated MariaDB extended capabilities

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
		sess: cfg.sess, log: cfg.log, maxSQL: cfg.maxSQL,
		caps: cfg.caps, ext: cfg.ext,
		queue:    make([]pending, 0, 8),
		prepared: make(map[uint32]string),
	}
	if cfg.auth {
		c.phase = phAuth
		c.queue = append(c.queue, pending{kind: respAuth, seq: cfg.authSeq})
	}
	u := &upObserver{c: c, clk: clock.NewReplay(cfg.clock), buf: make([]byte, 0, captureSize(cfg.maxSQL, cfg.caps))}
	u.f.max = cfg.maxPacket
	u.f.buf = u.buf
	d := &downObserver{c: c, clk: clock.NewReplay(cfg.clock), tally: tally{down: true}, expect: -1}
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

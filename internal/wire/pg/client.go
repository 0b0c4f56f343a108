package pg

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// Buffering limits. A name longer than maxName (PostgreSQL itself keeps
// names of any length for prepared statements and portals) is not
// tracked: statements executed through it are recorded with empty SQL.
const (
	maxName = 1024 // bytes of a statement or portal name
	// maxPrepared bounds the named prepared statements (further names are
	// not tracked) and named portals (the map then starts afresh) kept
	// per session.
	maxPrepared = 1 << 16
)

// target says which statement the bytes of the current message count for.
type target uint8

const (
	toNone      target = iota // nobody
	toPending                 // the next statement to begin
	toMessage                 // the statement this message will begin
	toStatement               // an existing statement (st)
)

// clientObserver watches client-to-server bytes after the startup
// message. It begins statements (Query, Execute), keeps prepared statement
// and portal names mapped to their SQL, and attributes each client message
// to a statement. It runs in the client pump's goroutine only.
type clientObserver struct {
	fr     framer
	t      *tracker
	sess   *session.Session
	clk    *clock.Replay // the session's clock; set to a chunk's time while it is replayed
	maxSQL int
	err    error // sticky: once malformed, always malformed

	adm      *admitUp     // the session's admission, told of each statement begun; nil without
	wi       *whatif.Conn // the session's round trips, told of each request; nil without
	physical bool         // a physical replication connection: BASE_BACKUP makes it KindBaseBackup

	tgt      target
	st       *session.Statement // owner of the current message when tgt == toStatement
	msgBytes int                // bytes of the current message when tgt == toMessage

	pendingUp int                // Parse, Bind, Describe... bytes awaiting the next statement
	lastExec  *session.Statement // begun by Execute since the last Sync; owns the Sync
	lastStmt  *session.Statement // most recently begun; owns CopyData before any copy opened

	lastQuery     string            // SQL of the last Query, reused when repeated
	unnamedStmt   string            // SQL of the unnamed prepared statement
	unnamedPortal string            // SQL of the unnamed portal
	stmts         map[string]string // named prepared statements: name -> SQL
	portals       map[string]string // named portals: name -> SQL
}

// Observe implements wire.Observer. A malformed or oversized message, or
// a type byte no client may send, yields a *wire.Fatal carrying a FATAL
// ErrorResponse (SQLSTATE 08P01) for the client; every later call returns
// the same error.
func (c *clientObserver) Observe(p []byte) error {
	if c.err == nil {
		c.err = c.fr.walk(p, c)
	}
	return c.err
}

// ReplayAt implements wire.Replayer.
func (c *clientObserver) ReplayAt(at time.Time) { c.clk.Set(at) }

// payloadRead begins a long Query as soon as the SQL text it keeps is
// complete, so the rest of the query counts while it streams.
func (c *clientObserver) payloadRead() {
	if c.tgt == toMessage && c.fr.typ == 'Q' && c.fr.rem > 0 && len(c.fr.buf) == c.fr.keep {
		c.onQuery()
	}
}

// header validates a completed header, picks the message's owner and what
// of its payload to buffer.
func (c *clientObserver) header() error {
	if !clientType(c.fr.hdr[0]) {
		return c.fatal(fmt.Sprintf("invalid frontend message type %s", typeName(c.fr.hdr[0])))
	}
	if err := c.fr.parseHeader(); err != nil {
		return c.fatal(err.Error())
	}
	c.st, c.msgBytes = nil, 0
	switch c.fr.typ {
	case 'Q': // Query
		c.tgt = toMessage
		c.fr.setKeep(c.maxSQL + 1)
	case 'E': // Execute
		c.tgt = toMessage
		c.fr.setKeep(maxName + 1)
	case 'P': // Parse
		c.tgt = toPending
		c.fr.setKeep(maxName + 1 + c.maxSQL + 1)
	case 'B': // Bind
		c.tgt = toPending
		c.fr.setKeep(2 * (maxName + 1))
	case 'C': // Close
		c.tgt = toPending
		c.fr.setKeep(1 + maxName + 1)
	case 'D', 'H': // Describe, Flush
		c.tgt = toPending
	case 'S': // Sync
		c.own(c.lastExec, toPending)
	case 'd', 'c', 'f': // CopyData, CopyDone, CopyFail
		st := c.t.copyOwner.Load()
		if st == nil {
			st = c.lastStmt
		}
		c.own(st, toNone)
	default: // FunctionCall, authentication responses, Terminate
		c.tgt = toNone
	}
	return nil
}

// clientType reports whether t is a message type a client sends after
// the startup packet.
func clientType(t byte) bool {
	switch t {
	case 'Q', 'P', 'B', 'E', 'D', 'C', 'H', 'S', 'd', 'c', 'f', 'F', 'p', 'X':
		return true
	}
	return false
}

// own makes st the owner of the current message, or uses fallback when
// st is nil.
func (c *clientObserver) own(st *session.Statement, fallback target) {
	if st != nil {
		c.tgt, c.st = toStatement, st
		return
	}
	c.tgt = fallback
}

// count attributes n bytes of the current message.
func (c *clientObserver) count(n int) {
	switch c.tgt {
	case toStatement:
		c.st.AddUp(n)
	case toPending:
		c.pendingUp += n
	case toMessage:
		c.msgBytes += n
	}
}

// message acts on a complete message.
func (c *clientObserver) message() {
	if c.wi != nil && isRequest(c.fr.typ) {
		c.wi.Send(c.clk.Now(), c.fr.typ == 'Q' || c.fr.typ == 'E' || c.fr.typ == 'F')
	}
	switch c.fr.typ {
	case 'Q':
		if c.tgt == toMessage {
			c.onQuery()
		}
	case 'E':
		c.onExecute()
	case 'P':
		c.onParse()
	case 'B':
		c.onBind()
	case 'C':
		c.onClose()
	case 'S':
		c.onSync()
	case 'F':
		c.onFunctionCall()
	}
}

// begin opens a statement for the current message and queues it. The
// statement takes the client bytes waiting for it (earlier Parse, Bind...
// and this message so far) and the server bytes waiting for it.
func (c *clientObserver) begin(sql string, kind entryKind) {
	st := c.sess.Begin(sql, c.clk.Now())
	if c.physical && isBaseBackup(sql) {
		c.sess.SetKind(session.KindBaseBackup)
	}
	down := c.t.push(entry{kind: kind, st: st})
	st.AddUp(c.pendingUp + c.msgBytes)
	if down > 0 {
		st.AddDown(int(down))
	}
	c.pendingUp, c.msgBytes = 0, 0
	c.tgt, c.st = toStatement, st
	c.lastStmt = st
	if kind == kindExtended {
		c.lastExec = st
	}
	if c.adm != nil {
		c.adm.begun, c.adm.begunKind = st, kind
	}
}

// isBaseBackup reports whether a replication command is BASE_BACKUP: its
// first word, after blanks and in any case.
func isBaseBackup(sql string) bool {
	const word = "BASE_BACKUP"
	sql = strings.TrimLeft(sql, " \t\n\r\f\v")
	if len(sql) < len(word) || !strings.EqualFold(sql[:len(word)], word) {
		return false
	}
	if len(sql) == len(word) {
		return true
	}
	c := sql[len(word)]
	return !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
}

// fatal builds the error that ends the session for a client protocol
// violation.
func (c *clientObserver) fatal(msg string) error {
	return &wire.Fatal{
		Err:   fmt.Errorf("pg: client protocol violation: %s", msg),
		Reply: errorResponse(severityFatal, sqlstate.ProtocolViolation, "sluice: "+msg),
	}
}

// preparedSQL returns the SQL of a prepared statement, "" when unknown.
func (c *clientObserver) preparedSQL(name []byte) string {
	if len(name) == 0 {
		return c.unnamedStmt
	}
	return c.stmts[string(name)]
}

// portalSQL returns the SQL of a portal, "" when unknown.
func (c *clientObserver) portalSQL(name []byte) string {
	if len(name) == 0 {
		return c.unnamedPortal
	}
	return c.portals[string(name)]
}

// remember records name -> sql in m, bounded by maxPrepared. A name
// prepared again replaces the old text (the server refuses a duplicate
// name, so a second Parse means the first one failed or was dropped).
func remember(m *map[string]string, name []byte, sql string) {
	if *m == nil {
		*m = make(map[string]string)
	}
	if old, ok := (*m)[string(name)]; ok {
		if old != sql {
			(*m)[string(name)] = sql
		}
		return
	}
	if len(*m) < maxPrepared {
		(*m)[string(name)] = sql
	}
}

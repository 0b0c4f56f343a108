package mysql

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wire"
)

// Admission: with Options.Admit set, the client observer of a session is
// also a wire.Rewriter that holds the first command of each transaction
// until the Admitter lets its statement run.
//
// The commands held are those that run SQL: COM_QUERY, COM_STMT_EXECUTE
// and COM_STMT_BULK_EXECUTE (not KILL, which must get through when every
// slot is taken). Every other command (COM_PING, COM_STMT_PREPARE,
// COM_STMT_FETCH, COM_INIT_DB, ...) goes on at once, and so does any
// command inside a transaction: the server's last OK or EOF had
// SERVER_STATUS_IN_TRANS. A command's packet is held from its first byte
// until the statement is admitted; the client pump blocks meanwhile (it
// stops reading the client) while the server pump goes on. The slot goes
// back at the final OK, EOF or ERR of the last command answered, once no
// transaction is open (an ERR keeps the last status seen). A replica's
// session is never held once the server has accepted its
// COM_REGISTER_SLAVE (an OK) or started streaming it the binlog (its
// kind is then session.KindReplication): the dump is one endless
// command and must not wait behind clients. A refused registration
// (ERR: no REPLICATION SLAVE privilege) changes nothing, so it is no way
// around admission.
//
// A refused command never reaches the server: its packet is discarded
// and sluice answers ERR 1317 (ER_QUERY_INTERRUPTED, SQLSTATE 70100),
// numbered after the command, through the down pump once the server has
// answered every earlier command. The message is "Query execution was
// interrupted" for a cancel, else the refusal's (queue_timeout, a
// blocktime abort rule).
//
// KILL QUERY id sent through sluice, where id is the upstream connection
// id of a session of the same route whose command is held, ends that
// wait; sluice then answers the KILL itself with OK instead of sending
// it to the server (where it would hit whatever that connection runs
// next).

// statusInTrans is SERVER_STATUS_IN_TRANS.
const statusInTrans = 0x0001

// errInterruptedMsg is MySQL's message for ER_QUERY_INTERRUPTED.
const errInterruptedMsg = "Query execution was interrupted"

// gates finds the admission state of a route's sessions by upstream
// connection id, for KILL QUERY. Safe for concurrent use.
type gates struct {
	mu sync.Mutex
	m  map[uint32]*wire.Gate // guarded by mu
}

func (g *gates) add(id uint32, gt *wire.Gate) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[uint32]*wire.Gate)
	}
	g.m[id] = gt
	g.mu.Unlock()
}

func (g *gates) remove(id uint32, gt *wire.Gate) {
	g.mu.Lock()
	if g.m[id] == gt {
		delete(g.m, id)
	}
	g.mu.Unlock()
}

func (g *gates) get(id uint32) *wire.Gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[id]
}

// admitUp is the client observer of a session under admission. It is
// used by the client pump only.
type admitUp struct {
	wire.Admitting
	u     *upObserver
	inj   *injector
	route *gates

	pktStart int // where the current packet began in the chunk; negative: in an earlier one
	decv     pending
	decided  bool     // the current command's fate is settled
	dec      *pending // &decv once upObserver.decode has decoded the current command
	answer   []byte   // WalkDrop: sluice's answer, sent at the packet's end (nil: ERR)
	errMsg   string   // WalkDrop: the ERR's message
	dropSt   *session.Statement
}

// ReplayAt implements wire.Replayer: the up observer it drives stamps
// what it sees at at.
func (a *admitUp) ReplayAt(at time.Time) { a.u.ReplayAt(at) }

// Rewrite implements wire.Rewriter: it observes p and returns the bytes
// to forward now, blocking while a command waits for admission.
func (a *admitUp) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	if out, done, err := a.Begin(p); done {
		return out, err
	}
	u, f := a.u, &a.u.f
	i := 0
	for {
		n, ev := f.feed(p[i:])
		i += n
		if ev == evBegin {
			u.begin()
			a.decided, a.dec = false, nil
			a.pktStart = i - 4 // negative: the header began in an earlier chunk
			switch {
			case u.mode != phCommand:
				if a.Walk.Mode() == wire.WalkHold {
					a.Gate.Start(false, false)
					a.Walk.Set(i, wire.WalkPass)
				}
			case a.Walk.Mode() == wire.WalkPass && !u.c.replica():
				// open until decided: the slot cannot go back under a
				// command being read.
				if a.Gate.Start(false, true) {
					a.Walk.Set(max(a.pktStart, a.Walk.Start()), wire.WalkHold)
				}
			}
		}
		if u.st != nil {
			u.acc += f.take()
		}
		if ev != evNone && ev != evBegin {
			if err := u.event(ev); err != nil {
				u.flush()
				return nil, a.Fail(err)
			}
		}
		if d := a.dec; d != nil && !a.decided {
			a.decided = true
			if err := a.decide(ctx, d, i); err != nil {
				u.flush()
				return nil, a.Fail(err)
			}
		}
		if ev == evEnd && a.Walk.Mode() == wire.WalkDrop {
			a.Walk.Set(i, wire.WalkPass)
			a.Gate.Start(false, false)
			b := a.answer
			if b == nil {
				b = errPacket(f.lastSeq+1, erQueryInterrupt, sqlstate.MySQLInterrupted, a.errMsg)
			} else {
				b[3] = f.lastSeq + 1
			}
			a.inj.add(b, a.dropSt)
			a.answer, a.dropSt = nil, nil
		}
		if ev == evNone {
			break
		}
	}
	u.flush()
	if a.Walk.Mode() == wire.WalkPass && !f.inside && f.nhdr > 0 {
		// A header begun at the end of the chunk: hold it until the packet
		// says what it is.
		if u.c.commandPhase() && !u.c.replica() && a.Gate.Start(false, true) {
			a.Walk.Set(len(p)-f.nhdr, wire.WalkHold)
		}
	}
	return a.Walk.Result(), nil
}

// decide settles the fate of the command just decoded, at stream
// position i of the chunk.
func (a *admitUp) decide(ctx context.Context, d *pending, i int) error {
	earns := d.kind != respNone
	admit := a.Gate.Start(earns, false)
	if id, ok := killQuery(d); ok && (a.Walk.Mode() == wire.WalkHold || a.pktStart >= 0) {
		if t := a.route.get(id); t != nil && t != a.Gate && t.CancelWait() {
			// Answered here: the server never sees the KILL.
			if a.Walk.Mode() == wire.WalkPass {
				a.Walk.Set(a.pktStart, wire.WalkDrop)
			} else {
				a.Walk.Set(i, wire.WalkDrop)
			}
			a.answer, a.dropSt = okPacket(uint16(a.inj.d.status.Load())), d.st
			return nil
		}
	}
	if a.Walk.Mode() != wire.WalkHold {
		return nil
	}
	if !admit || d.st == nil || !heldCommand(d) {
		a.Walk.Set(i, wire.WalkPass)
		return nil
	}
	err := a.Gate.Wait(ctx, d.st)
	switch {
	case err == nil:
		a.Walk.Set(i, wire.WalkPass)
	case wire.Ending(ctx, err):
		// The session is ending: nobody to answer.
		return err
	default:
		a.Walk.Set(i, wire.WalkDrop)
		_, msg := wire.Refused(err)
		if d.st.CancelRequested() || msg == "canceling statement due to user request" {
			msg = errInterruptedMsg
		}
		a.errMsg, a.answer, a.dropSt = msg, nil, d.st
	}
	return nil
}

// heldCommand reports whether d waits for admission: a command that runs
// SQL, except KILL.
func heldCommand(d *pending) bool {
	switch d.cmd {
	case comQuery:
		return !isKill(d.st.SQL)
	case comStmtExecute, comStmtBulkExecute:
		return true
	}
	return false
}

// killQuery returns the connection id of a "KILL [HARD|SOFT] QUERY id"
// COM_QUERY.
func killQuery(d *pending) (uint32, bool) {
	if d.cmd != comQuery || d.st == nil || !isKill(d.st.SQL) {
		return 0, false
	}
	w := words(d.st.SQL, 5)
	i := 1
	if i < len(w) && (eqFold(w[i], "HARD") || eqFold(w[i], "SOFT")) {
		i++
	}
	if i+1 >= len(w) || !eqFold(w[i], "QUERY") {
		return 0, false
	}
	id, err := strconv.ParseUint(w[i+1], 10, 32)
	if err != nil || i+2 != len(w) {
		return 0, false
	}
	return uint32(id), true
}

// isKill reports whether sql begins with the word KILL.
func isKill(sql string) bool {
	w := words(sql, 0)
	return len(w) == 1 && eqFold(w[0], "KILL")
}

// words splits sql at ASCII spaces and a final ';' into at most n+1 words.
func words(sql string, n int) []string {
	var w []string
	for len(sql) > 0 && len(w) <= n {
		j := 0
		for j < len(sql) && (sql[j] == ' ' || sql[j] == '\t' || sql[j] == '\n' || sql[j] == '\r' || sql[j] == ';') {
			j++
		}
		sql = sql[j:]
		k := 0
		for k < len(sql) && sql[k] != ' ' && sql[k] != '\t' && sql[k] != '\n' && sql[k] != '\r' && sql[k] != ';' {
			k++
		}
		if k > 0 {
			w = append(w, sql[:k])
		}
		sql = sql[k:]
	}
	return w
}

func eqFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// farewell reports whether b, all a client sent before its end of
// stream, is one COM_QUIT packet: the client has gone
// (wire.Gate.SetFarewell).
func farewell(b []byte) bool {
	return len(b) == 5 && b[0] == 1 && b[1] == 0 && b[2] == 0 && b[4] == comQuit
}

// okPacket is an OK packet (no rows) with status flags status; its
// sequence id is set when sent.
func okPacket(status uint16) []byte {
	return []byte{7, 0, 0, 0, 0x00, 0, 0, byte(status), byte(status >> 8), 0, 0}
}

// replica reports whether the session is a replica's: the server
// accepted its COM_REGISTER_SLAVE or streams it the binlog. Its commands
// are never held.
func (c *conn) replica() bool { return c.sess.Kind() == session.KindReplication }

// commandPhase reports whether the client's next packet is a command.
func (c *conn) commandPhase() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase == phCommand
}

// headSt returns the statement of the oldest command awaiting an answer,
// or nil.
func (c *conn) headSt() (*session.Statement, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.head == len(c.queue) {
		return nil, false
	}
	return c.queue[c.head].st, true
}

// injector holds the answers sluice gives in the server's place, until
// the server stream is between packets and has answered every command
// before the one answered. It implements wire.Injector. add is called by
// the client pump; Pending and check by the server pump.
type injector struct {
	wire.Answers
	d *downObserver
}

func (j *injector) add(b []byte, after *session.Statement) { j.Add(b, after) }

// ready reports whether an answer queued after st may go now: the
// server stream is between packets and st is the oldest command
// awaiting an answer.
func (j *injector) ready(st *session.Statement) bool {
	f := &j.d.f
	if f.inside || f.payload || f.nhdr != 0 || j.d.active {
		return false
	}
	head, ok := j.d.c.headSt()
	return ok && head == st
}

func (j *injector) check() { j.Check(j.ready) }

// Pending implements wire.Injector. It returns one answer at a time: the
// next one waits for the server observer to have seen this one.
func (j *injector) Pending() []byte { return j.Next(j.ready, false) }

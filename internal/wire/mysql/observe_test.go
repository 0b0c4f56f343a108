package mysql

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// Packet builders for synthetic streams.

// pk frames payload as one logical packet starting at sequence id seq,
// splitting it into 0xffffff-byte physical packets as the protocol does.
func pk(seq uint8, payload ...[]byte) []byte {
	p := bytes.Join(payload, nil)
	var out []byte
	for {
		n := min(len(p), maxPayload)
		out = append(out, byte(n), byte(n>>8), byte(n>>16), seq)
		out = append(out, p[:n]...)
		p = p[n:]
		seq++
		if n < maxPayload {
			return out
		}
	}
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func lenencBytes(v uint64) []byte {
	switch {
	case v < 0xfb:
		return []byte{byte(v)}
	case v < 1<<16:
		return append([]byte{0xfc}, le16(uint16(v))...)
	case v < 1<<24:
		return []byte{0xfd, byte(v), byte(v >> 8), byte(v >> 16)}
	}
	return append([]byte{0xfe}, binary.LittleEndian.AppendUint64(nil, v)...)
}

func lstr(s string) []byte { return append(lenencBytes(uint64(len(s))), s...) }

func okPayload(affected uint64, status uint16) []byte {
	b := []byte{0x00}
	b = append(b, lenencBytes(affected)...)
	b = append(b, 0)
	return append(append(b, le16(status)...), 0, 0)
}

func okEOFPayload(status uint16) []byte { // OK with the 0xfe header
	p := okPayload(0, status)
	p[0] = 0xfe
	return p
}

func eofPayload(status uint16) []byte {
	return append([]byte{0xfe, 0, 0}, le16(status)...)
}

func errPayload(code uint16, state, msg string) []byte {
	return append(append(append([]byte{0xff}, le16(code)...), '#'), state+msg...)
}

func colDef(name string) []byte {
	b := append(lstr("def"), lstr("sluice")...)
	b = append(b, lstr("t")...)
	b = append(b, lstr("t")...)
	b = append(b, lstr(name)...)
	b = append(b, lstr(name)...)
	return append(b, 0x0c, 33, 0, 10, 0, 0, 0, 3, 0, 0, 0, 0, 0)
}

func query(sql string) []byte { return pk(0, []byte{comQuery}, []byte(sql)) }

// resultSet frames a text result set answering a command, starting at
// sequence id seq; classic adds the EOF packets of servers without
// CLIENT_DEPRECATE_EOF. It returns the bytes and the next sequence id.
func resultSet(seq uint8, classic bool, cols int, rows [][]string, status uint16) ([]byte, uint8) {
	var out []byte
	out = append(out, pk(seq, lenencBytes(uint64(cols)))...)
	seq++
	for i := range cols {
		out = append(out, pk(seq, colDef(fmt.Sprintf("c%d", i)))...)
		seq++
	}
	if classic {
		out = append(out, pk(seq, eofPayload(0))...)
		seq++
	}
	for _, r := range rows {
		var p []byte
		for _, v := range r {
			p = append(p, lstr(v)...)
		}
		out = append(out, pk(seq, p)...)
		seq++
	}
	if classic {
		out = append(out, pk(seq, eofPayload(status))...)
	} else {
		out = append(out, pk(seq, okEOFPayload(status))...)
	}
	seq++
	return out, seq
}

// step is a chunk of traffic in one direction.
type step struct {
	up bool
	b  []byte
}

func up(b ...[]byte) step   { return step{true, bytes.Join(b, nil)} }
func down(b ...[]byte) step { return step{false, bytes.Join(b, nil)} }

// record is what a test compares of a statement.
type record struct {
	SQL       string
	Outcome   session.Outcome
	Rows      int64
	Code      string
	BytesUp   int64
	BytesDown int64
}

func (r record) String() string {
	return fmt.Sprintf("{%q %v rows=%d code=%q up=%d down=%d}", r.SQL, r.Outcome, r.Rows, r.Code, r.BytesUp, r.BytesDown)
}

func records(reg *session.Registry) []record {
	var out []record
	for _, st := range reg.Recent() {
		s := st.Snapshot()
		out = append(out, record{s.SQL, s.Outcome, s.Rows, s.Code, s.BytesUp, s.BytesDown})
	}
	for _, st := range reg.Active() {
		s := st.Snapshot()
		out = append(out, record{s.SQL, s.Outcome, s.Rows, s.Code, s.BytesUp, s.BytesDown})
	}
	return out
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const testCaps = capProtocol41 | capSecureConnection | capTransactions | capMultiResults |
	capMultiStatements | capPSMultiResults | capPluginAuth | capLocalFiles | capDeprecateEOF

// harnessObservers returns a registry, a session and its observers.
func harnessObservers(caps, ext uint32, auth bool) (*session.Registry, *session.Session, *upObserver, *downObserver) {
	reg := session.NewRegistry(session.Options{})
	sess := reg.Open(session.Info{Route: "test", Protocol: "mysql"}, t0)
	u, d := newObservers(connConfig{
		sess: sess, clock: clock.NewFake(t0), log: slog.New(slog.DiscardHandler),
		maxSQL: 64, maxPacket: 32 << 20, caps: caps, ext: ext, auth: auth, authSeq: 1,
	})
	// Round trips are counted too, so the fuzz targets hold that path to
	// never panicking either.
	u.c.wi = whatif.New(whatif.Options{}).Open(whatif.Key{Protocol: "mysql"}, t0, nil)
	return reg, sess, u, d
}

// defaultObservers returns the observers of a new session with the
// default limits and testCaps, logging nowhere.
func defaultObservers() (*session.Session, *upObserver, *downObserver) {
	sess := session.NewRegistry(session.Options{}).Open(session.Info{}, t0)
	u, d := newObservers(connConfig{
		sess: sess, clock: clock.NewFake(t0), log: slog.New(slog.DiscardHandler),
		maxSQL: defaultMaxSQL, maxPacket: defaultMaxPacket, caps: testCaps,
	})
	return sess, u, d
}

// bigResult returns a new session and its server observer, to which the
// session's "SELECT * FROM big" has been sent and the server's column
// definitions observed: what comes next is its rows, from sequence id 4.
func bigResult(tb testing.TB) (*session.Session, *downObserver) {
	tb.Helper()
	sess, u, d := defaultObservers()
	if err := run([]step{
		up(query("SELECT * FROM big")),
		down(pk(1, []byte{2}), pk(2, colDef("a")), pk(3, colDef("b"))),
	}, u, d, 0); err != nil {
		tb.Fatal(err)
	}
	return sess, d
}

// run feeds steps to the observers in chunks of at most chunk bytes (0:
// whole steps) and returns the first error.
func run(steps []step, u *upObserver, d *downObserver, chunk int) error {
	return runCut(steps, u, d, func(n int) int {
		if chunk > 0 {
			return min(n, chunk)
		}
		return n
	})
}

// runCut feeds steps to the observers, cut(n) bytes (1 to n) of the n
// left of a step at a time, and returns the first error.
func runCut(steps []step, u *upObserver, d *downObserver, cut func(n int) int) error {
	for _, s := range steps {
		var o wire.Observer = d
		if s.up {
			o = u
		}
		for b := s.b; len(b) > 0; {
			n := cut(len(b))
			if err := o.Observe(b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
	}
	return nil
}

func sum(steps []step, up bool) int64 {
	var n int64
	for _, s := range steps {
		if s.up == up {
			n += int64(len(s.b))
		}
	}
	return n
}

type scenario struct {
	name string
	caps uint32
	ext  uint32
	auth bool
	// steps, and the records expected after them
	steps []step
	want  []record
	// identity after the steps, if checked
	user, db string
	// kind of the session after the steps
	kind session.Kind
}

// Replication traffic: a replica's registration, binlog dumps and the
// events that answer them.

// registerSlave is a COM_REGISTER_SLAVE of server 2, port 3306.
func registerSlave() []byte {
	return pk(0, []byte{comRegisterSlave}, le32(2), []byte{0, 0, 0}, le16(3306), le32(0), le32(0))
}

// binlogDump is MariaDB's COM_BINLOG_DUMP from the start of no file (the
// GTID position is in @slave_connect_state).
func binlogDump() []byte {
	return pk(0, []byte{comBinlogDump}, le32(4), le16(0), le32(2))
}

// binlogDumpGTID is MySQL's COM_BINLOG_DUMP_GTID with a GTID set of n
// bytes.
func binlogDumpGTID(n int) []byte {
	return pk(0, []byte{comBinlogDumpGTID}, le16(0), le32(2), le32(0), le64(4), le32(uint32(n)), bytes.Repeat([]byte{0xfe}, n))
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// binlogEvent is one event of a binlog stream at sequence id seq: the OK
// marker, the 19-byte event header, then body.
func binlogEvent(seq uint8, typ byte, body []byte) []byte {
	h := append(le32(1767225600), typ)
	h = append(h, le32(1)...)
	h = append(h, le32(uint32(19+len(body)))...)
	h = append(h, le32(0)...)
	h = append(h, le16(0)...)
	return pk(seq, []byte{0x00}, h, body)
}

// binlogStream is n events from sequence id seq on, whose bodies hold
// bytes that begin ERR, EOF and OK packets elsewhere; it returns the
// bytes and the next sequence id.
func binlogStream(seq uint8, n int) ([]byte, uint8) {
	bodies := [][]byte{
		append([]byte{0x04}, "mysql-bin.000001"...),               // ROTATE
		{0xff, 0x28, 0x04, '#', 'H', 'Y'},                         // looks like ERR
		{0xfe, 0, 0, 2, 0},                                        // looks like EOF
		append(okPayload(1, statusMoreResults), 0xfe, 0xff, 0x00), // looks like OK
		{},
	}
	types := []byte{0x04, 0xa2, 0x1e, 0x10, 0x1b}
	var out []byte
	for i := range n {
		out = append(out, binlogEvent(seq, types[i%len(types)], bodies[i%len(bodies)])...)
		seq++
	}
	return out, seq
}

// cursorFetch is the scenario of a statement prepared, executed with a
// cursor and fetched from, under caps, given the server's answers to the
// three.
func cursorFetch(name string, caps uint32, exec, fetch, prepAnswer, execAnswer, fetchAnswer []byte) scenario {
	return scenario{name: name, caps: caps, steps: []step{
		up(pk(0, []byte{comStmtPrepare}, []byte("SELECT c FROM t WHERE a=? AND b=?"))),
		down(prepAnswer),
		up(exec), down(execAnswer),
		up(fetch), down(fetchAnswer),
	}, want: []record{
		{"COM_STMT_PREPARE SELECT c FROM t WHERE a=? AND b=?", session.OK, -1, "", 38, int64(len(prepAnswer))},
		{"SELECT c FROM t WHERE a=? AND b=?", session.OK, -1, "", int64(len(exec)), int64(len(execAnswer))},
		{"COM_STMT_FETCH SELECT c FROM t WHERE a=? AND b=?", session.OK, 2, "", int64(len(fetch)), int64(len(fetchAnswer))},
	}}
}

func scenarios() []scenario {
	classic := uint32(testCaps &^ capDeprecateEOF)
	rs3, _ := resultSet(1, false, 2, [][]string{{"1", "a"}, {"2", "b"}, {"3", ""}}, 0x0002)
	rs3c, _ := resultSet(1, true, 2, [][]string{{"1", "a"}, {"2", "b"}, {"3", ""}}, 0x0002)
	multi1, seq := resultSet(1, false, 1, [][]string{{"x"}}, statusMoreResults)
	multi2 := pk(seq, okPayload(2, 0))
	// Prepared statement: 2 parameters, 1 column (classic EOFs).
	prepareOK := append(append(append([]byte{0x00}, le32(7)...), le16(1)...), le16(2)...)
	prepareOK = append(prepareOK, 0, 0, 0)
	prepAnswer := bytes.Join([][]byte{
		pk(1, prepareOK), pk(2, colDef("?")), pk(3, colDef("?")), pk(4, eofPayload(0)),
		pk(5, colDef("c")), pk(6, eofPayload(0)),
	}, nil)
	execute := pk(0, []byte{comStmtExecute}, le32(7), []byte{0}, le32(1), []byte{0, 1, 0x08, 0, 0x08, 0}, make([]byte, 16))
	binRows := bytes.Join([][]byte{
		pk(1, []byte{1}), pk(2, colDef("c")), pk(3, eofPayload(0)),
		pk(4, []byte{0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0}), pk(5, []byte{0x00, 0x00, 2, 0, 0, 0, 0, 0, 0, 0}),
		pk(6, eofPayload(0)),
	}, nil)
	closeStmt := pk(0, []byte{comStmtClose}, le32(7))
	executeLast := pk(0, []byte{comStmtExecute}, le32(0xffffffff), []byte{0}, le32(1), []byte{0, 1, 0x08, 0, 0x08, 0}, make([]byte, 16))
	cursorExec := pk(0, []byte{comStmtExecute}, le32(7), []byte{1}, le32(1), []byte{0, 1, 0x08, 0, 0x08, 0}, make([]byte, 16))
	cursorAnswer := bytes.Join([][]byte{pk(1, []byte{1}), pk(2, colDef("c")), pk(3, eofPayload(statusCursorExists))}, nil)
	prepAnswerNew := bytes.Join([][]byte{
		pk(1, prepareOK), pk(2, colDef("?")), pk(3, colDef("?")), pk(4, colDef("c")),
	}, nil)
	cursorAnswerNew := bytes.Join([][]byte{pk(1, []byte{1}), pk(2, colDef("c")), pk(3, okEOFPayload(statusCursorExists))}, nil)
	fetchAnswerNew := bytes.Join([][]byte{
		pk(1, []byte{0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0}), pk(2, []byte{0x00, 0x00, 2, 0, 0, 0, 0, 0, 0, 0}),
		pk(3, okEOFPayload(statusCursorExists)),
	}, nil)
	fetch := pk(0, []byte{comStmtFetch}, le32(7), le32(100))
	fetchAnswer := bytes.Join([][]byte{
		pk(1, []byte{0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0}), pk(2, []byte{0x00, 0x00, 2, 0, 0, 0, 0, 0, 0, 0}),
		pk(3, eofPayload(0x80)),
	}, nil)
	changeUser := pk(0, []byte{comChangeUser}, []byte("bob\x00"), []byte{3, 1, 2, 3}, []byte("otherdb\x00"), le16(45), []byte("mysql_native_password\x00"))
	authSwitch := pk(1, []byte{0xfe}, []byte("mysql_native_password\x00"), []byte("01234567890123456789\x00"))
	authData := pk(2, make([]byte, 20))
	progress := pk(1, append(append([]byte{0xff}, le16(0xffff)...), 1, 1, 2, 0x10, 0x27, 0, 0))
	longSQL := strings.Repeat("é", 40) // 80 bytes, cut at 64
	withAttrs := pk(0, []byte{comQuery}, []byte{1, 1, 0, 1}, le16(0xfe), lstr("trace"), lstr("abc"), []byte("SELECT 'attr'"))
	set := query("SET @master_heartbeat_period=30000000000")
	events, evSeq := binlogStream(1, 12)
	dumpEOF := pk(evSeq, eofPayload(2))
	purged := pk(1, errPayload(1236, "HY000", "Could not find first log file name in binary log index file"))
	gtidDump := binlogDumpGTID(40)
	denied := pk(1, errPayload(1227, "42000", "Access denied; you need the REPLICATION SLAVE privilege"))
	ack := pk(0, []byte{0xef}, le64(1234), []byte("mysql-bin.000001"))
	return []scenario{
		{name: "ok", caps: testCaps, steps: []step{up(query("INSERT INTO t VALUES (1),(2),(3)")), down(pk(1, okPayload(3, 2)))},
			want: []record{{"INSERT INTO t VALUES (1),(2),(3)", session.OK, 3, "", 37, 11}}},
		{name: "rows", caps: testCaps, steps: []step{up(query("SELECT * FROM t")), down(rs3)},
			want: []record{{"SELECT * FROM t", session.OK, 3, "", 20, int64(len(rs3))}}},
		{name: "rows classic", caps: classic, steps: []step{up(query("SELECT * FROM t")), down(rs3c)},
			want: []record{{"SELECT * FROM t", session.OK, 3, "", 20, int64(len(rs3c))}}},
		{name: "error", caps: testCaps, steps: []step{up(query("SELEC")), down(pk(1, errPayload(1064, "42000", "syntax")))},
			want: []record{{"SELEC", session.Failed, -1, "1064", 10, 19}}},
		{name: "interrupted", caps: testCaps, steps: []step{up(query("SELECT SLEEP(9)")), down(pk(1, errPayload(1317, "70100", "interrupted")))},
			want: []record{{"SELECT SLEEP(9)", session.Cancelled, -1, "1317", 20, 24}}},
		{name: "multi results", caps: testCaps, steps: []step{up(query("SELECT 'x'; DELETE FROM t")), down(multi1, multi2)},
			want: []record{{"SELECT 'x'; DELETE FROM t", session.OK, 3, "", 30, int64(len(multi1) + len(multi2))}}},
		{name: "local infile", caps: testCaps, steps: []step{
			up(query("LOAD DATA LOCAL INFILE 'f' INTO TABLE t")),
			down(pk(1, []byte{0xfb}, []byte("f"))),
			up(pk(2, []byte("1\n2\n")), pk(3, []byte("3\n")), pk(4)),
			down(pk(5, okPayload(3, 2))),
			up(query("SELECT 1")), down(pk(1, okPayload(0, 2))),
		}, want: []record{
			{"LOAD DATA LOCAL INFILE 'f' INTO TABLE t", session.OK, 3, "", 44 + 8 + 6 + 4, 6 + 11},
			{"SELECT 1", session.OK, 0, "", 13, 11},
		}},
		{name: "prepare execute close", caps: classic, steps: []step{
			up(pk(0, []byte{comStmtPrepare}, []byte("SELECT c FROM t WHERE a=? AND b=?"))),
			down(prepAnswer),
			up(execute), down(binRows),
			up(closeStmt),
			up(execute), down(binRows),
		}, want: []record{
			{"COM_STMT_PREPARE SELECT c FROM t WHERE a=? AND b=?", session.OK, -1, "", 38, int64(len(prepAnswer))},
			{"SELECT c FROM t WHERE a=? AND b=?", session.OK, 2, "", int64(len(execute)), int64(len(binRows))},
			{"COM_STMT_EXECUTE 7", session.OK, 2, "", int64(len(execute) + len(closeStmt)), int64(len(binRows))},
		}},
		cursorFetch("cursor fetch", classic, cursorExec, fetch, prepAnswer, cursorAnswer, fetchAnswer),
		cursorFetch("cursor fetch deprecate eof", testCaps, cursorExec, fetch, prepAnswerNew, cursorAnswerNew, fetchAnswerNew),
		{name: "pipelined prepare execute", caps: classic, steps: []step{
			up(pk(0, []byte{comStmtPrepare}, []byte("SELECT c FROM t WHERE a=? AND b=?")), executeLast),
			down(prepAnswer, binRows),
		}, want: []record{
			{"COM_STMT_PREPARE SELECT c FROM t WHERE a=? AND b=?", session.OK, -1, "", 38, int64(len(prepAnswer))},
			{"SELECT c FROM t WHERE a=? AND b=?", session.OK, 2, "", int64(len(executeLast)), int64(len(binRows))},
		}},
		{name: "simple commands", caps: testCaps, steps: []step{
			up(pk(0, []byte{comPing})), down(pk(1, okPayload(0, 2))),
			up(pk(0, []byte{comStatistics})), down(pk(1, []byte("Uptime: 5"))),
			up(pk(0, []byte{comInitDB}, []byte("other"))), down(pk(1, okPayload(0, 2))),
			up(pk(0, []byte{0x42})), down(pk(1, errPayload(1047, "08S01", "Unknown command"))),
		}, want: []record{
			{"COM_PING", session.OK, 0, "", 5, 11},
			{"COM_STATISTICS", session.OK, -1, "", 5, 13},
			{"COM_INIT_DB other", session.OK, 0, "", 10, 11},
			{"COM_0x42", session.Failed, -1, "1047", 5, 28},
		}, db: "other"},
		{name: "handshake auth then change user", caps: testCaps, auth: true, steps: []step{
			down(pk(2, authSwitch[4:])), up(pk(3, authData[4:])), down(pk(4, okPayload(0, 2))),
			up(changeUser), down(authSwitch), up(authData), down(pk(3, okPayload(0, 2))),
			up(query("SELECT 1")), down(pk(1, okPayload(0, 2))),
		}, want: []record{
			{"COM_CHANGE_USER bob", session.OK, 0, "", int64(len(changeUser) + len(authData)), int64(len(authSwitch) + 11)},
			{"SELECT 1", session.OK, 0, "", 13, 11},
		}, user: "bob", db: "otherdb"},
		{name: "failed login", caps: testCaps, auth: true, steps: []step{
			down(pk(2, errPayload(1045, "28000", "Access denied"))),
		}},
		{name: "progress", caps: testCaps, steps: []step{up(query("ALTER TABLE t FORCE")), down(progress, pk(2, okPayload(0, 2)))},
			want: []record{{"ALTER TABLE t FORCE", session.OK, 0, "", 24, int64(len(progress) + 11)}}},
		{name: "unsolicited", caps: testCaps, steps: []step{
			down(pk(0, errPayload(4031, "HY000", "inactivity"))),
			up(query("SELECT 1")), down(pk(1, okPayload(0, 2))),
		}, want: []record{{"SELECT 1", session.OK, 0, "", 13, 11}}},
		{name: "pipelined", caps: testCaps, steps: []step{
			up(query("SELECT 1"), query("SELECT 2")),
			down(pk(1, okPayload(1, 2)), pk(1, okPayload(2, 2))),
		}, want: []record{{"SELECT 1", session.OK, 1, "", 13, 11}, {"SELECT 2", session.OK, 2, "", 13, 11}}},
		{name: "metadata skipped", caps: testCaps, ext: extCacheMetadata, steps: []step{
			up(query("SELECT 1")), down(pk(1, []byte{1, 0}), pk(2, []byte{0x00, 0x00, 1}), pk(3, okEOFPayload(2))),
		}, want: []record{{"SELECT 1", session.OK, 1, "", 13, 6 + 7 + 11}}},
		{name: "metadata sent", caps: testCaps, ext: extCacheMetadata, steps: []step{
			up(query("SELECT 1")), down(pk(1, []byte{1, 1}), pk(2, colDef("c")), pk(3, []byte{0x00, 0x00, 1}), pk(4, okEOFPayload(2))),
		}, want: []record{{"SELECT 1", session.OK, 1, "", 13, int64(6 + 4 + len(colDef("c")) + 7 + 11)}}},
		{name: "field list", caps: classic, steps: []step{
			up(pk(0, []byte{comFieldList}, []byte("t\x00"))),
			down(pk(1, colDef("a")), pk(2, colDef("b")), pk(3, eofPayload(2))),
		}, want: []record{{"COM_FIELD_LIST t", session.OK, -1, "", 7, int64(2*(4+len(colDef("a"))) + 9)}}},
		{name: "truncated sql", caps: testCaps, steps: []step{up(query(longSQL)), down(pk(1, okPayload(0, 2)))},
			want: []record{{strings.Repeat("é", 32), session.OK, 0, "", 85, 11}}},
		{name: "query attributes", caps: testCaps | capQueryAttributes, steps: []step{up(withAttrs), down(pk(1, okPayload(0, 2)))},
			want: []record{{"SELECT 'attr'", session.OK, 0, "", int64(len(withAttrs)), 11}}},
		{name: "send long data", caps: classic, steps: []step{
			up(pk(0, []byte{comStmtPrepare}, []byte("SELECT c FROM t WHERE a=? AND b=?"))),
			down(prepAnswer),
			up(pk(0, []byte{comStmtSendLongData}, le32(7), le16(0), []byte("blob"))),
			up(execute), down(binRows),
		}, want: []record{
			{"COM_STMT_PREPARE SELECT c FROM t WHERE a=? AND b=?", session.OK, -1, "", 38, int64(len(prepAnswer))},
			{"SELECT c FROM t WHERE a=? AND b=?", session.OK, 2, "", int64(4 + 11 + len(execute)), int64(len(binRows))},
		}},
		{name: "quit", caps: testCaps, steps: []step{up(pk(0, []byte{comQuit}))}},
		// Replication: appended, so that the committed seeds of
		// FuzzObserveSplit keep naming the same scenarios.
		{name: "replica", caps: testCaps, kind: session.KindReplication, steps: []step{
			up(set), down(pk(1, okPayload(0, 2))),
			up(registerSlave()), down(pk(1, okPayload(0, 2))),
			up(binlogDump()), down(events[:100]), down(events[100:], dumpEOF),
		}, want: []record{
			{"SET @master_heartbeat_period=30000000000", session.OK, 0, "", int64(len(set)), 11},
			{"COM_REGISTER_SLAVE", session.OK, 0, "", int64(len(registerSlave())), 11},
			{"COM_BINLOG_DUMP", session.OK, -1, "", int64(len(binlogDump())), int64(len(events) + len(dumpEOF))},
		}},
		{name: "binlog stream open", caps: testCaps, kind: session.KindReplication, steps: []step{
			up(gtidDump), down(events),
		}, want: []record{
			{"COM_BINLOG_DUMP_GTID", session.Running, 0, "", int64(len(gtidDump)), int64(len(events))},
		}},
		{name: "semi-sync acknowledgements", caps: testCaps, kind: session.KindReplication, steps: []step{
			up(binlogDump()), down(events[:120]), up(ack), down(events[120:]), up(ack, ack), down(dumpEOF),
			up(set), down(pk(1, okPayload(0, 2))),
		}, want: []record{
			{"COM_BINLOG_DUMP", session.OK, -1, "", int64(len(binlogDump()) + 3*len(ack)), int64(len(events) + len(dumpEOF))},
			{"SET @master_heartbeat_period=30000000000", session.OK, 0, "", int64(len(set)), 11},
		}},
		// A dump or registration the server refuses leaves a client.
		{name: "binlog purged", caps: classic, steps: []step{
			up(binlogDump()), down(purged),
		}, want: []record{
			{"COM_BINLOG_DUMP", session.Failed, -1, "1236", int64(len(binlogDump())), int64(len(purged))},
		}},
		{name: "registration refused", caps: testCaps, steps: []step{
			up(registerSlave()), down(denied),
		}, want: []record{
			{"COM_REGISTER_SLAVE", session.Failed, -1, "1227", int64(len(registerSlave())), int64(len(denied))},
		}},
	}
}

func TestObserveScenarios(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1, 2, 3, 5, 7, 64} {
				reg, sess, u, d := harnessObservers(sc.caps, sc.ext, sc.auth)
				sess.SetIdentity("alice", "sluice", "")
				if err := run(sc.steps, u, d, chunk); err != nil {
					t.Fatalf("chunk %d: %v", chunk, err)
				}
				got := records(reg)
				if fmt.Sprint(got) != fmt.Sprint(sc.want) {
					t.Fatalf("chunk %d:\n got %v\nwant %v", chunk, got, sc.want)
				}
				if sc.user != "" && sess.User() != sc.user {
					t.Errorf("user = %q, want %q", sess.User(), sc.user)
				}
				if sc.db != "" && sess.Database() != sc.db {
					t.Errorf("database = %q, want %q", sess.Database(), sc.db)
				}
				if sess.Kind() != sc.kind {
					t.Errorf("kind = %v, want %v", sess.Kind(), sc.kind)
				}
			}
		})
	}
}

// TestObserveSplitEverywhere splits every step of every scenario at every
// offset and checks the records do not change.
func TestObserveSplitEverywhere(t *testing.T) {
	for _, sc := range scenarios() {
		reg, _, u, d := harnessObservers(sc.caps, sc.ext, sc.auth)
		if err := run(sc.steps, u, d, 0); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(records(reg))
		for i, s := range sc.steps {
			for cut := 1; cut < len(s.b); cut++ {
				steps := append([]step(nil), sc.steps...)
				steps[i] = step{s.up, s.b[:cut]}
				steps = append(steps[:i+1], append([]step{{s.up, s.b[cut:]}}, sc.steps[i+1:]...)...)
				reg, _, u, d := harnessObservers(sc.caps, sc.ext, sc.auth)
				if err := run(steps, u, d, 0); err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(records(reg)); got != want {
					t.Fatalf("%s: step %d cut at %d:\n got %s\nwant %s", sc.name, i, cut, got, want)
				}
			}
		}
	}
}

func TestObserveBytesComplete(t *testing.T) {
	// Every byte of the command phase belongs to a statement, except a
	// final COM_QUIT's.
	for _, sc := range scenarios() {
		if sc.auth || sc.name == "unsolicited" || sc.name == "quit" {
			continue
		}
		reg, _, u, d := harnessObservers(sc.caps, sc.ext, sc.auth)
		if err := run(sc.steps, u, d, 0); err != nil {
			t.Fatal(err)
		}
		var upN, downN int64
		for _, r := range records(reg) {
			upN += r.BytesUp
			downN += r.BytesDown
		}
		if upN != sum(sc.steps, true) || downN != sum(sc.steps, false) {
			t.Errorf("%s: statements hold %d/%d bytes, stream has %d/%d", sc.name, upN, downN, sum(sc.steps, true), sum(sc.steps, false))
		}
	}
}

// TestObserveShortCommands: a command shorter than its fixed fields is
// no reason to end the session. It is recorded as far as it decodes and
// answered by the server: an ERR, or nothing for COM_STMT_CLOSE; the
// next command is followed as usual.
func TestObserveShortCommands(t *testing.T) {
	serverErr := pk(1, errPayload(1835, "08S01", "Malformed communication packet"))
	tests := []struct {
		name   string
		cmd    []byte
		answer []byte
		want   []record
	}{
		{"execute without an id", pk(0, []byte{comStmtExecute, 1, 0, 0}), serverErr,
			[]record{{"COM_STMT_EXECUTE", session.Failed, -1, "1835", 8, int64(len(serverErr))}}},
		{"execute without flags", pk(0, []byte{comStmtExecute}, le32(7)), serverErr,
			[]record{{"COM_STMT_EXECUTE 7", session.Failed, -1, "1835", 9, int64(len(serverErr))}}},
		{"fetch without a row count", pk(0, []byte{comStmtFetch}, le32(1)), serverErr,
			[]record{{"COM_STMT_FETCH COM_STMT_FETCH 1", session.Failed, -1, "1835", 9, int64(len(serverErr))}}},
		{"bulk execute without an id", pk(0, []byte{comStmtBulkExecute}), serverErr,
			[]record{{"COM_STMT_BULK_EXECUTE", session.Failed, -1, "1835", 5, int64(len(serverErr))}}},
		{"reset without an id", pk(0, []byte{comStmtReset, 1}), serverErr,
			[]record{{"COM_STMT_RESET", session.Failed, -1, "1835", 6, int64(len(serverErr))}}},
		{"close without an id", pk(0, []byte{comStmtClose, 1}), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := query("SELECT 1")
			answer, _ := resultSet(1, false, 1, [][]string{{"1"}}, statusAutocommit)
			steps := []step{up(tt.cmd)}
			if tt.answer != nil {
				steps = append(steps, down(tt.answer))
			}
			steps = append(steps, up(q), down(answer))
			for _, chunk := range []int{0, 1, 3} {
				reg, _, u, d := harnessObservers(testCaps, 0, false)
				if err := run(steps, u, d, chunk); err != nil {
					t.Fatalf("chunk %d: %v", chunk, err)
				}
				upQ := int64(len(q))
				if tt.answer == nil { // the close's bytes go to the next statement
					upQ += int64(len(tt.cmd))
				}
				want := append(tt.want, record{"SELECT 1", session.OK, 1, "", upQ, int64(len(answer))})
				if got := records(reg); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("chunk %d:\n got %v\nwant %v", chunk, got, want)
				}
			}
		})
	}
}

// TestObserveTooLarge: a client packet over the limit ends the session
// with an ERR the client reads as the answer to that packet.
func TestObserveTooLarge(t *testing.T) {
	for _, seq := range []uint8{0, 3} {
		reg := session.NewRegistry(session.Options{})
		sess := reg.Open(session.Info{}, t0)
		u, _ := newObservers(connConfig{sess: sess, clock: clock.NewFake(t0), log: slog.New(slog.DiscardHandler),
			maxSQL: 64, maxPacket: 1 << 20, caps: testCaps})
		err := u.Observe([]byte{0xff, 0xff, 0xff, seq, comQuery})
		var f *wire.Fatal
		if !errors.As(err, &f) {
			t.Fatalf("Observe = %v, want *wire.Fatal", err)
		}
		r := f.Reply
		if len(r) < 13 || r[3] != seq+1 || r[4] != 0xff || binary.LittleEndian.Uint16(r[5:]) != erNetPacketTooBig || string(r[8:13]) != "08S01" {
			t.Fatalf("reply %q: want ERR %d seq %d", r, erNetPacketTooBig, seq+1)
		}
		if int(r[0])|int(r[1])<<8|int(r[2])<<16 != len(r)-4 {
			t.Fatalf("reply length field does not match")
		}
	}
}

func TestContinuedPackets(t *testing.T) {
	// A logical packet of exactly 0xffffff bytes is followed by an empty
	// one; a longer one spans several.
	for _, n := range []int{maxPayload - 1, maxPayload, maxPayload + 10} {
		sql := "SELECT '" + strings.Repeat("x", n-10) + "'"
		q := pk(0, []byte{comQuery}, []byte(sql))
		row := pk(3, lstr(strings.Repeat("y", n-4)))
		answer := bytes.Join([][]byte{pk(1, []byte{1}), pk(2, colDef("c")), row}, nil)
		seq := uint8(3 + (len(row)-4)/maxPayload + 1)
		answer = append(answer, pk(seq, okEOFPayload(2))...)
		reg, _, u, d := harnessObservers(testCaps, 0, false)
		if err := run([]step{up(q), down(answer)}, u, d, 1<<16); err != nil {
			t.Fatal(err)
		}
		got := records(reg)
		if len(got) != 1 || got[0].Rows != 1 || got[0].BytesUp != int64(len(q)) || got[0].BytesDown != int64(len(answer)) ||
			got[0].SQL != sql[:64] {
			t.Fatalf("n=%d: %v", n, got)
		}
	}
}

func TestLenenc(t *testing.T) {
	tests := []struct {
		b  []byte
		v  uint64
		n  int
		ok bool
	}{
		{[]byte{0}, 0, 1, true},
		{[]byte{0xfa}, 0xfa, 1, true},
		{[]byte{0xfb}, 0, 0, false},
		{[]byte{0xfc, 0x34, 0x12}, 0x1234, 3, true},
		{[]byte{0xfc, 0x34}, 0, 0, false},
		{[]byte{0xfd, 1, 2, 3}, 0x030201, 4, true},
		{[]byte{0xfe, 1, 2, 3, 4, 5, 6, 7, 8}, 0x0807060504030201, 9, true},
		{[]byte{0xfe, 1, 2, 3, 4, 5, 6, 7}, 0, 0, false},
		{[]byte{0xff}, 0, 0, false},
		{nil, 0, 0, false},
	}
	for _, tt := range tests {
		v, n, ok := lenenc(tt.b)
		if v != tt.v || n != tt.n || ok != tt.ok {
			t.Errorf("lenenc(%x) = %d, %d, %v; want %d, %d, %v", tt.b, v, n, ok, tt.v, tt.n, tt.ok)
		}
	}
}

func TestSQLTextCut(t *testing.T) {
	c := &conn{maxSQL: 5}
	tests := []struct{ in, want string }{
		{"abc", "abc"},
		{"abcdef", "abcde"},
		{"abcdé", "abcd"},
		{"ab€cd", "ab€"},
		{"abc€d", "abc"},
		{"a€€", "a€"},
		{"\x80\x80\x80\x80\x80\x80", "\x80\x80"},
	}
	for _, tt := range tests {
		if got := string(c.sqlText([]byte(tt.in))); got != tt.want {
			t.Errorf("sqlText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBinlogEventContinued: a binlog event longer than 0xffffff bytes
// spans physical packets, and the ones after the first may begin with
// 0xfe or 0xff; the stream goes on past them and ends at the EOF.
func TestBinlogEventContinued(t *testing.T) {
	for _, lead := range []byte{0xfe, 0xff} {
		for _, n := range []int{maxPayload - 20, maxPayload + 5} {
			body := bytes.Repeat([]byte{lead}, n)
			big := binlogEvent(1, 0x1e, body)
			next := uint8(1 + (len(big)-4)/maxPayload + 1)
			if 20+n > maxPayload && big[4+maxPayload+4] != lead {
				t.Fatalf("the continuation does not begin with 0x%02x", lead)
			}
			small := binlogEvent(next, 0x10, []byte{lead, 0, 0, 2, 0})
			eof := pk(next+1, eofPayload(2))
			reg, sess, u, d := harnessObservers(testCaps, 0, false)
			if err := run([]step{up(binlogDump()), down(big, small)}, u, d, 1<<16); err != nil {
				t.Fatal(err)
			}
			if got := records(reg); len(got) != 1 || got[0].Outcome != session.Running || got[0].BytesDown != int64(len(big)+len(small)) {
				t.Fatalf("lead 0x%02x, n=%d, before the EOF: %v", lead, n, got)
			}
			if err := run([]step{down(eof)}, u, d, 0); err != nil {
				t.Fatal(err)
			}
			got := records(reg)
			if len(got) != 1 || got[0].Outcome != session.OK || got[0].BytesDown != int64(len(big)+len(small)+len(eof)) ||
				sess.Kind() != session.KindReplication {
				t.Fatalf("lead 0x%02x, n=%d, after the EOF: %v, kind %v", lead, n, got, sess.Kind())
			}
		}
	}
}

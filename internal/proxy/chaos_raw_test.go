package proxy

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"
)

// Raw sessions open a real session by hand (PostgreSQL startup with
// SCRAM, MySQL handshake with mysql_native_password), or a mangled one,
// then send valid messages, mangled by one or two mutations, in random
// chunks, and end at a random point by FIN, RST or half-close. A
// goroutine reads what comes back the whole time.

// rawStream is a run of protocol messages as bytes, with where each one
// starts, so that mutations can aim at headers.
type rawStream struct {
	b      []byte
	starts []int
}

func (s *rawStream) add(msg []byte) {
	s.starts = append(s.starts, len(s.b))
	s.b = append(s.b, msg...)
}

// pgMsgs appends PostgreSQL frontend messages.
func (s *rawStream) pgMsgs(msgs ...pgproto3.FrontendMessage) {
	for _, m := range msgs {
		b, err := m.Encode(nil)
		if err != nil {
			panic(fmt.Sprintf("encode %T: %v", m, err))
		}
		s.add(b)
	}
}

// myPacket frames a MySQL payload.
func myPacket(seq uint8, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// myForbidden reports whether a MySQL command must never reach the
// shared test server: a mangled stream could otherwise shut it down,
// drop its database, flush it or kill other clients' threads.
func myForbidden(cmd byte) bool {
	switch cmd {
	case 0x05, 0x06, 0x07, 0x08, 0x0c, 0x0d, 0x12, 0x13, 0x14, 0x15, 0x1d, 0x1e:
		return true
	}
	return false
}

// pgForbidden: a FunctionCall calls any function by OID, with the
// arguments a mutation made up.
func pgForbidden(typ byte) bool { return typ == 'F' }

// guardConn wraps the upstream socket of a raw route. It frames the
// client's bytes as the server will and refuses to forward a forbidden
// command (myForbidden, pgForbidden), closing the connection instead.
type guardConn struct {
	net.Conn
	pg    bool
	trips *atomic.Int64

	hdr  [5]byte
	hn   int
	rem  int  // payload bytes left of the current message
	want bool // mysql: the next payload byte is a command
	cont bool // mysql: the current packet continues the previous one
	lost bool // pg: a bad length, which the server answers by closing
}

var errForbidden = errors.New("chaos guard: forbidden command")

func (g *guardConn) Write(p []byte) (int, error) {
	if g.scan(p) {
		g.trips.Add(1)
		g.Conn.Close()
		return 0, errForbidden
	}
	return g.Conn.Write(p)
}

// CloseWrite passes the half-close on.
func (g *guardConn) CloseWrite() error { return closeWrite(g.Conn) }

// scan advances the framing over p and reports a forbidden command.
func (g *guardConn) scan(p []byte) bool {
	hl := 4
	if g.pg {
		hl = 5
	}
	for len(p) > 0 && !g.lost {
		if g.rem > 0 {
			if g.want {
				if myForbidden(p[0]) {
					return true
				}
				g.want = false
			}
			n := min(g.rem, len(p))
			g.rem -= n
			p = p[n:]
			continue
		}
		n := copy(g.hdr[g.hn:hl], p)
		g.hn += n
		p = p[n:]
		if g.hn < hl {
			return false
		}
		g.hn = 0
		if g.pg {
			if pgForbidden(g.hdr[0]) {
				return true
			}
			l := int32(binary.BigEndian.Uint32(g.hdr[1:]))
			if l < 4 {
				g.lost = true
				return false
			}
			g.rem = int(l) - 4
			continue
		}
		l := int(g.hdr[0]) | int(g.hdr[1])<<8 | int(g.hdr[2])<<16
		g.want = !g.cont && l > 0
		g.cont = l == 0xffffff
		g.rem = l
	}
	return false
}

// mutate returns s.b changed by one or two random mutations, or
// unchanged one time in six. pg picks PostgreSQL's framing for the
// header mutations, else MySQL's.
func mutate(rng *rand.Rand, s rawStream, pg bool) []byte {
	b := bytes.Clone(s.b)
	if len(b) == 0 || rng.IntN(6) == 0 {
		return b
	}
	starts := s.starts
	at := func() int { return starts[rng.IntN(len(starts))] }
	for range 1 + rng.IntN(2) {
		if len(b) == 0 {
			break
		}
		switch rng.IntN(7) {
		case 0: // bit flips
			for range 1 + rng.IntN(8) {
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			}
		case 1: // truncation
			b = b[:rng.IntN(len(b))]
		case 2: // a length that lies
			i := at()
			if pg && i+5 <= len(b) {
				lens := []uint32{0, 1, 3, 4, 5, 0x7fffffff, 0xffffffff, 1 << 30, rng.Uint32(),
					binary.BigEndian.Uint32(b[i+1:]) + 1, binary.BigEndian.Uint32(b[i+1:]) - 1}
				binary.BigEndian.PutUint32(b[i+1:], lens[rng.IntN(len(lens))])
			} else if !pg && i+4 <= len(b) {
				n := []int{0, 1, 0xffffff, 0xfffffe, rng.IntN(1 << 24), 1 << 20}[rng.IntN(6)]
				b[i], b[i+1], b[i+2] = byte(n), byte(n>>8), byte(n>>16)
			}
		case 3: // another message type or command
			i := at()
			if pg && i < len(b) {
				b[i] = randomPGType(rng)
			} else if !pg && i+4 < len(b) {
				b[i+4] = randomMyCommand(rng)
			}
		case 4: // a made-up message
			var m []byte
			payload := make([]byte, rng.IntN(64))
			for j := range payload {
				payload[j] = byte(rng.Uint32())
			}
			if pg {
				m = binary.BigEndian.AppendUint32([]byte{randomPGType(rng)}, uint32(4+len(payload)))
				m = append(m, payload...)
			} else {
				m = myPacket(byte(rng.IntN(3)), append([]byte{randomMyCommand(rng)}, payload...))
			}
			i := min(at(), len(b))
			b = append(b[:i:i], append(m, b[i:]...)...)
		case 5: // junk at the end
			junk := make([]byte, 1+rng.IntN(4096))
			for j := range junk {
				junk[j] = byte(rng.Uint32())
			}
			b = append(b, junk...)
		case 6: // a stretch sent twice
			i := rng.IntN(len(b))
			j := i + rng.IntN(len(b)-i)
			b = append(b[:j:j], append(bytes.Clone(b[i:j]), b[j:]...)...)
		}
	}
	return b
}

func randomPGType(rng *rand.Rand) byte {
	for {
		if t := byte(rng.Uint32()); !pgForbidden(t) {
			return t
		}
	}
}

func randomMyCommand(rng *rand.Rand) byte {
	for {
		c := byte(rng.IntN(0x20))
		if rng.IntN(8) == 0 {
			c = byte(rng.Uint32())
		}
		if !myForbidden(c) {
			return c
		}
	}
}

// drainer reads a socket to its end in the background.
type drainer struct{ done chan bool } // true at EOF or an error, false at the read deadline

func startDrain(conn net.Conn) *drainer {
	d := &drainer{done: make(chan bool, 1)}
	go func() {
		_, err := io.Copy(io.Discard, conn)
		d.done <- !errors.Is(err, os.ErrDeadlineExceeded)
	}()
	return d
}

// sendRaw writes b to conn in random chunks, now and then pausing, until
// it is sent or a write fails, then ends the session at random.
func (c *chaos) sendRaw(conn net.Conn, rng *rand.Rand, b []byte) {
	d := startDrain(conn)
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(1+rng.IntN(8192)))
		if _, err := conn.Write(b[:n]); err != nil {
			break
		}
		b = b[n:]
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
	}
	c.endConn(conn, pickEnd(rng), d)
}

func dialRoute(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn, nil
}

// pgStartupBytes is a StartupMessage.
func pgStartupBytes(user, database string) []byte {
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": user, "database": database, "application_name": "chaos"}}).Encode(nil)
	return b
}

// pgStartup runs a PostgreSQL startup by hand: StartupMessage, then
// SCRAM-SHA-256, MD5 or cleartext authentication, until ReadyForQuery.
func pgStartup(conn net.Conn, user, password, database string) error {
	if _, err := conn.Write(pgStartupBytes(user, database)); err != nil {
		return err
	}
	fe := pgproto3.NewFrontend(conn, conn)
	var sc *scram.ClientConversation
	for {
		msg, err := fe.Receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.AuthenticationSASL:
			cl, err := scram.SHA256.NewClient(user, password, "")
			if err != nil {
				return err
			}
			sc = cl.NewConversation()
			first, err := sc.Step("")
			if err != nil {
				return err
			}
			fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte(first)})
		case *pgproto3.AuthenticationSASLContinue:
			resp, err := sc.Step(string(m.Data))
			if err != nil {
				return err
			}
			fe.Send(&pgproto3.SASLResponse{Data: []byte(resp)})
		case *pgproto3.AuthenticationSASLFinal:
			if _, err := sc.Step(string(m.Data)); err != nil {
				return err
			}
		case *pgproto3.AuthenticationMD5Password:
			inner := md5.Sum([]byte(password + user))
			outer := md5.Sum(append([]byte(hex.EncodeToString(inner[:])), m.Salt[:]...))
			fe.Send(&pgproto3.PasswordMessage{Password: "md5" + hex.EncodeToString(outer[:])})
		case *pgproto3.AuthenticationCleartextPassword:
			fe.Send(&pgproto3.PasswordMessage{Password: password})
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("server: %s %s", m.Code, m.Message)
		case *pgproto3.ReadyForQuery:
			return nil
		}
		if err := fe.Flush(); err != nil {
			return err
		}
	}
}

// pgRawMessages is a random run of valid client messages: simple and
// multi-statement queries, extended-protocol pipelines, COPY both ways.
func pgRawMessages(rng *rand.Rand) rawStream {
	var s rawStream
	for i := range 1 + rng.IntN(12) {
		n := strconv.Itoa(1 + rng.IntN(500))
		name := "s" + strconv.Itoa(i)
		switch rng.IntN(8) {
		case 0:
			s.pgMsgs(&pgproto3.Query{String: "SELECT i, md5(i::text) FROM generate_series(1, " + n + ") i"})
		case 1:
			for range 1 + rng.IntN(5) {
				s.pgMsgs(&pgproto3.Parse{Query: "SELECT $1::int + 1"},
					&pgproto3.Bind{Parameters: [][]byte{[]byte(n)}},
					&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{})
			}
			s.pgMsgs(&pgproto3.Sync{})
		case 2:
			s.pgMsgs(&pgproto3.Parse{Name: name, Query: "SELECT repeat('x', $1::int)"},
				&pgproto3.Describe{ObjectType: 'S', Name: name},
				&pgproto3.Bind{PreparedStatement: name, Parameters: [][]byte{[]byte(n)}},
				&pgproto3.Execute{}, &pgproto3.Close{ObjectType: 'S', Name: name}, &pgproto3.Sync{})
		case 3:
			s.pgMsgs(&pgproto3.Query{String: "COPY (SELECT i FROM generate_series(1, " + n + ") i) TO STDOUT"})
		case 4:
			s.pgMsgs(&pgproto3.Query{String: "CREATE TEMP TABLE IF NOT EXISTS chaos_raw (i int, v text)"},
				&pgproto3.Query{String: "COPY chaos_raw FROM STDIN"})
			for j := range 1 + rng.IntN(20) {
				s.pgMsgs(&pgproto3.CopyData{Data: fmt.Appendf(nil, "%d\tv%d\n", j, j)})
			}
			if rng.IntN(4) == 0 {
				s.pgMsgs(&pgproto3.CopyFail{Message: "chaos"})
			} else {
				s.pgMsgs(&pgproto3.CopyDone{})
			}
		case 5:
			s.pgMsgs(&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Flush{}, &pgproto3.Sync{})
		case 6:
			s.pgMsgs(&pgproto3.Query{String: "SELECT 1; SELECT 'two'; SELECT " + n})
		case 7:
			s.pgMsgs(&pgproto3.Query{String: "SELECT 1/0"})
		}
	}
	if rng.IntN(4) == 0 {
		s.pgMsgs(&pgproto3.Terminate{})
	}
	return s
}

// pgRawSession: one time in five the opening exchange itself is
// mangled; otherwise a startup by hand, then mangled messages.
func (c *chaos) pgRawSession(ctx context.Context, rng *rand.Rand) error {
	cfg, err := pgx.ParseConfig(c.pgURL)
	if err != nil {
		return err
	}
	conn, err := dialRoute(ctx, c.addrs["pg-raw"])
	if err != nil {
		return err
	}
	var s rawStream
	if rng.IntN(5) == 0 {
		c.stats.op("pg-raw-startup")
		if rng.IntN(3) == 0 {
			s.add([]byte{0, 0, 0, 8, 4, 210, 22, 47}) // SSLRequest
		}
		s.add(pgStartupBytes(cfg.User, cfg.Database))
		s.b = append(s.b, pgRawMessages(rng).b...)
		c.sendRaw(conn, rng, mutate(rng, s, true))
		return nil
	}
	c.stats.op("pg-raw")
	if err := pgStartup(conn, cfg.User, cfg.Password, cfg.Database); err != nil {
		conn.Close()
		return fmt.Errorf("startup by hand: %w", err)
	}
	c.sendRaw(conn, rng, mutate(rng, pgRawMessages(rng), true))
	return nil
}

// MySQL capability flags of a handshake response by hand.
const (
	myLongPassword    = 1 << 0
	myLongFlag        = 1 << 2
	myConnectWithDB   = 1 << 3
	myProtocol41      = 1 << 9
	myTransactions    = 1 << 13
	mySecureConn      = 1 << 15
	myMultiStatements = 1 << 16
	myMultiResults    = 1 << 17
	myPSMultiResults  = 1 << 18
	myPluginAuth      = 1 << 19
)

// readMyPacket reads one MySQL packet and returns its sequence id and
// payload.
func readMyPacket(r io.Reader) (uint8, []byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	p := make([]byte, int(h[0])|int(h[1])<<8|int(h[2])<<16)
	_, err := io.ReadFull(r, p)
	return h[3], p, err
}

// nativePassword is mysql_native_password's answer to a scramble.
func nativePassword(scramble []byte, password string) []byte {
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	h3 := sha1.Sum(append(bytes.Clone(scramble), h2[:]...))
	for i := range h1 {
		h1[i] ^= h3[i]
	}
	return h1[:]
}

// greetingScramble returns the 20-byte scramble of a protocol 10
// greeting payload.
func greetingScramble(p []byte) ([]byte, error) {
	if len(p) < 1 || p[0] != 10 {
		return nil, fmt.Errorf("greeting % x: not protocol 10", p[:min(len(p), 8)])
	}
	i := bytes.IndexByte(p[1:], 0)
	if i < 0 {
		return nil, errors.New("greeting: no server version")
	}
	i += 2 + 4 // version, NUL, connection id
	if len(p) < i+9+2+1+2+2+1+10+12 {
		return nil, errors.New("greeting: too short")
	}
	s := bytes.Clone(p[i : i+8])
	i += 9 + 2 + 1 + 2 + 2 + 1 + 10
	return append(s, p[i:i+12]...), nil
}

// myResponse is a handshake response for user with the answer to
// scramble.
func myResponse(user, password, database string, scramble []byte) []byte {
	caps := uint32(myLongPassword | myLongFlag | myConnectWithDB | myProtocol41 | myTransactions |
		mySecureConn | myMultiStatements | myMultiResults | myPSMultiResults | myPluginAuth)
	p := binary.LittleEndian.AppendUint32(nil, caps)
	p = binary.LittleEndian.AppendUint32(p, 16<<20)
	p = append(p, 45)
	p = append(p, make([]byte, 23)...)
	p = append(append(p, user...), 0)
	auth := nativePassword(scramble, password)
	p = append(append(p, byte(len(auth))), auth...)
	p = append(append(p, database...), 0)
	return myPacket(1, append(p, "mysql_native_password\x00"...))
}

// myHandshake runs a MySQL handshake by hand with mysql_native_password,
// answering an auth switch to it, until the server's OK.
func myHandshake(conn net.Conn, user, password, database string) error {
	_, g, err := readMyPacket(conn)
	if err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	scramble, err := greetingScramble(g)
	if err != nil {
		return err
	}
	if _, err := conn.Write(myResponse(user, password, database, scramble)); err != nil {
		return err
	}
	for {
		seq, p, err := readMyPacket(conn)
		if err != nil {
			return fmt.Errorf("after the handshake response: %w", err)
		}
		switch {
		case len(p) > 0 && p[0] == 0x00:
			return nil
		case len(p) > 0 && p[0] == 0xff:
			return fmt.Errorf("server refused: %q", p)
		case len(p) > 0 && p[0] == 0xfe:
			plugin, data, _ := bytes.Cut(p[1:], []byte{0})
			if string(plugin) != "mysql_native_password" || len(data) < 20 {
				return fmt.Errorf("auth switch to %q", plugin)
			}
			if _, err := conn.Write(myPacket(seq+1, nativePassword(data[:20], password))); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected packet % x", p[:min(len(p), 16)])
		}
	}
}

// myStmtExecute executes prepared statement id with one BIGINT.
func myStmtExecute(id uint32, v int64) []byte {
	p := binary.LittleEndian.AppendUint32([]byte{0x17}, id)
	p = append(p, 0)                           // flags: no cursor
	p = binary.LittleEndian.AppendUint32(p, 1) // iterations
	p = append(p, 0, 1, 0x08, 0)               // null bitmap, types follow, BIGINT
	return binary.LittleEndian.AppendUint64(p, uint64(v))
}

// myRawMessages is a random run of valid commands: text and
// multi-statement queries, prepares with executions (by the id the
// server will give, or -1 for the last one), pings, errors.
func myRawMessages(rng *rand.Rand) rawStream {
	var s rawStream
	prepared := uint32(0)
	cmd := func(c byte, body string) { s.add(myPacket(0, append([]byte{c}, body...))) }
	for range 1 + rng.IntN(12) {
		n := 1 + rng.IntN(500)
		switch rng.IntN(8) {
		case 0:
			cmd(0x03, fmt.Sprintf("SELECT seq, MD5(seq) FROM seq_1_to_%d", n))
		case 1:
			cmd(0x03, fmt.Sprintf("SELECT 1; SELECT 'two'; SELECT %d", n))
		case 2:
			cmd(0x16, "SELECT ? + 1")
			prepared++
			s.add(myPacket(0, myStmtExecute(prepared, int64(n))))
		case 3:
			s.add(myPacket(0, myStmtExecute(0xffffffff, int64(n))))
		case 4:
			cmd(0x0e, "")
		case 5:
			if prepared > 0 {
				s.add(myPacket(0, binary.LittleEndian.AppendUint32([]byte{0x19}, 1+rng.Uint32N(prepared))))
			}
		case 6:
			cmd(0x03, "SELECT * FROM chaos_no_such_table")
		case 7:
			cmd(0x03, fmt.Sprintf("SELECT REPEAT('r', %d)", n*100))
		}
	}
	if rng.IntN(4) == 0 {
		cmd(0x01, "")
	}
	return s
}

// myRawSession: one time in five a mangled handshake response, else a
// handshake by hand and then mangled commands.
func (c *chaos) myRawSession(ctx context.Context, rng *rand.Rand) error {
	conn, err := dialRoute(ctx, c.addrs["mysql-raw"])
	if err != nil {
		return err
	}
	if rng.IntN(5) == 0 {
		c.stats.op("mysql-raw-handshake")
		_, g, err := readMyPacket(conn)
		if err != nil {
			conn.Close()
			return fmt.Errorf("greeting: %w", err)
		}
		scramble, err := greetingScramble(g)
		if err != nil {
			conn.Close()
			return err
		}
		var s rawStream
		s.add(myResponse(c.myCfg.User, c.myCfg.Passwd, c.myCfg.DBName, scramble))
		s.b = append(s.b, myRawMessages(rng).b...)
		c.sendRaw(conn, rng, mutate(rng, s, false))
		return nil
	}
	c.stats.op("mysql-raw")
	if err := myHandshake(conn, c.myCfg.User, c.myCfg.Passwd, c.myCfg.DBName); err != nil {
		conn.Close()
		return fmt.Errorf("handshake by hand: %w", err)
	}
	c.sendRaw(conn, rng, mutate(rng, myRawMessages(rng), false))
	return nil
}

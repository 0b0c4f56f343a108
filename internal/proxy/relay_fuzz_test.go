package proxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// The relay fuzz targets drive a whole session through a proxy route:
// the front end's opening exchange, the observers and statement records,
// the pumps and the close, between a client and a loopback "server" that
// both replay bytes from the input. Properties: no panic; once both
// peers have stopped sending, the proxy closes both sockets within a
// bound; the session leaves the registry and its goroutines end; and what
// each peer received is, past the opening exchange, a prefix of what the
// other sent (plus, towards the client, at most one error of sluice's
// own when it ends the session).

// Steps of a relay script.
const (
	stepClient     = iota // client sends data
	stepServer            // server sends data
	stepClientFIN         // client closes
	stepClientRST         // client resets
	stepClientHalf        // client half-closes
	stepServerFIN
	stepServerRST
	stepServerHalf
	numSteps
)

type relayStep struct {
	op   byte
	data []byte
}

// decodeScript reads a fuzz input as steps: an op byte (modulo
// numSteps), and for the two data steps a little-endian uint16 length
// and that many bytes (fewer at the end of the input).
func decodeScript(b []byte) []relayStep {
	var steps []relayStep
	for len(b) > 0 {
		s := relayStep{op: b[0] % numSteps}
		b = b[1:]
		if s.op == stepClient || s.op == stepServer {
			n := 0
			if len(b) >= 2 {
				n = int(binary.LittleEndian.Uint16(b))
				b = b[2:]
			}
			n = min(n, len(b))
			s.data, b = b[:n], b[n:]
		}
		steps = append(steps, s)
	}
	return steps
}

// encodeScript is the inverse of decodeScript; data over 64 KiB is cut
// into several steps.
func encodeScript(steps []relayStep) []byte {
	var b []byte
	for _, s := range steps {
		if s.op != stepClient && s.op != stepServer {
			b = append(b, s.op)
			continue
		}
		d := s.data
		for first := true; first || len(d) > 0; first = false {
			n := min(len(d), 0xffff)
			b = append(b, s.op)
			b = binary.LittleEndian.AppendUint16(b, uint16(n))
			b = append(b, d[:n]...)
			d = d[n:]
		}
	}
	return b
}

// relayRig is a proxy with one route of a protocol to a loopback
// listener that the script's server side answers on.
type relayRig struct {
	pg   bool
	srv  *Server
	reg  *session.Registry
	addr string
	up   *net.TCPListener
}

// newRelayRig starts a proxy for protocol; loops is its Options.Loops
// (negative: every session on its pumps).
func newRelayRig(t testing.TB, protocol string, loops int) *relayRig {
	t.Helper()
	up, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	r := &relayRig{pg: protocol == "postgres", reg: session.NewRegistry(session.Options{}), up: up}
	quiet := slog.New(slog.DiscardHandler)
	r.srv = New(Options{Logger: quiet, Registry: r.reg, Loops: loops})
	t.Cleanup(func() { r.srv.Close() })
	addr, err := r.srv.AddRoute(testRoute(t, quiet, r.reg, "fuzz", protocol, up.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	r.addr = addr.String()
	return r
}

// lockedBuffer collects what a reader goroutine reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b = append(l.b, p...)
	l.mu.Unlock()
	return len(p), nil
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b)
}

// peer is one end of a replayed session.
type peer struct {
	conn   *net.TCPConn
	got    lockedBuffer
	sent   []byte
	done   chan struct{} // closed when the reader has stopped
	broken bool          // a write failed or the script closed this end
	closed bool          // fully closed
	cut    bool          // closed by the script: its reader may have stopped early
}

func newPeer(c *net.TCPConn) *peer {
	p := &peer{conn: c, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		io.Copy(&p.got, c)
	}()
	return p
}

func (p *peer) write(b []byte) {
	if p.broken || len(b) == 0 {
		return
	}
	p.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	n, err := p.conn.Write(b)
	p.sent = append(p.sent, b[:n]...)
	if err != nil {
		p.broken = true
	}
}

// end closes or half-closes the peer as op says.
func (p *peer) end(op byte) {
	switch op {
	case stepClientRST, stepServerRST:
		p.conn.SetLinger(0)
		fallthrough
	case stepClientFIN, stepServerFIN:
		p.conn.Close()
		p.closed, p.cut = true, true
	default:
		p.conn.CloseWrite()
	}
	p.broken = true
}

// relayTimeout bounds each wait of a replay: generous, for -race on a
// loaded host, and still far below the proxy's own timeouts, so a stall
// is a defect and not a timeout doing its job.
const relayTimeout = 10 * time.Second

// replayed is what each peer of a replay sent and received.
type replayed struct {
	cliSent, cliGot, srvSent, srvGot []byte
}

// replay runs one script through the rig, checks the properties and
// returns what went each way.
func (r *relayRig) replay(t *testing.T, steps []relayStep) replayed {
	g0 := runtime.NumGoroutine()
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(r.addr)))
	if err != nil {
		t.Fatal(err)
	}
	client := newPeer(c)
	ups := make(chan *net.TCPConn, 1)
	go func() {
		u, err := r.up.AcceptTCP()
		if err != nil {
			close(ups)
			return
		}
		ups <- u
	}()
	var server *peer
	take := func(u *net.TCPConn, ok bool) {
		if ok {
			server = newPeer(u)
		}
	}
	// upstream returns the server peer once the proxy has dialled it, or
	// nil if it has not within a second (once per replay), or will not:
	// the client's bytes hold no whole startup packet yet, or the proxy
	// already gave up on the client. A dial comes within microseconds of
	// its cause; one missed here only skips server bytes, and the end
	// below still waits for it.
	waited := false // a wait has timed out: later steps do not wait again
	upstream := func() *peer {
		if server != nil {
			return server
		}
		if waited || r.pg && !pgStartupSent(client.sent) {
			select {
			case u, ok := <-ups:
				take(u, ok)
			default:
			}
			return server
		}
		select {
		case u, ok := <-ups:
			take(u, ok)
		case <-client.done:
		case <-time.After(time.Second):
			waited = true
		}
		return server
	}
	// relaying reports whether the proxy runs a relay. Until the client
	// sends, the relay waits for it; once it has ended, any upstream
	// dial of its opening exchange is done.
	relaying := func() bool {
		r.srv.mu.Lock()
		defer r.srv.mu.Unlock()
		return len(r.srv.conns) > 0
	}
	testenv.Eventually(t, relayTimeout, "the proxy to accept", relaying)

	for _, s := range steps {
		switch s.op {
		case stepClient:
			client.write(s.data)
		case stepServer:
			if p := upstream(); p != nil {
				p.write(s.data)
			}
		case stepClientFIN, stepClientRST, stepClientHalf:
			if !client.closed {
				client.end(s.op)
			}
		default:
			if p := upstream(); p != nil && !p.closed {
				p.end(s.op)
			}
		}
	}
	// Both peers stop sending: the proxy must then forward what it holds
	// and close both sockets, whatever state the session was left in.
	if !client.closed {
		client.end(stepClientHalf)
	}
	// Whether the proxy dials: it either has, or does so before its
	// relay of the client can end.
	for deadline := time.Now().Add(relayTimeout); server == nil && relaying() && time.Now().Before(deadline); {
		select {
		case u, ok := <-ups:
			take(u, ok)
		case <-time.After(time.Millisecond):
		}
	}
	if server != nil && !server.closed {
		server.end(stepServerHalf)
	}
	stalled := func(what string, ch <-chan struct{}) {
		select {
		case <-ch:
		case <-time.After(relayTimeout):
			dumpAll(t)
			t.Fatalf("%s: still open %v after both peers stopped sending", what, relayTimeout)
		}
	}
	stalled("client socket", client.done)
	if server != nil {
		stalled("server socket", server.done)
	}
	if !testenv.Poll(relayTimeout, func() bool { return !relaying() }) {
		dumpAll(t)
		t.Fatalf("the relay still runs %v after both peers' sockets closed", relayTimeout)
	}
	client.conn.Close()
	if server != nil {
		server.conn.Close()
	} else {
		// The relay has ended, so a dial it made is done: its connection
		// is with the accept or still in the backlog, where the next
		// replay would take it for its own.
		r.up.SetDeadline(clock.LongAgo) // stop the accept
		if u, ok := <-ups; ok {
			u.Close()
		}
		r.up.SetDeadline(time.Time{})
		r.dropBacklog(t)
	}
	if ss := r.reg.Sessions(); len(ss) > 0 {
		t.Fatalf("session %d still in the registry after its relay ended", ss[0].ID)
	}
	if n := settle(g0, relayTimeout, runtime.NumGoroutine); n > g0 {
		dumpAll(t)
		t.Fatalf("%d goroutines after the session, %d before", n, g0)
	}
	out := replayed{cliSent: client.sent, cliGot: client.got.bytes()}
	if server != nil {
		out.srvSent, out.srvGot = server.sent, server.got.bytes()
	}
	check := checkMySQLPrefix
	if r.pg {
		check = checkPGPrefix
	}
	if err := check(out.cliSent, out.cliGot, out.srvSent, out.srvGot, client.cut); err != nil {
		t.Fatal(err)
	}
	return out
}

// dropBacklog closes the connections waiting in the upstream listener's
// backlog, accepting without blocking (an expired deadline fails an
// Accept before it looks at the backlog).
func (r *relayRig) dropBacklog(t *testing.T) {
	rc, err := r.up.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for {
		nfd := -1
		if err := rc.Control(func(fd uintptr) { nfd, _, _ = unix.Accept4(int(fd), unix.SOCK_CLOEXEC) }); err != nil || nfd < 0 {
			return // EAGAIN: the backlog is empty
		}
		unix.Close(nfd)
	}
}

func dumpAll(t *testing.T) {
	buf := make([]byte, 1<<20)
	t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
}

// pgNegotiation returns how many SSLRequest and GSSENCRequest packets
// lead b, and their length.
func pgNegotiation(b []byte) (n, size int) {
	for len(b) >= 8 && binary.BigEndian.Uint32(b) == 8 {
		code := binary.BigEndian.Uint32(b[4:])
		if code != 80877103 && code != 80877104 {
			break
		}
		n, size, b = n+1, size+8, b[8:]
	}
	return n, size
}

// pgStartupSent reports whether b holds a whole startup packet past the
// negotiation, the point from which the proxy may dial.
func pgStartupSent(b []byte) bool {
	_, k := pgNegotiation(b)
	b = b[k:]
	return len(b) >= 4 && uint64(len(b)) >= uint64(binary.BigEndian.Uint32(b))
}

// prefixOf reports whether got is a prefix of sent, and where they part.
func prefixOf(got, sent []byte) (bool, int) {
	i := 0
	for i < len(got) && i < len(sent) && got[i] == sent[i] {
		i++
	}
	return i == len(got), i
}

// splitTail reports whether got is a prefix of sent, perhaps followed
// by one message of sluice's own, as isOwn decides.
func splitTail(got, sent []byte, isOwn func(tail []byte) bool) bool {
	if ok, _ := prefixOf(got, sent); ok {
		return true
	}
	for j := len(got) - 1; j >= 0; j-- {
		if ok, _ := prefixOf(got[:j], sent); ok && isOwn(got[j:]) {
			return true
		}
	}
	return false
}

// pgOwnError reports whether b is one ErrorResponse of sluice's, or with
// cut the start of one (the client stopped reading).
func pgOwnError(b []byte, cut bool) bool {
	if cut && len(b) < 5 {
		return len(b) > 0 && b[0] == 'E'
	}
	if len(b) < 5 || b[0] != 'E' {
		return false
	}
	n := int(binary.BigEndian.Uint32(b[1:]))
	return n == len(b)-1 && bytes.Contains(b, []byte("Msluice: ")) || cut && n > len(b)-1
}

// checkPGPrefix checks a replayed PostgreSQL session: past the
// negotiation packets (each answered 'N'), the server got a prefix of the
// client's bytes, StartupMessage included, and the client got a prefix
// of the server's, perhaps followed by one error of sluice's. cut says
// the client closed its socket itself, so it may have read less than it
// was sent.
func checkPGPrefix(cliSent, cliGot, srvSent, srvGot []byte, cut bool) error {
	nego, k := pgNegotiation(cliSent)
	if ok, at := prefixOf(srvGot, cliSent[k:]); !ok {
		return fmt.Errorf("server got %d bytes that are not what the client sent past its %d negotiation packets: they part at %d: got % x, sent % x",
			len(srvGot), nego, at, window(srvGot, at), window(cliSent[k:], at))
	}
	own := func(b []byte) bool { return pgOwnError(b, cut) }
	answers := min(nego, len(cliGot))
	if !bytes.Equal(cliGot[:answers], bytes.Repeat([]byte("N"), answers)) {
		return fmt.Errorf("client got % x, want %d answers N first", window(cliGot, 0), nego)
	}
	if srvSent == nil {
		// The proxy never dialled: past the answers to its negotiation,
		// the client got at most an error.
		if rest := cliGot[answers:]; len(rest) > 0 && !own(rest) {
			return fmt.Errorf("client got % x before any upstream", window(cliGot, 0))
		}
		return nil
	}
	if answers < nego && !cut {
		return fmt.Errorf("client got % x, want %d answers N first", window(cliGot, 0), nego)
	}
	if !splitTail(cliGot[answers:], srvSent, own) {
		_, at := prefixOf(cliGot[answers:], srvSent)
		return fmt.Errorf("client got %d bytes past the negotiation that are not a prefix of the server's %d: they part at %d: got % x, sent % x",
			len(cliGot)-answers, len(srvSent), at, window(cliGot[answers:], at), window(srvSent, at))
	}
	return nil
}

// myPacketLen returns the length of the whole first packet of b, or -1.
func myPacketLen(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	n := 4 + (int(b[0]) | int(b[1])<<8 | int(b[2])<<16)
	if n > len(b) {
		return -1
	}
	return n
}

// myOwnError reports whether b is one ERR packet, or with cut the start
// of one.
func myOwnError(b []byte, cut bool) bool {
	if len(b) < 4 {
		return cut && len(b) > 0
	}
	n := 4 + (int(b[0]) | int(b[1])<<8 | int(b[2])<<16)
	return (n == len(b) || cut && n > len(b)) && (len(b) == 4 || b[4] == 0xff)
}

// checkMySQLPrefix checks a replayed MySQL session. The proxy rewrites
// the greeting's capabilities and the handshake response's sequence id
// and TLS bit; once it has forwarded the handshake response, the server
// got a prefix of the client's later bytes, and the client, past the
// greeting, a prefix of the server's, perhaps followed by one ERR. A
// handshake response numbered other than 1 makes the proxy renumber the
// authentication exchange both ways (as it does when TLS is on one leg
// only), so nothing is verbatim to check then.
func checkMySQLPrefix(cliSent, cliGot, srvSent, srvGot []byte, cut bool) error {
	rn, gn := myPacketLen(cliSent), myPacketLen(srvSent)
	if len(srvGot) == 0 || rn < 0 || gn < 0 || len(srvGot) < rn || cliSent[3] != 1 {
		return nil // still in the opening exchange, or renumbered
	}
	if !bytes.Equal(srvGot[:3], cliSent[:3]) {
		return fmt.Errorf("handshake response forwarded with header % x, sent % x", srvGot[:4], cliSent[:4])
	}
	if ok, at := prefixOf(srvGot[rn:], cliSent[rn:]); !ok {
		return fmt.Errorf("server got bytes past the handshake response that the client did not send: part at %d: got % x, sent % x",
			at, window(srvGot[rn:], at), window(cliSent[rn:], at))
	}
	if len(cliGot) < gn {
		if !cut || !bytes.Equal(cliGot[:min(3, len(cliGot))], srvSent[:min(3, len(cliGot))]) {
			return fmt.Errorf("client got % x, not the %d-byte greeting", window(cliGot, 0), gn)
		}
		return nil
	}
	if !bytes.Equal(cliGot[:3], srvSent[:3]) {
		return fmt.Errorf("client got greeting header % x, server sent % x", cliGot[:4], srvSent[:4])
	}
	if !splitTail(cliGot[gn:], srvSent[gn:], func(b []byte) bool { return myOwnError(b, cut) }) {
		_, at := prefixOf(cliGot[gn:], srvSent[gn:])
		return fmt.Errorf("client got bytes past the greeting that are not a prefix of the server's: part at %d: got % x, sent % x",
			at, window(cliGot[gn:], at), window(srvSent[gn:], at))
	}
	return nil
}

// window is up to 16 bytes of b from at, for messages.
func window(b []byte, at int) []byte {
	at = min(at, len(b))
	return b[at:min(len(b), at+16)]
}

func fuzzRelay(f *testing.F, protocol string) {
	// Two proxies serve every input of this process, one relaying on its
	// event loop, one on pumps; the inputs run one at a time, on each.
	onLoop, onPumps := newRelayRig(f, protocol, 0), newRelayRig(f, protocol, -1)
	f.Fuzz(func(t *testing.T, script []byte) {
		steps := decodeScript(script)
		onLoop.replay(t, steps)
		onPumps.replay(t, steps)
	})
}

func FuzzRelayPG(f *testing.F) {
	f.Add(encodeScript([]relayStep{
		{stepClient, pgStartupBytes("u", "d")},
		{stepServer, []byte("R\x00\x00\x00\x08\x00\x00\x00\x00Z\x00\x00\x00\x05I")},
		{stepClient, []byte("Q\x00\x00\x00\x0dSELECT 1\x00")},
		{op: stepClientFIN},
	}))
	fuzzRelay(f, "postgres")
}

func FuzzRelayMySQL(f *testing.F) {
	f.Add(encodeScript([]relayStep{
		{stepServer, myPacket(0, []byte("\x0a5.5.5-test\x00\x01\x00\x00\x00abcdefgh\x00\xff\xf7\x2d\x02\x00\xff\x81\x15\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00ijklmnopqrst\x00mysql_native_password\x00"))},
		{stepClient, myResponse("u", "p", "d", []byte("abcdefghijklmnopqrst"))},
		{stepServer, myPacket(2, []byte{0, 0, 0, 2, 0, 0, 0})},
		{stepClient, myPacket(0, []byte("\x03SELECT 1"))},
		{op: stepClientRST},
	}))
	fuzzRelay(f, "mysql")
}

// TestReplayDeliversRecordedSessions replays the recorded sessions of
// the seed corpora without their closing steps: both peers then
// half-close, and each must have received every byte the other sent
// (the MySQL greeting and handshake response as long as they were).
func TestReplayDeliversRecordedSessions(t *testing.T) {
	for _, tc := range []struct{ protocol, file string }{
		{"postgres", "testdata/fuzz/FuzzRelayPG/pgx-session"},
		{"mysql", "testdata/fuzz/FuzzRelayMySQL/go-sql-driver-session"},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			script := readCorpusBytes(t, tc.file)
			var steps []relayStep
			for _, s := range decodeScript(script) {
				if s.op == stepClient || s.op == stepServer {
					steps = append(steps, s)
				}
			}
			for _, loops := range []int{0, -1} {
				got := newRelayRig(t, tc.protocol, loops).replay(t, steps)
				if len(got.cliSent) < 100 || len(got.srvSent) < 100 {
					t.Fatalf("replay sent %d and %d bytes: the recording is too short", len(got.cliSent), len(got.srvSent))
				}
				if len(got.srvGot) != len(got.cliSent) || len(got.cliGot) != len(got.srvSent) {
					t.Fatalf("server got %d of the client's %d bytes, client %d of the server's %d",
						len(got.srvGot), len(got.cliSent), len(got.cliGot), len(got.srvSent))
				}
				if tc.protocol == "postgres" && (!bytes.Equal(got.srvGot, got.cliSent) || !bytes.Equal(got.cliGot, got.srvSent)) {
					t.Fatal("a byte changed on the way")
				}
			}
		})
	}
}

// readCorpusBytes reads the one []byte of a "go test fuzz v1" file.
func readCorpusBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lit, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
	if !ok || !strings.HasSuffix(lit, ")") {
		t.Fatalf("%s: not a one-[]byte corpus file", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// TestRelayPrefixChecks: the replay's property checks accept what the
// proxy may do and reject what it must not.
func TestRelayPrefixChecks(t *testing.T) {
	startup := pgStartupBytes("u", "d")
	ssl := []byte{0, 0, 0, 8, 4, 210, 22, 47}
	query := []byte("Q\x00\x00\x00\x0dSELECT 1\x00")
	ready := []byte("Z\x00\x00\x00\x05I")
	own := []byte("E\x00\x00\x00\x00SFATAL\x00C08P01\x00Msluice: x\x00\x00")
	own[4] = byte(len(own) - 1)
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	pgCases := []struct {
		name                             string
		cliSent, cliGot, srvSent, srvGot []byte
		cut, ok                          bool
	}{
		{"all through", cat(startup, query), ready, ready, cat(startup, query), false, true},
		{"negotiated", cat(ssl, startup, query), cat([]byte("N"), ready), ready, cat(startup, query), false, true},
		{"prefix each way", cat(startup, query), ready[:3], ready, startup[:5], false, true},
		{"own error after the prefix", cat(startup, query), cat(ready[:2], own), ready, startup, false, true},
		{"own error cut short", cat(startup, query), cat(ready, own[:6]), ready, startup, true, true},
		{"never dialled, error", []byte{0, 0, 0, 2}, own, nil, nil, false, true},
		{"byte changed upstream", cat(startup, query), nil, nil, cat(startup, []byte("Q\x00\x00\x00\x0dSELECT 2")), false, false},
		{"byte changed downstream", startup, []byte("Z\x00\x00\x00\x05T"), ready, startup, false, false},
		{"negotiation forwarded", cat(ssl, startup), nil, ready, cat(ssl, startup), false, false},
		{"answer missing", cat(ssl, startup), ready, ready, startup, false, false},
		{"junk before any upstream", startup, []byte("junk"), nil, nil, false, false},
		{"the server's error passed off as sluice's", startup, []byte("E\x00\x00\x00\x0cSFATAL\x00\x00"), nil, nil, false, false},
		{"error cut short without a close", startup, cat(ready, own[:6]), ready, startup, false, false},
	}
	for _, tc := range pgCases {
		t.Run("pg/"+tc.name, func(t *testing.T) {
			if err := checkPGPrefix(tc.cliSent, tc.cliGot, tc.srvSent, tc.srvGot, tc.cut); (err == nil) != tc.ok {
				t.Fatalf("check = %v, want ok %v", err, tc.ok)
			}
		})
	}
	greeting := myPacket(0, []byte("\x0aversion\x00abcd"))
	patched := myPacket(0, []byte("\x0aversion\x00abce"))
	resp := myPacket(1, []byte("response"))
	cmd := myPacket(0, []byte("\x03SELECT 1"))
	ok := myPacket(1, []byte{0, 0, 0, 2, 0})
	myErr := myPacket(1, []byte("\xff\x28\x04#08S01sluice"))
	myCases := []struct {
		name                             string
		cliSent, cliGot, srvSent, srvGot []byte
		cut, ok                          bool
	}{
		{"all through", cat(resp, cmd), cat(patched, ok), cat(greeting, ok), cat(resp, cmd), false, true},
		{"own error", cat(resp, cmd), cat(patched, myErr), cat(greeting, ok), cat(resp, cmd), false, true},
		{"opening only", resp, []byte("x"), greeting, resp[:2], false, true},
		{"command changed", cat(resp, cmd), nil, greeting, cat(resp, myPacket(0, []byte("\x03SELECT 2"))), false, false},
		{"reply changed", cat(resp, cmd), cat(patched, myPacket(1, []byte{0, 0, 0, 3, 0})), cat(greeting, ok), cat(resp, cmd), false, false},
		{"greeting resized", cat(resp, cmd), cat(myPacket(0, []byte("short")), ok), cat(greeting, ok), cat(resp, cmd), false, false},
	}
	for _, tc := range myCases {
		t.Run("mysql/"+tc.name, func(t *testing.T) {
			if err := checkMySQLPrefix(tc.cliSent, tc.cliGot, tc.srvSent, tc.srvGot, tc.cut); (err == nil) != tc.ok {
				t.Fatalf("check = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

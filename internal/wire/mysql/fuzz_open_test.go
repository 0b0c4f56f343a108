package mysql

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
)

// scriptConn is a net.Conn that reads a fixed script, then io.EOF, and
// keeps what is written to it. Reads never block, so deadlines are
// ignored. It is for one goroutine.
type scriptConn struct {
	r   bytes.Reader
	out bytes.Buffer
}

func newScriptConn(script []byte) *scriptConn {
	c := &scriptConn{}
	c.r.Reset(script)
	return c
}

func (c *scriptConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *scriptConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// splitPackets cuts b into whole physical packets, headers included, and
// returns what is left over.
func splitPackets(b []byte) (pkts [][]byte, rest []byte) {
	for len(b) >= 4 {
		n := 4 + (int(b[0]) | int(b[1])<<8 | int(b[2])<<16)
		if len(b) < n {
			break
		}
		pkts, b = append(pkts, b[:n]), b[n:]
	}
	return pkts, b
}

// mariadbResponse is the handshake response of the mariadb
// command-line client 10.11 (libmariadb 3.3.20) to ownGreeting with the
// scramble "abcdefghijklmnopqrst", user, password and database sluice:
// 221 bytes with its connection attributes (go-sql-driver's, goDriverResp,
// is 183).
var mariadbResponse = []byte("\xd9\x00\x00\x01\x8d\xa2\xbf\x00\x00\x00\x10\x00!\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00sluice\x00\x14\xae{{\xb2\xcf\xd6\xe7\x83HT)v\x85\xdb\xb6\xa3\x9a\xff\x18\xd0sluice\x00mysql_native_password\x00\x7f\x03_os\x05Linux\f_client_name\nlibmariadb\x04_pid\x0511704\x0f_client_version\x063.3.20\t_platform\x06x86_64\fprogram_name\x05mysql\f_server_host\t127.0.0.1")

// FuzzOpen runs the opening exchange with a client that sends arbitrary
// bytes and then closes, against an upstream that greets (or, with down,
// cannot be reached). Open must never panic, and:
//   - the client gets whole packets, a greeting first;
//   - a first packet announced over maxLoginPacket gets ERR 1153 numbered
//     after it, and nothing reaches the upstream;
//   - with the upstream down, a readable response gets ERR 9001 numbered
//     after it, naming the reason;
//   - a successful exchange forwards exactly the response, numbered 1,
//     and registers its user; a failed one leaves no session open.
func FuzzOpen(f *testing.F) {
	ssl := make([]byte, responsePrefix)
	binary.LittleEndian.PutUint32(ssl, capProtocol41|capSecureConnection|capSSL)
	compress := bytes.Clone(goDriverResp)
	compress[4] |= capCompress
	for _, down := range []bool{false, true} {
		f.Add(goDriverResp, down)
		f.Add(mariadbResponse, down)
		f.Add(packet(1, ssl), down)
		f.Add(compress, down)
		f.Add([]byte{0x00, 0x40, 0x00, 1, 0x0d, 0xa2}, down)
		f.Add([]byte{0x00, 0x00, 0x10, 1}, down)
		f.Add([]byte{0x40}, down)
	}
	greeting := ownGreeting([20]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't'}, false)
	fe := New(Options{Upstream: "db:3306", Clock: clock.NewFake(t0), Logger: slog.New(slog.DiscardHandler)})
	f.Fuzz(func(t *testing.T, script []byte, down bool) {
		reg := session.NewRegistry(session.Options{})
		register := func() *session.Session { return reg.Open(session.Info{Route: "fuzz", Protocol: "mysql"}, t0) }
		cl, up := newScriptConn(script), newScriptConn(greeting)
		dial := func(context.Context) (net.Conn, error) {
			if down {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
			}
			return up, nil
		}
		wc, err := fe.Open(context.Background(), cl, register, dial)

		out, rest := splitPackets(cl.out.Bytes())
		if len(rest) != 0 || len(out) == 0 {
			t.Fatalf("client got %q", cl.out.Bytes())
		}
		if _, gerr := parseGreeting(out[0][4:]); gerr != nil {
			t.Fatalf("first packet %q is no greeting: %v", out[0], gerr)
		}
		first, _ := splitPackets(script)
		announced := -1
		if len(script) >= 4 {
			announced = int(script[0]) | int(script[1])<<8 | int(script[2])<<16
		}
		reply := func(code uint16, seq uint8, msg string) {
			t.Helper()
			if len(out) != 2 {
				t.Fatalf("client got %d packets, want a greeting and ERR %d", len(out), code)
			}
			r := out[1]
			if len(r) < 13 || r[3] != seq || r[4] != 0xff || binary.LittleEndian.Uint16(r[5:]) != code || !bytes.Contains(r, []byte(msg)) {
				t.Fatalf("reply %q, want ERR %d seq %d with %q", r, code, seq, msg)
			}
		}
		switch {
		case announced > maxLoginPacket:
			reply(erNetPacketTooBig, script[3]+1, "before authentication")
			if up.out.Len() != 0 || err == nil {
				t.Fatalf("oversized response: upstream got %q, err %v", up.out.Bytes(), err)
			}
		case down && len(first) > 0: // an SSLRequest too: the route has no TLS
			reply(erUpstream, first[0][3]+1, "connection refused")
		}
		if err != nil {
			if n := len(reg.Sessions()); n != 0 {
				t.Fatalf("Open failed (%v) with %d sessions open", err, n)
			}
			return
		}
		if down {
			t.Fatal("Open succeeded with the upstream down")
		}
		fwd, rest := splitPackets(up.out.Bytes())
		if len(fwd) != 1 || len(rest) != 0 || fwd[0][3] != 1 || len(first) == 0 || len(fwd[0]) != len(first[0]) {
			t.Fatalf("upstream got %q for %q", up.out.Bytes(), script)
		}
		r, perr := parseResponse(fwd[0][4:])
		if perr != nil || r.user != wc.Session.User() {
			t.Fatalf("forwarded response %+v, %v; session user %q", r, perr, wc.Session.User())
		}
		wc.Session.Close(t0)
	})
}

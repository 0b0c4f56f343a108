package mysql

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// openFDs counts the descriptors of this process.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// heapBytes is the size of the live heap after a collection.
func heapBytes() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// stall is what a stalled client sends before it goes quiet.
type stall struct {
	name string
	send []byte
}

// stalls are the ways a client can stall in the opening exchange: before
// any byte, in the middle of a packet header, after announcing a packet
// far over the limit, and in the body of a packet the limit allows.
var stalls = []stall{
	{"silent", nil},
	{"mid-header", []byte{0x40, 0x00}},
	{"announces 1 MiB", []byte{0x00, 0x00, 0x10, 1}},
	{"partial body", append([]byte{0x00, 0x40, 0x00, 1}, make([]byte, 1024)...)},
}

// TestStalledOpeningExchange: clients that stall in the opening exchange
// are closed at the startup timeout (2 s, 1 s with -short), with their
// upstream connections, and cost little memory meanwhile: a packet's
// buffer grows with what arrives, and a packet announced over the limit
// is refused at once with ER_NET_PACKET_TOO_LARGE.
func TestStalledOpeningExchange(t *testing.T) {
	const clients = 150
	timeout := 2 * time.Second
	if testing.Short() {
		timeout = time.Second
	}
	r := startRelay(t, Options{StartupTimeout: timeout}, session.Options{})
	fds0, heap0 := openFDs(t), heapBytes()

	var want int64 // bytes the clients send
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", r.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		if s := stalls[i%len(stalls)].send; s != nil {
			if _, err := c.Write(s); err != nil {
				t.Fatal(err)
			}
			want += int64(len(s))
		}
	}
	start := clock.Real{}.Now()
	waitFor(t, "the front end to read what the clients sent", func() bool { return r.openRead.Load() == want })
	if grew := heapBytes() - heap0; grew > 10<<20 {
		t.Errorf("%d stalled clients grew the heap by %.1f MiB", clients, float64(grew)/(1<<20))
	} else {
		t.Logf("%d stalled clients grew the heap by %.2f MiB", clients, float64(grew)/(1<<20))
	}

	// Every client sees its connection end within the timeout and a margin.
	var wg sync.WaitGroup
	got := make([][]byte, clients)
	errs := make([]error, clients)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(start.Add(timeout + 5*time.Second))
			got[i], errs[i] = io.ReadAll(c)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		s := stalls[i%len(stalls)]
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("client %d (%s) still open %v after the startup timeout", i, s.name, 5*time.Second)
		}
		if _, err := parseGreeting(got[i][4:]); err != nil {
			t.Fatalf("client %d (%s) got no greeting: %q", i, s.name, got[i])
		}
		rest := got[i][4+int(binary.LittleEndian.Uint32(got[i])&0xffffff):]
		if s.name == "announces 1 MiB" {
			if len(rest) < 13 || rest[3] != 2 || rest[4] != 0xff || binary.LittleEndian.Uint16(rest[5:]) != erNetPacketTooBig {
				t.Fatalf("client %d (%s): after the greeting %q, want ERR %d", i, s.name, rest, erNetPacketTooBig)
			}
		} else if len(rest) != 0 {
			t.Fatalf("client %d (%s): after the greeting %q", i, s.name, rest)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	// The front end's client and upstream sockets are closed too.
	waitFor(t, "descriptors to be released", func() bool { return openFDs(t) <= fds0 })
	waitFor(t, "every opening exchange to fail", func() bool { return len(r.Errors()) >= clients })
	if n := len(r.Errors()); n != clients {
		t.Fatalf("%d opening exchanges failed, want %d", n, clients)
	}
	for _, err := range r.Errors() {
		if !errors.Is(err, errStartupTimeout) && !errors.Is(err, errPacketTooLarge) {
			t.Fatalf("opening exchange ended by %v", err)
		}
	}
}

// TestOversizedHandshakeResponse: a handshake response over the limit is
// refused with ER_NET_PACKET_TOO_LARGE numbered after it, before its body
// is read.
func TestOversizedHandshakeResponse(t *testing.T) {
	r := startRelay(t, Options{}, session.Options{})
	nc, _ := dialGreeted(t, r.Addr)
	n := maxLoginPacket + 1
	reply := exchange(t, nc, []byte{byte(n), byte(n >> 8), byte(n >> 16), 1})
	if reply[3] != 2 || reply[4] != 0xff || binary.LittleEndian.Uint16(reply[5:]) != erNetPacketTooBig || string(reply[7:13]) != "#08S01" {
		t.Fatalf("reply %q", reply)
	}
	t.Logf("client got: %s", reply[13:])
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open")
	}
}

// silentUpstream accepts connections and never writes. Its channel
// receives how each accepted connection ended (io.EOF when the peer
// closed it).
func silentUpstream(t *testing.T) (string, <-chan error) {
	t.Helper()
	ended := make(chan error, 16)
	addr := testenv.Serve(t, func(c net.Conn) {
		c.SetReadDeadline(clock.SocketDeadline(30 * time.Second))
		_, err := c.Read(make([]byte, 1))
		if err == nil {
			err = errors.New("the front end wrote to the upstream")
		}
		ended <- err
	})
	return addr, ended
}

// TestUpstreamGreetingTimeout: an upstream that accepts but never sends
// its greeting makes the client fail at the connect timeout, with an ERR
// naming the upstream, and the upstream connection is closed.
func TestUpstreamGreetingTimeout(t *testing.T) {
	addr, ended := silentUpstream(t)
	r := startRelay(t, Options{Upstream: addr, ConnectTimeout: 500 * time.Millisecond}, session.Options{})
	c := r.openClient(t, func(cfg *gomysql.Config) { cfg.Timeout, cfg.ReadTimeout = 10*time.Second, 10*time.Second })
	err := c.db.Ping()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != erUpstream || !strings.Contains(me.Message, addr) || !strings.Contains(me.Message, "connect_timeout") {
		t.Fatalf("ping: %v, want error %d naming %s and connect_timeout", err, erUpstream, addr)
	}
	t.Logf("client saw: %v", me)
	if err := <-ended; !errors.Is(err, io.EOF) {
		t.Fatalf("upstream connection: %v, want closed by the front end", err)
	}
	// The client reads the ERR before Open returns and the relay records
	// its error.
	waitFor(t, "Open's error", func() bool { return len(r.Errors()) > 0 })
	if errs := r.Errors(); !errors.Is(errs[0], errConnectTimeout) {
		t.Fatalf("Open errors %v", errs)
	}
}

// TestMariaDBCLIConnectErrors: the stock mariadb client prints sluice's
// message, not "Received malformed packet", for each way the upstream
// can fail.
func TestMariaDBCLIConnectErrors(t *testing.T) {
	bin := testenv.Program(t, "mariadb")
	cfg := testenv.MySQLConfig(t)
	dead := testenv.DeadAddr(t)
	silent, _ := silentUpstream(t)
	tlsServer := startFakeServer(t, selfSigned(t)) // its certificate is trusted by nobody
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"refused", Options{Upstream: dead},
			"ERROR 9001 (HY000): sluice: could not connect to upstream " + dead + ": connection refused"},
		{"greeting timeout", Options{Upstream: silent, ConnectTimeout: 500 * time.Millisecond},
			"ERROR 9001 (HY000): sluice: could not connect to upstream " + silent + ": upstream did not answer in time (connect_timeout)"},
		{"upstream without TLS", Options{Upstream: cfg.Addr, UpstreamTLS: &tls.Config{ServerName: "127.0.0.1"}},
			"ERROR 9001 (HY000): sluice: upstream " + cfg.Addr + " does not offer TLS"},
		{"upstream TLS fails", Options{Upstream: tlsServer.ln.Addr().String(), UpstreamTLS: &tls.Config{ServerName: "127.0.0.1"}},
			"ERROR 9001 (HY000): sluice: TLS with upstream " + tlsServer.ln.Addr().String() + " failed: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startRelay(t, tt.o, session.Options{})
			host, port, _ := net.SplitHostPort(r.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--no-defaults", "--protocol=TCP", "-h", host, "-P", port,
				"-u", cfg.User, "-p"+cfg.Passwd, "--connect-timeout=20", "-e", "SELECT 1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("mariadb: %v, %v\n%s", err, ctx.Err(), stderr.Bytes())
			}
			msg := stderr.String()
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "malformed") {
				t.Fatalf("mariadb printed %q, want %q", msg, tt.want)
			}
			t.Logf("mariadb printed: %s", strings.TrimSpace(msg))
		})
	}
}

// fakeServer is a minimal MySQL server that offers TLS, asks every
// client to switch authentication plugins (so the exchange has several
// packets each way), checks the client's sequence ids strictly, and
// answers commands with OK. It records whether each connection used TLS.
type fakeServer struct {
	ln    net.Listener
	cfg   *tls.Config
	usedT chan bool
}

func startFakeServer(t *testing.T, cert tls.Certificate) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln, cfg: &tls.Config{Certificates: []tls.Certificate{cert}}, usedT: make(chan bool, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *fakeServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(clock.SocketDeadline(20 * time.Second))
	g := ownGreeting([20]byte{'a', 'b', 'c'}, true)
	c.Write(g)
	rp, err := readPacket(c, maxHandshake)
	if err != nil {
		return
	}
	r, err := parseResponse(rp[4:])
	if err != nil {
		return
	}
	var conn net.Conn = c
	usedTLS := r.sslOnly
	if r.sslOnly {
		tc := tls.Server(c, s.cfg)
		if tc.HandshakeContext(context.Background()) != nil {
			return
		}
		conn = tc
		if rp, err = readPacket(conn, maxHandshake); err != nil {
			return
		}
		r, _ = parseResponse(rp[4:])
	}
	s.usedT <- usedTLS
	seq := rp[3]
	if want := uint8(1); usedTLS {
		want = 2
		if seq != want || r.caps&capSSL == 0 {
			conn.Write(errPacket(seq+1, 1043, "08S01", "bad response"))
			return
		}
	} else if seq != want || r.caps&capSSL != 0 {
		conn.Write(errPacket(seq+1, 1043, "08S01", "bad response"))
		return
	}
	sw := append([]byte{0xfe}, "mysql_native_password\x0001234567890123456789\x00"...)
	conn.Write(packet(seq+1, sw))
	ad, err := readPacket(conn, maxHandshake)
	if err != nil {
		return
	}
	if ad[3] != seq+2 {
		conn.Write(errPacket(ad[3]+1, 1043, "08S01", fmt.Sprintf("auth data with sequence id %d", ad[3])))
		return
	}
	conn.Write(packet(seq+3, okPayload(0, statusAutocommit)))
	for {
		p, err := readPacket(conn, 1<<20)
		if err != nil || len(p) < 5 || p[4] == comQuit {
			return
		}
		conn.Write(packet(p[3]+1, okPayload(1, statusAutocommit)))
	}
}

// TestTLSLegs runs every combination of TLS on the client leg and the
// upstream leg through a server that checks sequence ids strictly.
func TestTLSLegs(t *testing.T) {
	cert := selfSigned(t)
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	srv := startFakeServer(t, cert)
	for _, clientTLS := range []bool{false, true} {
		for _, upstreamTLS := range []bool{false, true} {
			t.Run(fmt.Sprintf("client=%v,upstream=%v", clientTLS, upstreamTLS), func(t *testing.T) {
				o := Options{Upstream: srv.ln.Addr().String(), TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}
				if upstreamTLS {
					o.UpstreamTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
				}
				r := startRelay(t, o, session.Options{})
				c := r.openClient(t, func(cfg *gomysql.Config) {
					cfg.User, cfg.Passwd, cfg.DBName = "tester", "secret", "shop"
					if clientTLS {
						cfg.TLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
					}
				})
				conn, sess, up0, down0 := startSession(t, r, c)
				if got := <-srv.usedT; got != upstreamTLS {
					t.Fatalf("upstream leg TLS = %v", got)
				}
				for range 3 {
					if _, err := conn.ExecContext(context.Background(), "DO 1"); err != nil {
						t.Fatal(err)
					}
				}
				checkRecords(t, r.Reg, sess.ID, []expect{
					{"COM_PING", session.OK, 1, ""},
					{"DO 1", session.OK, 1, ""},
					{"DO 1", session.OK, 1, ""},
					{"DO 1", session.OK, 1, ""},
				})
				if !clientTLS {
					checkBytes(t, r, c, sess, up0, down0)
				}
				if sess.User() != "tester" || sess.Database() != "shop" {
					t.Errorf("identity %q/%q", sess.User(), sess.Database())
				}
				if errs := r.Errors(); len(errs) != 0 {
					t.Fatal(errs)
				}
			})
		}
	}
}

func TestOpenTimeout(t *testing.T) {
	srv := startFakeServer(t, selfSigned(t))
	fe := New(Options{Upstream: srv.ln.Addr().String()})
	cl, sv := net.Pipe()
	defer cl.Close()
	go func() { readPacket(cl, maxHandshake) }() // read the greeting, then say nothing
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	reg := session.NewRegistry(session.Options{})
	register := func() *session.Session { return reg.Open(session.Info{}, t0) }
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.ln.Addr().String())
	}
	if _, err := fe.Open(ctx, sv, register, dial); err == nil {
		t.Fatal("Open succeeded without a handshake response")
	}
	if len(reg.Sessions()) != 0 {
		t.Fatal("session registered")
	}
}

func TestUpstreamRefuses(t *testing.T) {
	up := testenv.Serve(t, func(c net.Conn) { c.Write(errPacket(0, 1040, "08004", "Too many connections")) })
	r := startRelay(t, Options{Upstream: up}, session.Options{})
	c := r.openClient(t, nil)
	err := c.db.Ping()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1040 {
		t.Fatalf("ping: %v", err)
	}
}

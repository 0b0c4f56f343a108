package mysql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

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
				checkRecords(t, sessionRecords(r.reg, sess.ID), []expect{
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
				if errs := r.errors(); len(errs) != 0 {
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

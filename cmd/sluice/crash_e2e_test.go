package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
	"github.com/sluicelab/sluice/internal/testenv"
)

// reset closes c with an RST (SO_LINGER 0) instead of a FIN.
func reset(t *testing.T, c net.Conn) {
	t.Helper()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
}

// TestPipelinedThenClosedKeepsProcess runs the client behaviours that used
// to crash the whole process (a session closed with several statements
// in flight) against the real servers through one in-process `sluice
// serve`, and checks after each that a session opened before and a new
// one still work.
func TestPipelinedThenClosedKeepsProcess(t *testing.T) {
	mcfg := testenv.MySQLConfig(t)
	myAddr := freeAddr(t)
	ta := startApp(t, config.Route{Name: "my", Listen: myAddr, Upstream: mcfg.Addr, Protocol: "mysql"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pgURL := ta.userURL("sluice", "sluice")

	keep, err := pgconn.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close(ctx)
	alive := func(what string) {
		t.Helper()
		res := keep.ExecParams(ctx, "SELECT 7", nil, nil, nil, nil).Read()
		if res.Err != nil || string(res.Rows[0][0]) != "7" {
			t.Fatalf("after %s: the open session: %v", what, res.Err)
		}
		fresh, err := pgconn.Connect(ctx, pgURL)
		if err != nil {
			t.Fatalf("after %s: new session: %v", what, err)
		}
		fresh.Close(ctx)
	}

	for _, tc := range []struct {
		name  string
		msgs  []pgproto3.FrontendMessage
		close func(*testing.T, net.Conn)
	}{
		{"three Query then RST", []pgproto3.FrontendMessage{
			&pgproto3.Query{String: "SELECT pg_sleep(0.2)"},
			&pgproto3.Query{String: "SELECT 2"},
			&pgproto3.Query{String: "SELECT 3"},
		}, reset},
		{"two Parse/Bind/Execute without Sync then close", []pgproto3.FrontendMessage{
			&pgproto3.Parse{Query: "SELECT pg_sleep(0.2)"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Parse{Query: "SELECT 2"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		}, func(_ *testing.T, c net.Conn) { c.Close() }},
	} {
		c := pgtest.Hijack(t, pgURL, time.Minute) // a logged-in session's socket
		if _, err := c.Write(pgtest.Encode(tc.msgs...)); err != nil {
			t.Fatal(err)
		}
		waitStatements(t, ta, 2)
		tc.close(t, c)
		alive(tc.name)
	}

	// MySQL: pipelined COM_QUERYs on a logged-in session, then RST.
	var mu sync.Mutex
	var raw net.Conn
	mysql.RegisterDialContext("crash-e2e", func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		mu.Lock()
		raw = c
		mu.Unlock()
		return c, err
	})
	my := mcfg.Clone()
	my.Net, my.Addr = "crash-e2e", myAddr
	db := testenv.OpenMySQL(t, my)
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	var pipeline []byte
	for _, q := range []string{"SELECT SLEEP(0.2)", "SELECT 2", "SELECT 3"} {
		pkt := make([]byte, 4, 5+len(q))
		binary.LittleEndian.PutUint32(pkt, uint32(1+len(q)))
		pkt[3] = 0
		pipeline = append(append(append(pipeline, pkt...), 0x03), q...)
	}
	mu.Lock()
	c := raw
	mu.Unlock()
	if _, err := c.Write(pipeline); err != nil {
		t.Fatal(err)
	}
	waitStatements(t, ta, 2)
	reset(t, c)
	alive("pipelined COM_QUERY then RST")
	direct := mcfg.Clone()
	direct.Addr = myAddr
	other := testenv.OpenMySQL(t, direct)
	var v int
	if err := other.QueryRowContext(ctx, "SELECT 5").Scan(&v); err != nil || v != 5 {
		t.Fatalf("mysql route after the reset: %d, %v", v, err)
	}
	// Panic isolation would have kept the process alive; the sessions must
	// not have panicked at all. Their statements end when they close.
	testenv.Eventually(t, 10*time.Second, "no statement active", func() bool {
		return len(ta.Proxy().Registry().Active()) == 0
	})
	if p := ta.Proxy().SessionPanics(); len(p) != 0 {
		t.Fatalf("sessions panicked: %v", p)
	}
}

// waitStatements waits until some session runs at least n statements at
// once, so the close comes while they are in flight (with two or more,
// Close used to range over a slice that ending each one shifted).
func waitStatements(t *testing.T, ta *testApp, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("a session running %d statements at once", n), func() bool {
		for _, s := range ta.Proxy().Registry().Sessions() {
			if len(s.Active()) >= n {
				return true
			}
		}
		return false
	})
}

// Package pgtest helps the tests of PostgreSQL protocol servers: a raw
// frontend that sends exact messages, the socket of a real session taken
// over for raw bytes, the wire bytes of messages, and the check of the
// FATAL error a server sends before it hangs up.
package pgtest

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Client is a raw protocol client on one connection. It is not safe for
// concurrent use.
type Client struct {
	T    testing.TB
	Conn net.Conn
	FE   *pgproto3.Frontend
}

// Dial connects to the TCP address addr. The connection's deadline is
// timeout from now, and it closes when the test ends.
func Dial(t testing.TB, addr string, timeout time.Duration) *Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(timeout))
	return &Client{T: t, Conn: conn, FE: pgproto3.NewFrontend(conn, conn)}
}

// Hijack connects to the server at url with pgconn, through a real
// startup, and takes over the socket, for a test to send raw bytes in an
// established session. The socket's deadline is timeout from now, and it
// closes when the test ends.
func Hijack(t testing.TB, url string, timeout time.Duration) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pc, err := pgconn.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hj.Conn.Close() })
	hj.Conn.SetDeadline(time.Now().Add(timeout))
	return hj.Conn
}

// Send sends msgs and flushes them; a failure fails the test.
func (c *Client) Send(msgs ...pgproto3.FrontendMessage) {
	c.T.Helper()
	for _, m := range msgs {
		c.FE.Send(m)
	}
	if err := c.FE.Flush(); err != nil {
		c.T.Fatal(err)
	}
}

// Encode renders msgs back to back as wire bytes. It panics on a message
// that does not encode, a mistake of the test.
func Encode(msgs ...pgproto3.FrontendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			panic(err)
		}
	}
	return b
}

// ExpectFatal reads r to its end and fails the test unless what it read
// starts with an ErrorResponse of severity FATAL, SQLSTATE code and a
// message containing text.
func ExpectFatal(t testing.TB, r io.Reader, code, text string) {
	t.Helper()
	reply, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, reply)
	}
	if len(reply) < 5 || reply[0] != 'E' {
		t.Fatalf("reply %q is not an ErrorResponse", reply)
	}
	var e pgproto3.ErrorResponse
	if err := e.Decode(reply[5:]); err != nil {
		t.Fatal(err)
	}
	if e.Severity != "FATAL" || e.Code != code || !strings.Contains(e.Message, text) {
		t.Errorf("got %s %s %q, want FATAL %s containing %q", e.Severity, e.Code, e.Message, code, text)
	}
}

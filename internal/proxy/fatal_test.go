package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
)

// TestMalformedMessageEndsOnlyThatSession sends a message with an
// impossible length after a real startup: that client gets FATAL 08P01
// and is disconnected, while another session on the route goes on.
func TestMalformedMessageEndsOnlyThatSession(t *testing.T) {
	url, _, addr := pgRoute(t)
	ctx := context.Background()
	good := connect(t, viaProxy(t, url, addr))

	bad := pgtest.Hijack(t, viaProxy(t, url, addr), 10*time.Second)
	msg := []byte{'Q', 0, 0, 0, 2} // length 2 < 4: malformed
	if _, err := bad.Write(msg); err != nil {
		t.Fatal(err)
	}
	pgtest.ExpectFatal(t, bad, "08P01", "")
	res := good.ExecParams(ctx, "SELECT 7", nil, nil, nil, nil).Read()
	if res.Err != nil || string(res.Rows[0][0]) != "7" {
		t.Fatalf("other session: %v", res.Err)
	}
}

// TestBadStartupGetsError sends an unsupported protocol version.
func TestBadStartupGetsError(t *testing.T) {
	_, _, addr := pgRoute(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, 8)
	binary.BigEndian.PutUint32(b[4:], 9<<16) // protocol 9.0
	c.Write(b)
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	reply, _ := io.ReadAll(c)
	if len(reply) == 0 || reply[0] != 'E' || !bytes.Contains(reply, []byte("08P01")) && !bytes.Contains(reply, []byte("0A000")) {
		t.Fatalf("reply %q", reply)
	}
}

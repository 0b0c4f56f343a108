package wiretest

// This file holds the pieces of the test relays that stand in for the
// proxy in the protocol packages' tests: a loopback server and a
// connection that counts its bytes.

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Serve listens on a loopback port and runs serve, on a goroutine of its
// own, for every connection it accepts. When the test ends it closes the
// listener and waits for every serve to return; serve owns its
// connection and must return once the connection is closed. Serve
// returns the listener's address.
func Serve(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// CountingConn adds the bytes each Read returns to BytesRead and those
// each Write writes to BytesWritten. The counters may be shared and read
// concurrently; both must be set.
type CountingConn struct {
	net.Conn
	BytesRead, BytesWritten *atomic.Int64
}

// Read implements net.Conn.
func (c CountingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.BytesRead.Add(int64(n))
	return n, err
}

// Write implements net.Conn.
func (c CountingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.BytesWritten.Add(int64(n))
	return n, err
}

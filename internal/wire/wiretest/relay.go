package wiretest

// This file holds a piece of the test relays that stand in for the
// proxy in the protocol packages' tests: a connection that counts its
// bytes.

import (
	"net"
	"sync/atomic"
)

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

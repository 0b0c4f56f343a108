package testenv

import (
	"net"
	"testing"
)

// ServeOnce listens on a loopback port, hands the first connection it
// accepts to serve on a goroutine of its own (closing the connection when
// serve returns), and returns the address. The listener closes when the
// test ends; a test that never connects leaves serve uncalled.
func ServeOnce(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return ln.Addr().String()
}

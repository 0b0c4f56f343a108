package proxy

import (
	"crypto/md5"
	"net"
	"testing"
)

func md5sum(b []byte) [16]byte { return md5.Sum(b) }

// serveOnce listens on a loopback port, serves the first connection with
// serve (closing it after), and returns the address.
func serveOnce(t testing.TB, serve func(c net.Conn)) string {
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

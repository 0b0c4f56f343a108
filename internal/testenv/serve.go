package testenv

// This file holds the loopback servers that tests stand up in place of an
// upstream or a peer: one connection, every connection, an echo server,
// and an address nothing listens on.

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/sluicelab/sluice/internal/loopport"
)

// listen listens on a free loopback port; a failure fails t.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// ServeOnce listens on a loopback port, hands the first connection it
// accepts to serve on a goroutine of its own (closing the connection when
// serve returns), and returns the address. The listener closes when the
// test ends; a test that never connects leaves serve uncalled.
func ServeOnce(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln := listen(t)
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

// Serve listens on a loopback port and hands every connection it accepts
// to serve, each on a goroutine of its own, closing the connection when
// serve returns; it returns the address. When the test ends it closes the
// listener and the connections still open, and waits for every serve to
// return: serve must return once its connection is closed.
func Serve(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln := listen(t)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{} // open connections, guarded by mu
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// Echo runs Serve with a server that writes back what it reads until the
// peer closes, and returns its address.
func Echo(t testing.TB) string {
	t.Helper()
	return Serve(t, func(c net.Conn) { io.Copy(c, c) })
}

// DeadAddr returns a loopback address that nothing listens on, so a dial
// is refused, reserved (package loopport) until the test ends: no other
// pick hands it out meanwhile, and a server can still listen on it.
func DeadAddr(t testing.TB) string {
	t.Helper()
	r, err := loopport.Reserve()
	if err != nil {
		t.Fatalf("dead address: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r.Addr()
}

// EchoMessages is a serve function for Serve: it reads messages of size
// bytes and writes each back, allocating nothing per message, until the
// connection ends.
func EchoMessages(size int) func(c net.Conn) {
	return func(c net.Conn) {
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
}

package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestSplice relays a greeting-first echo server: the greeting may reach
// user space (it can arrive before registration), the rest (8 MiB each way,
// written while the echo comes back, so both directions back up) must go
// through the kernel, byte-identical. Then end of stream is carried both
// ways. The client half-closes only once the echo is complete, as a
// database client closes only with nothing in flight (see doc.go).
func TestSplice(t *testing.T) {
	r, err := newRelay()
	if err != nil {
		testenv.Missing(t, "BPF sockmap: %v", err)
		return
	}
	defer r.Close()

	up := listen(t)
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("hello"))
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	}()
	front := listen(t)
	spliced := make(chan error, 1)
	go func() {
		c, err := front.Accept()
		if err != nil {
			spliced <- err
			return
		}
		u, err := net.Dial("tcp", up.Addr().String())
		if err != nil {
			c.Close()
			spliced <- err
			return
		}
		spliced <- r.splice(c.(*net.TCPConn), u.(*net.TCPConn))
	}()

	c, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	greeting := make([]byte, 5)
	if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != "hello" {
		t.Fatalf("greeting %q, %v", greeting, err)
	}
	sent := make([]byte, 8<<20)
	rand.Read(sent)
	go func() {
		for b := sent; len(b) > 0; {
			n := min(len(b), 1+len(b)%70000)
			if _, err := c.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
	}()
	got := make([]byte, len(sent))
	_, err = io.ReadFull(c, got)
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	rest, err := io.ReadAll(c)
	if len(rest) > 0 {
		t.Fatalf("%d bytes after the echo", len(rest))
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		prefix := 0
		for prefix < len(got) && got[prefix] == sent[prefix] {
			prefix++
		}
		t.Fatalf("echo differs: %d bytes back of %d, first %d equal, user space copied %d", len(got), len(sent), prefix, r.copied.Load())
	}
	if err := <-spliced; err != nil {
		t.Fatal(err)
	}
	if n := r.copied.Load(); n > 1<<20 {
		t.Errorf("%d of %d bytes went through user space", n, 2*len(sent))
	}
}

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

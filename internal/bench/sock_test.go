package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// rawPair returns a rawIOConn dialled to a loopback listener and the
// accepted end.
func rawPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := dialRaw(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*rawIOConn); !ok {
		t.Fatalf("dialRaw returned %T", c)
	}
	s := <-accepted
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func TestRawIOConnRoundTrip(t *testing.T) {
	c, s := rawPair(t)
	// 8 MB exceeds the socket buffers, so Write waits for room.
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<19)
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		done <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("data differs")
	}
	if _, err := s.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := io.ReadAtLeast(c, buf, 4)
	if err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	s.Close()
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("read after peer close: %v, want EOF", err)
	}
}

func TestRawIOConnDeadlineAndClose(t *testing.T) {
	c, _ := rawPair(t)
	c.SetReadDeadline(time.Unix(1, 0))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read interrupted by Close: %v", err)
	}
}

func BenchmarkRawIOConnPingPong(b *testing.B) {
	c, s := rawPair(b)
	go io.Copy(s, s)
	buf := make([]byte, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}

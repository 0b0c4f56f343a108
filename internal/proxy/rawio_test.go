package proxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func TestRawIONotForWrappedConns(t *testing.T) {
	a, _ := tcpPair(t)
	if newRawIO(a) == nil {
		t.Fatal("plain TCP socket got no rawIO")
	}
	type wrapped struct{ net.Conn }
	if newRawIO(wrapped{a}) != nil {
		t.Fatal("wrapped connection got a rawIO")
	}
}

// TestRawIOStream writes more than the socket buffers hold, so writes
// stop on EAGAIN and resume, while the other end reads in small pieces;
// every byte arrives in order, and the end of the stream reads as io.EOF.
func TestRawIOStream(t *testing.T) {
	a, b := tcpPair(t)
	w, r := newRawIO(a), newRawIO(b)
	data := make([]byte, 32<<20)
	rand.Read(data)
	werr := make(chan error, 1)
	go func() {
		for off := 0; off < len(data); off += 1 << 20 {
			n, err := w.Write(data[off : off+1<<20])
			if err != nil || n != 1<<20 {
				werr <- errors.Join(err, io.ErrShortWrite)
				return
			}
		}
		werr <- a.CloseWrite()
	}()
	var got bytes.Buffer
	buf := make([]byte, 3000)
	for {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after %d bytes: %v", got.Len(), err)
		}
		if n == 0 {
			t.Fatal("Read returned 0 bytes and no error")
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("received %d bytes, not the %d sent", got.Len(), len(data))
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
}

func TestRawIODeadlineAndClose(t *testing.T) {
	a, b := tcpPair(t)
	r := newRawIO(b)
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v, want a deadline error", err)
	}
	b.SetReadDeadline(time.Time{})

	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on closed socket: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close did not end a parked read")
	}
	if _, err := newRawIO(a).Write([]byte("x")); err != nil {
		// The peer closed; the first write may still succeed, a later
		// one fails with a reset. Either is fine; what matters is no hang.
		t.Logf("write to closed peer: %v", err)
	}
}

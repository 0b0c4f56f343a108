package rawconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// dialPair listens on network and address, connects to the listener
// with dial and returns the dialled end and the accepted one; both close
// when the test ends.
func dialPair(t testing.TB, network, address string, dial func(ctx context.Context, network, address string) (net.Conn, error)) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := dial(context.Background(), network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// rawPair returns a Conn dialled to a loopback listener and the
// accepted end.
func rawPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	c, s := dialPair(t, "tcp", "127.0.0.1:0", Dial)
	if _, ok := c.(*Conn); !ok {
		t.Fatalf("Dial returned %T", c)
	}
	return c, s
}

func TestConnRoundTrip(t *testing.T) {
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

func TestConnDeadlineAndClose(t *testing.T) {
	c, _ := rawPair(t)
	c.SetReadDeadline(clock.LongAgo)
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	// A Close that came before the read blocked would pass without
	// exercising the wake-up.
	testenv.WaitBlocked(t, "rawconn.(*Conn).Read", 1)
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read interrupted by Close: %v", err)
	}
}

func BenchmarkConnPingPong(b *testing.B) {
	c, s := rawPair(b)
	go io.Copy(s, s)
	pingPong(b, c)
}

// pingPong runs b.N exchanges of 64 bytes on c, whose peer echoes.
func pingPong(b *testing.B, c net.Conn) {
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

func TestWrapLeavesOtherConnsAlone(t *testing.T) {
	_, s := rawPair(t)
	type wrapped struct{ net.Conn }
	w := wrapped{s}
	if got := Wrap(w); got != net.Conn(w) {
		t.Fatalf("Wrap of a wrapped connection returned %T", got)
	}
	if _, ok := Wrap(s).(*Conn); !ok {
		t.Fatal("Wrap of a *net.TCPConn did not return a *Conn")
	}
}

// TestConnStream writes more than the socket buffers hold (32 MiB, 8 MiB
// with -short) while the other end reads in small pieces through a Conn:
// writes stop on EAGAIN and resume, and every byte arrives once, in
// order, then io.EOF.
func TestConnStream(t *testing.T) {
	c, s := rawPair(t)
	r := Wrap(s)
	size := 32 << 20
	if testing.Short() {
		size = 8 << 20
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	werr := make(chan error, 1)
	go func() {
		for off := 0; off < len(data); off += 1 << 20 {
			if n, err := c.Write(data[off : off+1<<20]); err != nil || n != 1<<20 {
				werr <- fmt.Errorf("write at %d: %d bytes, %v", off, n, err)
				return
			}
		}
		werr <- c.(*Conn).Conn.(*net.TCPConn).CloseWrite()
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
			t.Fatal("Read returned no bytes and no error")
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("received %d bytes that differ from the %d sent", got.Len(), len(data))
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
}

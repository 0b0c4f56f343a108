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
)

// rawPair returns a Conn dialled to a loopback listener and the
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
	c, err := Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*Conn); !ok {
		t.Fatalf("Dial returned %T", c)
	}
	s := <-accepted
	t.Cleanup(func() { c.Close(); s.Close() })
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

func BenchmarkConnPingPong(b *testing.B) {
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

// TestConnStream writes more than the socket buffers hold while the other
// end reads in small pieces through a Conn: writes stop on EAGAIN and
// resume, and every byte arrives once, in order, then io.EOF.
func TestConnStream(t *testing.T) {
	c, s := rawPair(t)
	r := Wrap(s)
	data := make([]byte, 32<<20)
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

// TestReadEachStream sends 32 MiB in writes of varying size, with pauses
// that leave the reader waiting after short reads, and checks that
// ReadEach delivers every byte in order while f swaps buffers.
func TestReadEachStream(t *testing.T) {
	c, s := rawPair(t)
	r := Wrap(s).(*Conn)
	data := make([]byte, 32<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	werr := make(chan error, 1)
	go func() {
		for off, i := 0, 0; off < len(data); i++ {
			n := min(1+(i*7919)%(300<<10), len(data)-off)
			if _, err := c.Write(data[off : off+n]); err != nil {
				werr <- err
				return
			}
			off += n
			if i%64 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		werr <- c.(*Conn).Conn.(*net.TCPConn).CloseWrite()
	}()
	var got bytes.Buffer
	bufs := [][]byte{make([]byte, 4<<10), make([]byte, 32<<10)}
	calls := 0
	err := r.ReadEach(bufs[0], func(b []byte) ([]byte, error) {
		if len(b) == 0 {
			t.Fatal("f called with no bytes")
		}
		got.Write(b)
		calls++
		return bufs[calls%2], nil
	})
	if err != nil {
		t.Fatalf("ReadEach after %d bytes: %v", got.Len(), err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("received %d bytes that differ from the %d sent", got.Len(), len(data))
	}
}

// TestReadEachPingPong answers each request from inside f: every read is
// short, so every next request must be seen through the poller alone.
func TestReadEachPingPong(t *testing.T) {
	c, s := rawPair(t)
	r := Wrap(s).(*Conn)
	done := make(chan error, 1)
	go func() {
		done <- r.ReadEach(make([]byte, 4096), func(b []byte) ([]byte, error) {
			_, err := r.Write(b)
			return b[:cap(b)], err
		})
	}()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64)
	for i := range 2000 {
		msg := fmt.Appendf(nil, "request %d", i)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil || !bytes.Equal(buf[:len(msg)], msg) {
			t.Fatalf("exchange %d: %q, %v", i, buf[:len(msg)], err)
		}
	}
	c.(*Conn).Conn.(*net.TCPConn).CloseWrite()
	if err := <-done; err != nil {
		t.Fatalf("ReadEach at the end of the stream: %v", err)
	}
}

// TestReadEachEnds checks the other ways out: f's error as is, a
// deadline, and a Close from another goroutine.
func TestReadEachEnds(t *testing.T) {
	stop := errors.New("stop")
	tests := []struct {
		name string
		act  func(c, r net.Conn)
		f    func(b []byte) ([]byte, error)
		want error
	}{
		{"f fails", func(c, r net.Conn) { c.Write([]byte("x")) },
			func(b []byte) ([]byte, error) { return nil, stop }, stop},
		{"deadline", func(c, r net.Conn) { r.SetReadDeadline(time.Now().Add(50 * time.Millisecond)) },
			func(b []byte) ([]byte, error) { return b, nil }, os.ErrDeadlineExceeded},
		{"deadline after a short read", func(c, r net.Conn) {
			c.Write([]byte("x"))
			r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		}, func(b []byte) ([]byte, error) { return b[:cap(b)], nil }, os.ErrDeadlineExceeded},
		{"close", func(c, r net.Conn) {
			time.AfterFunc(50*time.Millisecond, func() { r.Close() })
		}, func(b []byte) ([]byte, error) { return b, nil }, net.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := rawPair(t)
			r := Wrap(s).(*Conn)
			tt.act(c, r)
			err := r.ReadEach(make([]byte, 16), tt.f)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ReadEach: %v, want %v", err, tt.want)
			}
		})
	}
}

func BenchmarkReadEachPingPong(b *testing.B) {
	c, s := rawPair(b)
	r := Wrap(s).(*Conn)
	go r.ReadEach(make([]byte, 4096), func(p []byte) ([]byte, error) {
		_, err := r.Write(p)
		return p[:cap(p)], err
	})
	b.ReportAllocs()
	msg, buf := []byte("ping"), make([]byte, 4)
	for b.Loop() {
		c.Write(msg)
		io.ReadFull(c, buf)
	}
}

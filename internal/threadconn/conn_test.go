package threadconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

func dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), clock.Real{}, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEchoBothWays writes 4 MiB while reading the echo concurrently, so
// both directions back up, and checks every byte comes back in order.
func TestEchoBothWays(t *testing.T) {
	addr := testenv.ServeOnce(t, func(c net.Conn) { io.Copy(c, c) })
	c := dial(t, addr)
	want := make([]byte, 4<<20)
	for i := range want {
		want[i] = byte(rand.Uint32())
	}
	errc := make(chan error, 1)
	go func() {
		for off := 0; off < len(want); {
			n := min(len(want)-off, 1+rand.IntN(64<<10))
			w, err := c.Write(want[off : off+n])
			if err != nil || w != n {
				errc <- errors.Join(err, errors.New("short write"))
				return
			}
			off += n
		}
		errc <- nil
	}()
	got := make([]byte, 0, len(want))
	buf := make([]byte, 37<<10)
	for len(got) < len(want) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("echo differs from what was sent")
	}
}

func TestEOFAfterData(t *testing.T) {
	addr := testenv.ServeOnce(t, func(c net.Conn) { c.Write([]byte("last words")) })
	c := dial(t, addr)
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "last words" {
		t.Fatalf("read %q", got)
	}
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("read after end: %d, %v; want 0, EOF", n, err)
	}
}

// blockedRead starts a Read on a Conn whose peer never writes, and waits
// for it to block; the read's error comes on the channel.
func blockedRead(t *testing.T) (*Conn, <-chan error) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	c := dial(t, testenv.ServeOnce(t, func(net.Conn) { <-hold }))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		errc <- err
	}()
	// A test that closed before the read blocked would pass without
	// exercising the wake-up.
	testenv.WaitBlocked(t, "threadconn.(*Conn).Read", 1)
	return c, errc
}

// TestCloseWakesRead closes the Conn while a Read is blocked on a peer
// that never writes.
func TestCloseWakesRead(t *testing.T) {
	c, errc := blockedRead(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("blocked read returned %v; want net.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v; want net.ErrClosed", err)
	}
}

// TestPastDeadlineInterruptsRead is how pgconn cancels a query: a
// deadline of now, set while the read is blocked.
func TestPastDeadlineInterruptsRead(t *testing.T) {
	c, errc := blockedRead(t)
	if err := c.SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("interrupted read returned %v; want a timeout", err)
	}
	c.SetDeadline(time.Time{})
	if _, err := c.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the interruption: %v; want os.ErrDeadlineExceeded", err)
	}
}

func TestFutureDeadline(t *testing.T) {
	hold := make(chan struct{})
	addr := testenv.ServeOnce(t, func(c net.Conn) {
		<-hold
		c.Write([]byte("late"))
		<-hold
	})
	c := dial(t, addr)
	dl := time.Now().Add(30 * time.Millisecond)
	c.SetReadDeadline(dl)
	_, err := c.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v; want os.ErrDeadlineExceeded", err)
	}
	if now := time.Now(); now.Before(dl) {
		t.Fatalf("timed out %v before the deadline", dl.Sub(now))
	}
	// Cleared, the next read waits for the data however long it takes.
	c.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(50 * time.Millisecond) // the delay under test: late data, no deadline
		hold <- struct{}{}
	}()
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "late" {
		t.Fatalf("read %q, %v; want \"late\"", buf[:n], err)
	}
	close(hold)
}

func TestNewRefusesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	if _, err := New(a, clock.Real{}); err == nil {
		t.Fatal("New took a net.Pipe")
	}
}

// BenchmarkPingPong is one 64-byte request and answer per op over
// loopback: this package beside net.Conn.
func BenchmarkPingPong(b *testing.B) {
	echo := testenv.EchoMessages(64)
	run := func(b *testing.B, c net.Conn) {
		b.ReportAllocs()
		buf := make([]byte, 64)
		for b.Loop() {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("threadconn", func(b *testing.B) {
		run(b, dial(b, testenv.ServeOnce(b, echo)))
	})
	b.Run("net", func(b *testing.B) {
		c, err := net.Dial("tcp", testenv.ServeOnce(b, echo))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, c)
	})
}

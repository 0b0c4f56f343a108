package rawconn

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

func TestReadPooled(t *testing.T) {
	c, s := rawPair(t)
	rc := c.(*Conn)
	pool := NewPool(8)
	msg := []byte("0123456789abcdefghij")
	go func() {
		s.Write(msg)
		s.Close()
	}()
	var got []byte
	for {
		b, n, err := rc.ReadPooled(pool)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if b != nil {
				t.Fatal("ReadPooled kept a buffer at the end of the stream")
			}
			break
		}
		if n == 0 || n > pool.Size() || len(*b) != pool.Size() {
			t.Fatalf("read %d bytes into a buffer of %d (pool size %d)", n, len(*b), pool.Size())
		}
		got = append(got, (*b)[:n]...)
		pool.Put(b)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("read %q, want %q", got, msg)
	}
}

func TestReadPooledDeadline(t *testing.T) {
	c, _ := rawPair(t)
	rc := c.(*Conn)
	rc.SetReadDeadline(clock.LongAgo)
	b, _, err := rc.ReadPooled(NewPool(16))
	if !errors.Is(err, os.ErrDeadlineExceeded) || b != nil {
		t.Fatalf("ReadPooled past its deadline: buffer %v, %v", b != nil, err)
	}
}

func TestReadPooledStamps(t *testing.T) {
	c, s := rawPair(t)
	rc := c.(*Conn)
	if err := rc.StampReads(); err != nil {
		t.Fatal(err)
	}
	pool := NewPool(64)
	// The host's first request for stamps takes effect from a kernel work
	// queue: the first segments may come without one, for as long as a
	// loaded host takes to run the queue (the 5 s is a guard, not a
	// measurement).
	testenv.Eventually(t, 5*time.Second, "a receive time on a TCP socket with StampReads", func() bool {
		if _, err := s.Write([]byte("stamped")); err != nil {
			t.Fatal(err)
		}
		b, n, err := rc.ReadPooled(pool)
		if err != nil {
			t.Fatal(err)
		}
		if string((*b)[:n]) != "stamped" {
			t.Fatalf("read %q", (*b)[:n])
		}
		pool.Put(b)
		return !rc.ReadStamp().IsZero()
	})
}

func BenchmarkReadPooled(b *testing.B) {
	c, s := rawPair(b)
	rc := c.(*Conn)
	pool := NewPool(512)
	msg := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Write(msg); err != nil {
			b.Fatal(err)
		}
		buf, _, err := rc.ReadPooled(pool)
		if err != nil {
			b.Fatal(err)
		}
		pool.Put(buf)
	}
}

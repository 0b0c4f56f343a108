package proxy

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/testenv"
)

func TestWholeClass(t *testing.T) {
	for _, c := range []struct {
		queued int
		want   int // index in wholeClasses; -1: readPool
	}{
		{0, -1},
		{1, -1},
		{readBuf / 2, -1},
		{readBuf/2 + 1, 0},
		{64 << 10, 0},
		{64<<10 + 1, 1},
		{1 << 20, 2},
		{4 << 20, 3},
		{6 << 20, 4},
		{16 << 20, 4},
		{100 << 20, 4},
	} {
		got := wholeClass(c.queued)
		if got != c.want {
			t.Errorf("wholeClass(%d) = %d, want %d", c.queued, got, c.want)
		}
		if got >= 0 && c.queued <= 16<<20 && wholeClasses[got] < 2*c.queued {
			t.Errorf("wholeClass(%d): a buffer of %d bytes cannot take twice what is queued", c.queued, wholeClasses[got])
		}
	}
}

func TestWholeReadsPut(t *testing.T) {
	for _, size := range []int{readBuf, readBuf + 100, 128 << 10, 3 << 20, 32 << 20} {
		b := make([]byte, size)
		wholeReads.Put(&b) // must not panic, whatever the size
		if len(b) > size {
			t.Fatalf("Put of a %d-byte buffer grew it to %d", size, len(b))
		}
	}
	small := make([]byte, 10)
	wholeReads.Put(&small)
}

// TestWholeReadsTake reads SIOCINQ on a real socket: with 100 KiB queued
// the buffer takes twice that, and Fit keeps a buffer only while it is
// the size Take would pick.
func TestWholeReadsTake(t *testing.T) {
	c, s := testenv.TCPPair(t)
	rc, err := s.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	take := func() (b *[]byte, queued int) {
		rc.Control(func(fd uintptr) {
			queued, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
			b = wholeReads.Take(fd)
		})
		return b, queued
	}
	fit := func(b *[]byte) (got *[]byte) {
		rc.Control(func(fd uintptr) { got = wholeReads.Fit(fd, b) })
		return got
	}
	small, _ := take()
	if len(*small) != readBuf {
		t.Fatalf("an empty socket's buffer is %d bytes, want readPool's %d", len(*small), readBuf)
	}
	if fit(small) != small {
		t.Fatal("Fit traded a buffer of the right size")
	}
	const sent = 100 << 10
	if _, err := c.Write(make([]byte, sent)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the bytes to be queued", func() bool {
		_, q := take()
		return q == sent
	})
	b, q := take()
	if len(*b) < 2*q {
		t.Fatalf("with %d bytes queued the buffer is %d bytes", q, len(*b))
	}
	if got := fit(small); got == small || len(*got) != len(*b) {
		t.Fatalf("Fit of readPool's buffer with %d bytes queued gave %d bytes, want %d", q, len(*got), len(*b))
	} else {
		wholeReads.Put(got)
	}
	wholeReads.Put(b)
}

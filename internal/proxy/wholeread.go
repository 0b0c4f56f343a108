package proxy

import (
	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/rawconn"
)

// wholeReads sizes the reads of a socket in the kernel's sockhash so
// that each takes every byte queued on it. Under a long bulk stream
// through a paired socket, Linux 6.18 was seen to hand user space bytes
// out of order when reads of 32 KiB or 1 MiB left bytes the program had
// passed queued on the socket; reading all of them at once, it was not
// (doc/fast-path.md). Take sizes the buffer at twice what the socket
// holds when the read starts (SIOCINQ, which for a socket in the sockhash
// counts the bytes passed to user space), so bytes arriving during the
// read fit too: readPool's buffer while that is at most readBuf, else one
// of wholeClasses. Safe for concurrent use.
var wholeReads = newWholePools()

// wholeClasses are the sizes of wholeReads' larger buffers, in bytes:
// 128 KiB to 32 MiB, four times apart. A socket holding more than half the
// largest is read 32 MiB at a time, which is more than the kernel lets a
// socket queue with its default limits (net.ipv4.tcp_rmem, 6 MiB).
var wholeClasses = [...]int{128 << 10, 512 << 10, 2 << 20, 8 << 20, 32 << 20}

type wholePools struct {
	pools [len(wholeClasses)]*rawconn.Pool
}

func newWholePools() *wholePools {
	w := &wholePools{}
	for i, size := range wholeClasses {
		w.pools[i] = rawconn.NewPool(size)
	}
	return w
}

// wholeClass returns the index in wholeClasses of the buffer for a read
// of a socket holding queued bytes, or -1 for readPool's.
func wholeClass(queued int) int {
	want := 2 * queued
	if want <= readBuf {
		return -1
	}
	for i, size := range wholeClasses {
		if want <= size {
			return i
		}
	}
	return len(wholeClasses) - 1
}

// Take returns a buffer for reading every byte socket fd holds. When
// SIOCINQ fails it returns readPool's, as for any socket.
func (w *wholePools) Take(fd uintptr) *[]byte { return w.get(queuedClass(fd)) }

// Fit is Take for a reader that holds b already: it returns b when b is
// of the size Take would pick, and otherwise gives b back and returns
// one that is, so a reader of many small chunks trades no buffer.
func (w *wholePools) Fit(fd uintptr, b *[]byte) *[]byte {
	i := queuedClass(fd)
	if sizeOf(i) == len(*b) {
		return b
	}
	w.Put(b)
	return w.get(i)
}

// queuedClass is wholeClass of what socket fd holds; -1 when SIOCINQ
// fails.
func queuedClass(fd uintptr) int {
	q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil {
		return -1
	}
	return wholeClass(q)
}

// sizeOf is the length of the buffers of class i (-1: readPool's).
func sizeOf(i int) int {
	if i < 0 {
		return readBuf
	}
	return wholeClasses[i]
}

func (w *wholePools) get(i int) *[]byte {
	if i < 0 {
		return readPool.Get()
	}
	return w.pools[i].Get()
}

// Put gives back b, a buffer from Take or from readPool, to the pool of
// the largest size it holds; one smaller than readPool's is left to the
// collector.
func (w *wholePools) Put(b *[]byte) {
	c := cap(*b)
	if c < wholeClasses[0] {
		// readPool's size, the one nearly every chunk's buffer has
		if c >= readBuf {
			readPool.Put(b)
		}
		return
	}
	for i := len(wholeClasses) - 1; i >= 0; i-- {
		if c >= wholeClasses[i] {
			w.pools[i].Put(b)
			return
		}
	}
}

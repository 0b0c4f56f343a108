package netem

import (
	"math/bits"
	"sync"
	"time"
)

// Buffer size classes: powers of two from 512 B to 4 MiB.
const (
	minClassShift = 9
	numClasses    = 14
)

// BufferPool recycles the copies a Line keeps of the chunks it holds, so a
// Line in steady state does not allocate per chunk. Buffers come in
// power-of-two classes from 512 B to 4 MiB; a larger chunk gets a buffer of
// its own that is not recycled. Idle buffers are released to the garbage
// collector like any sync.Pool's.
//
// Share one BufferPool among the Lines of a process to bound the memory of
// idle flows. The zero value is ready to use; a BufferPool is safe for
// concurrent use and must not be copied after first use.
type BufferPool struct {
	classes [numClasses]sync.Pool // of *chunk, by size class
}

// chunk is one Write's bytes held by a Line until their release time.
type chunk struct {
	buf     []byte    // len(buf) is the class size, or n when unpooled
	n       int       // bytes used
	release time.Time // when the writer goroutine passes them on
	class   int8      // index into BufferPool.classes; -1 when unpooled
}

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

func (bp *BufferPool) get(n int) *chunk {
	c := classOf(n)
	if c >= numClasses {
		return &chunk{buf: make([]byte, n), n: n, class: -1}
	}
	if v, ok := bp.classes[c].Get().(*chunk); ok {
		v.n = n
		return v
	}
	return &chunk{buf: make([]byte, 1<<(c+minClassShift)), n: n, class: int8(c)}
}

func (bp *BufferPool) put(c *chunk) {
	if c.class < 0 {
		return
	}
	c.release = time.Time{}
	bp.classes[c.class].Put(c)
}

// ring is a FIFO on a growable circular slice; it allocates only to grow.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)%len(r.buf)] }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		nb := make([]T, max(2*len(r.buf), 16))
		for i := 0; i < r.n; i++ {
			nb[i] = *r.at(i)
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

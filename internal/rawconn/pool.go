package rawconn

import "sync"

// Buffers gives ReadPooled its buffers. Take is called on the reading
// goroutine once the socket, fd, has bytes to read (so a buffer may be
// sized to them), and returns a buffer of at least one byte; Put takes
// back a buffer Take returned. Both must be safe for concurrent use.
type Buffers interface {
	Take(fd uintptr) *[]byte
	Put(b *[]byte)
}

// Pool is a pool of read buffers of one size, for ReadPooled. It is safe
// for concurrent use; its zero value is not usable (see NewPool).
type Pool struct {
	size int
	p    sync.Pool
}

// NewPool returns a pool of buffers of size bytes (at least 1).
func NewPool(size int) *Pool {
	size = max(size, 1)
	pl := &Pool{size: size}
	pl.p.New = func() any { b := make([]byte, size); return &b }
	return pl
}

// Size returns the length of the pool's buffers, in bytes.
func (p *Pool) Size() int { return p.size }

// Get returns a buffer of Size bytes, whose contents are undefined.
func (p *Pool) Get() *[]byte { return p.p.Get().(*[]byte) }

// Take is Get, for Buffers: the buffer's size does not depend on fd.
func (p *Pool) Take(uintptr) *[]byte { return p.Get() }

// Put gives b, which Get returned, back to the pool. The caller must not
// use it afterwards.
func (p *Pool) Put(b *[]byte) {
	*b = (*b)[:p.size]
	p.p.Put(b)
}

package rawconn

import "sync"

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

// Put gives b, which Get returned, back to the pool. The caller must not
// use it afterwards.
func (p *Pool) Put(b *[]byte) {
	*b = (*b)[:p.size]
	p.p.Put(b)
}

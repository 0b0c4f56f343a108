package ring

// Ring keeps the last Size values added: its buffer grows to Size, then
// each Add overwrites the oldest value. Size must be above 0 before the
// first Add. A Ring is not safe for concurrent use: its owner locks.
type Ring[T any] struct {
	Size int

	buf  []T // len grows to Size, then values are overwritten
	next int // index of the oldest value once buf is full
}

// Add appends v, dropping the oldest value once the ring holds Size.
func (r *Ring[T]) Add(v T) {
	if len(r.buf) < r.Size {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % r.Size
}

// Len returns how many values the ring holds, at most Size.
func (r *Ring[T]) Len() int { return len(r.buf) }

// All returns a copy of the kept values, oldest first.
func (r *Ring[T]) All() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

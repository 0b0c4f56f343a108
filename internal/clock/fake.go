package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Fake is a virtual clock for tests. Create it with NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time       // guarded by mu
	timers  fakeHeap        // guarded by mu; armed timers by deadline
	seq     uint64          // guarded by mu; arming order, breaks ties
	waiters []chan struct{} // guarded by mu; woken on every arm
}

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the virtual time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer arms a virtual timer. d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), idx: -1}
	f.mu.Lock()
	f.armLocked(t, d)
	f.mu.Unlock()
	return t
}

// Advance moves the clock forward by d, firing due timers in order.
// Timers armed by code woken during the call fire too if they fall due
// within the same advance.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.Set(target)
}

// Set moves the clock to t (never backwards), firing due timers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) > 0 && !f.timers[0].when.After(t) {
		ft := heap.Pop(&f.timers).(*fakeTimer)
		if ft.when.After(f.now) {
			f.now = ft.when
		}
		select {
		case ft.c <- f.now:
		default:
		}
	}
	if t.After(f.now) {
		f.now = t
	}
}

// Pending returns the number of armed timers.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Next returns the earliest armed deadline and true, or false if no timer
// is armed.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.timers[0].when, true
}

// BlockUntil waits (in real time) until at least n timers are armed. Tests
// use it to know that the code under test has gone to sleep.
func (f *Fake) BlockUntil(n int) {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return
		}
		ch := make(chan struct{})
		f.waiters = append(f.waiters, ch)
		f.mu.Unlock()
		<-ch
	}
}

func (f *Fake) armLocked(t *fakeTimer, d time.Duration) {
	if d <= 0 {
		select {
		case t.c <- f.now:
		default:
		}
		return
	}
	t.when = f.now.Add(d)
	f.seq++
	t.seq = f.seq
	heap.Push(&f.timers, t)
	for _, w := range f.waiters {
		close(w)
	}
	f.waiters = nil
}

type fakeTimer struct {
	f    *Fake
	c    chan time.Time
	when time.Time // guarded by f.mu
	seq  uint64    // guarded by f.mu
	idx  int       // guarded by f.mu; -1 when not armed
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.idx < 0 {
		return false
	}
	heap.Remove(&t.f.timers, t.idx)
	return true
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.idx >= 0
	if was {
		heap.Remove(&t.f.timers, t.idx)
	}
	t.f.armLocked(t, d)
	return was
}

type fakeHeap []*fakeTimer

func (h fakeHeap) Len() int { return len(h) }
func (h fakeHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h fakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *fakeHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *fakeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.idx = -1
	*h = old[:len(old)-1]
	return t
}

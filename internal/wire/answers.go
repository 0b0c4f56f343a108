package wire

import (
	"sync"
	"sync/atomic"

	"github.com/sluicelab/sluice/internal/session"
)

// Answers is the queue a front end's Injector keeps: the answers it
// gives the client in the server's place (a statement refused before it
// reached the server), in order, each to go once the server stream is
// between messages and has answered every request before the refused
// one. What "between messages" and "answered" mean is the protocol's:
// the front end passes that test (ready) to Check and Next.
//
// The zero value is an empty queue. Add is called by the client pump,
// Check and Next by the server pump; all are safe for concurrent use.
// ready is called with the queue's lock held (a leaf: ready may read
// the protocol's own state but must not call back into the queue).
type Answers struct {
	wake func() // set once by SetWake before the pumps start

	has   atomic.Bool // items is not empty
	mu    sync.Mutex
	items []answer // guarded by mu; in order
	out   []byte   // the server pump's: what Next returned last
}

// answer is one queued answer: b goes once after is the oldest request
// in flight (nil: at once, after the answers before it).
type answer struct {
	b     []byte
	after *session.Statement
}

// SetWake records wake, the proxy's call that makes the server pump ask
// for pending answers (Injector.SetWake).
func (a *Answers) SetWake(wake func()) { a.wake = wake }

// Add queues b, to go after the request of after (nil: at once), and
// wakes the server pump.
func (a *Answers) Add(b []byte, after *session.Statement) {
	a.mu.Lock()
	a.items = append(a.items, answer{b: b, after: after})
	a.has.Store(true)
	a.mu.Unlock()
	if a.wake != nil {
		a.wake()
	}
}

// Queued reports whether an answer waits; one atomic load, for the
// server observer's fast path.
func (a *Answers) Queued() bool { return a.has.Load() }

// Check wakes the server pump when the first answer may go now; the
// server observer calls it after each chunk.
func (a *Answers) Check(ready func(after *session.Statement) bool) {
	a.mu.Lock()
	ok := len(a.items) > 0 && ready(a.items[0].after)
	a.mu.Unlock()
	if ok && a.wake != nil {
		a.wake()
	}
}

// Next returns the answers that may go now, nil when none may: with all,
// every answer whose turn has come, in order; without, the first only,
// so that the next one waits until the server observer has seen this
// one. The bytes are valid until the next call.
func (a *Answers) Next(ready func(after *session.Statement) bool, all bool) []byte {
	if !a.has.Load() {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out = a.out[:0]
	for len(a.items) > 0 && ready(a.items[0].after) {
		a.out = append(a.out, a.items[0].b...)
		a.items[0] = answer{}
		a.items = a.items[1:]
		if !all {
			break
		}
	}
	a.has.Store(len(a.items) > 0)
	if len(a.out) == 0 {
		return nil
	}
	return a.out
}

package pg

import (
	"sync"
	"sync/atomic"

	"github.com/sluicelab/sluice/internal/session"
)

// entryKind says what the server owes for one queued client request.
type entryKind uint8

const (
	// kindSimple is a Query message: its statement ends at ReadyForQuery.
	kindSimple entryKind = iota + 1
	// kindExtended is an Execute: its statement ends at CommandComplete,
	// EmptyQueryResponse, PortalSuspended or ErrorResponse, or is skipped
	// when an earlier error of its batch makes the server discard it.
	kindExtended
	// kindSync is a Sync or FunctionCall: no statement, answered by
	// ReadyForQuery.
	kindSync
)

// entry is one request in flight, in client order.
type entry struct {
	kind entryKind
	st   *session.Statement // nil for kindSync
}

// tracker is what the two observers of a session share: the FIFO of
// requests the server has yet to answer, and server bytes waiting for a
// statement to own them. The client observer appends, the server observer
// removes from the front; both are safe for concurrent use.
type tracker struct {
	mu          sync.Mutex
	q           []entry // guarded by mu; ring buffer, len is a power of two
	head        int     // guarded by mu; index of the oldest entry
	n           int     // guarded by mu; entries queued
	pendingDown int64   // guarded by mu; server bytes for the next statement

	// copyOwner is the statement the server last opened a copy-in or
	// copy-both for; the client observer reads it for CopyData.
	copyOwner atomic.Pointer[session.Statement]
}

// push queues e and hands over the server bytes that were waiting for a
// statement (zero for kindSync, which keeps them waiting).
func (t *tracker) push(e entry) (pendingDown int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == len(t.q) {
		t.growLocked()
	}
	t.q[(t.head+t.n)&(len(t.q)-1)] = e
	t.n++
	if e.st != nil {
		pendingDown, t.pendingDown = t.pendingDown, 0
	}
	return pendingDown
}

// growLocked doubles the ring.
func (t *tracker) growLocked() {
	size := max(8, 2*len(t.q))
	q := make([]entry, size)
	for i := range t.n {
		q[i] = t.q[(t.head+i)&(len(t.q)-1)]
	}
	t.q, t.head = q, 0
}

// front returns the oldest queued entry, or false when none is.
func (t *tracker) front() (entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return entry{}, false
	}
	return t.q[t.head], true
}

// maxLookahead bounds how far nextStatement searches the queue, so a
// client piling up Syncs cannot make each server message cost a scan of
// them all.
const maxLookahead = 64

// nextStatement returns the oldest queued statement among the first
// maxLookahead entries, or nil when there is none.
func (t *tracker) nextStatement() *session.Statement {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range min(t.n, maxLookahead) {
		if st := t.q[(t.head+i)&(len(t.q)-1)].st; st != nil {
			return st
		}
	}
	return nil
}

// pop removes and returns the oldest entry, or false when none is queued.
func (t *tracker) pop() (entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return entry{}, false
	}
	e := t.q[t.head]
	t.q[t.head] = entry{}
	t.head = (t.head + 1) & (len(t.q) - 1)
	t.n--
	return e, true
}

// addPending counts server bytes that no statement owns yet.
func (t *tracker) addPending(n int) {
	t.mu.Lock()
	t.pendingDown += int64(n)
	t.mu.Unlock()
}

// queued returns how many requests are in flight.
func (t *tracker) queued() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

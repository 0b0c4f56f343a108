package fastpath

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// testKernel is an opened Kernel with what user space observed of each
// paired socket's stream.
type testKernel struct {
	*Kernel
	log *seen
}

// seen is what user space observes of each paired socket's stream, as
// the proxy's loop would: the journal's copies of the redirected chunks
// and the chunks passed to it, the journal drained before each passed
// chunk is taken. A goroutine drains it as a loop polling its
// descriptor would.
type seen struct {
	mu        sync.Mutex
	j         *Journal          // guarded by mu
	by        map[uint64][]byte // guarded by mu; stream by socket cookie
	journaled map[uint64]uint64 // guarded by mu; of by, bytes from the journal
	err       error             // guarded by mu; the first Drain error
}

func newSeen(t *testing.T, k *Kernel) *seen {
	t.Helper()
	j, err := k.Journal()
	if err != nil {
		t.Fatal(err)
	}
	s := &seen{j: j, by: map[uint64][]byte{}, journaled: map[uint64]uint64{}}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		fds := []unix.PollFd{{Fd: int32(j.FD()), Events: unix.POLLIN}}
		for {
			select {
			case <-done:
				return
			default:
			}
			unix.Poll(fds, 5)
			s.mu.Lock()
			s.drainLocked()
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
		j.Close()
	})
	return s
}

func (s *seen) drainLocked() {
	err := s.j.Drain(func(r Record) {
		s.by[r.Cookie] = append(s.by[r.Cookie], r.Bytes...)
		s.journaled[r.Cookie] += uint64(len(r.Bytes))
	})
	if err != nil && s.err == nil {
		s.err = err
	}
}

// passed adds a chunk user space read from the socket named cookie.
func (s *seen) passed(cookie uint64, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	s.by[cookie] = append(s.by[cookie], b...)
}

// stream returns what was observed of the socket named cookie, and how
// many of its bytes came from the journal.
func (s *seen) stream(cookie uint64) ([]byte, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	return s.by[cookie], s.journaled[cookie], s.err
}

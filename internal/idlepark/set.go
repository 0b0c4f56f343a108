package idlepark

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Ticket names one parked socket of a Set.
type Ticket uint64

// waitMillis is how long the waiter sleeps in epoll_wait before checking
// whether anything is still parked, in milliseconds.
const waitMillis = 1000

// events is how many readiness events one epoll_wait returns at most.
const events = 128

// Set is a set of parked sockets. It is safe for concurrent use; the zero
// value is not (see New).
type Set struct {
	log *slog.Logger

	mu      sync.Mutex
	epfd    int               // guarded by mu; -1 while no waiter runs
	entries map[Ticket]*entry // guarded by mu; the parked sockets
	next    Ticket            // guarded by mu; the last ticket handed out
}

type entry struct {
	rc     syscall.RawConn
	resume func()
}

// New returns an empty Set; log (nil discards) receives epoll failures.
func New(log *slog.Logger) *Set {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Set{log: log, epfd: -1, entries: make(map[Ticket]*entry)}
}

// Parked returns how many sockets are parked.
func (s *Set) Parked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Park watches rc's descriptor until it has input, its peer's end of
// stream, a hang-up or an error, then removes the registration and calls
// resume on a new goroutine. If rc is readable already, that is at once.
// The caller must call Unpark before closing the socket. An error (the
// socket is closed, or epoll failed) leaves nothing registered.
func (s *Set) Park(rc syscall.RawConn, resume func()) (Ticket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epfd < 0 {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return 0, fmt.Errorf("idlepark: epoll_create1: %w", err)
		}
		s.epfd = fd
		go s.wait(fd)
	}
	s.next++
	t := s.next
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(uint32(t)), Pad: int32(uint32(t >> 32))}
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cerr = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	}); err != nil {
		return 0, fmt.Errorf("idlepark: park: %w", err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("idlepark: epoll_ctl add: %w", cerr)
	}
	s.entries[t] = &entry{rc: rc, resume: resume}
	return t, nil
}

// Unpark removes t's registration if its resume has not been started, and
// reports whether it did; resume then never runs. False means resume has
// run or will run.
func (s *Set) Unpark(t Ticket) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[t]
	if e == nil {
		return false
	}
	s.removeLocked(t, e)
	return true
}

// removeLocked drops t's entry and its registration.
func (s *Set) removeLocked(t Ticket, e *entry) {
	delete(s.entries, t)
	var cerr error
	err := e.rc.Control(func(fd uintptr) {
		cerr = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
	if err == nil && cerr != nil && !errors.Is(cerr, unix.ENOENT) {
		s.log.Error("idlepark: epoll_ctl del", "err", cerr)
	}
}

// wait is the waiter: it resumes the readers of ready sockets until
// nothing has been parked for a whole wait, then closes epfd.
func (s *Set) wait(epfd int) {
	evs := make([]unix.EpollEvent, events)
	ready := make([]func(), 0, events)
	for {
		n, err := unix.EpollWait(epfd, evs, waitMillis)
		if err != nil && !errors.Is(err, unix.EINTR) {
			s.log.Error("idlepark: epoll_wait", "err", err)
		}
		s.mu.Lock()
		for _, ev := range evs[:max(n, 0)] {
			t := Ticket(uint32(ev.Fd)) | Ticket(uint32(ev.Pad))<<32
			if e := s.entries[t]; e != nil {
				s.removeLocked(t, e)
				ready = append(ready, e.resume)
			}
		}
		done := n <= 0 && len(s.entries) == 0
		if done {
			unix.Close(epfd)
			s.epfd = -1
		}
		s.mu.Unlock()
		for i, f := range ready {
			go f()
			ready[i] = nil
		}
		ready = ready[:0]
		if done {
			return
		}
	}
}

package evloop

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Event bits a loop registers and reads back (level-triggered).
const (
	In    = unix.EPOLLIN
	Out   = unix.EPOLLOUT
	RDHup = unix.EPOLLRDHUP // the peer ended its write side
	Hup   = unix.EPOLLHUP
	Err   = unix.EPOLLERR
)

// Poller is an epoll set and an eventfd that wakes its waiter. The owner
// (one goroutine at a time) registers descriptors and waits; Wake is safe
// from any goroutine.
type Poller struct {
	epfd int
	efd  int
	file *os.File        // epfd in the runtime's poller, where Wait parks; closing it closes epfd
	rc   syscall.RawConn // file's
	// Owner only: the parked wait's callback, made once so that a Wait
	// allocates nothing, and the buffer and count it fills.
	poll   func(fd uintptr) bool
	events []unix.EpollEvent
	n      int
	drain  [8]byte // Drain's read buffer
	one    [8]byte // set once: the counter a Wake adds (in a field, so that Wake allocates nothing)
}

// WakeData is the data of the events that report a Wake.
const WakeData = ^uint64(0)

// NewPoller returns a Poller; Close releases it.
func NewPoller() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	// An epoll descriptor is readable while its set holds ready events,
	// so the runtime's poller can watch it: non-blocking, os.NewFile
	// registers it there.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, fmt.Errorf("epoll set non-blocking: %w", err)
	}
	p := &Poller{epfd: epfd, efd: efd, file: os.NewFile(uintptr(epfd), "epoll")}
	*(*uint64)(unsafe.Pointer(&p.one)) = 1
	rc, err := p.file.SyscallConn()
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("epoll raw conn: %w", err)
	}
	p.rc = rc
	p.poll = func(fd uintptr) bool {
		p.n = rawWait(int(fd), p.events)
		return p.n != 0
	}
	if err := p.ctl(unix.EPOLL_CTL_ADD, efd, In, WakeData); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// rawWait polls epfd without waiting, as a raw system call: the number
// of events written, 0 when none are ready (or on an error, which a
// valid set never returns).
func rawWait(epfd int, events []unix.EpollEvent) int {
	n, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), 0, 0, 0)
	if errno != 0 {
		return 0
	}
	return int(n)
}

// Data returns the 64 bits an event carries (what Add or Mod gave).
func Data(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

func (p *Poller) ctl(op, fd int, events uint32, data uint64) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(data)), Pad: int32(uint32(data >> 32))}
	if errno := rawCtl(p.epfd, op, fd, &ev); errno != 0 {
		return fmt.Errorf("epoll_ctl: %w", errno)
	}
	return nil
}

// rawCtl is epoll_ctl as a raw system call (it never waits); ev may be
// nil for EPOLL_CTL_DEL.
func rawCtl(epfd, op, fd int, ev *unix.EpollEvent) syscall.Errno {
	_, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	return errno
}

// Add registers fd for events, reported with data.
func (p *Poller) Add(fd int, events uint32, data uint64) error {
	return p.ctl(unix.EPOLL_CTL_ADD, fd, events, data)
}

// Mod changes fd's registration.
func (p *Poller) Mod(fd int, events uint32, data uint64) error {
	return p.ctl(unix.EPOLL_CTL_MOD, fd, events, data)
}

// Del removes fd's registration.
func (p *Poller) Del(fd int) error {
	if errno := rawCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); errno != 0 {
		return fmt.Errorf("epoll_ctl del: %w", errno)
	}
	return nil
}

// Wait returns the number of events written to events (not empty),
// blocking until some registered descriptor is ready or a Wake; 0 when
// the Poller was closed. It first polls without waiting, as a raw system
// call, which costs the scheduler nothing when events are ready; only
// when none are does it park the goroutine in the runtime's poller on the
// epoll descriptor itself, as a socket read would, so that a loop with
// nothing to do holds no processor and no thread of its own.
func (p *Poller) Wait(events []unix.EpollEvent) int {
	if n := rawWait(p.epfd, events); n > 0 {
		return n
	}
	p.events, p.n = events, 0
	err := p.rc.Read(p.poll)
	n := p.n
	p.events, p.n = nil, 0
	if err != nil {
		return 0
	}
	return n
}

// WaitReady is Wait for a loop that handles a Wake apart from its
// descriptors: it moves the events of descriptors to events[:n], in
// the order Wait gave them, leaving the WakeData event out, and reports
// whether there was one. n and woken are 0 and false when the Poller
// was closed.
func (p *Poller) WaitReady(events []unix.EpollEvent) (n int, woken bool) {
	for i := range p.Wait(events) {
		if Data(&events[i]) == WakeData {
			woken = true
			continue
		}
		events[n] = events[i]
		n++
	}
	return n, woken
}

// Wake makes the current or next Wait return with a WakeData event. Safe
// from any goroutine; wakes coalesce until Drain.
func (p *Poller) Wake() {
	syscall.RawSyscall(unix.SYS_WRITE, uintptr(p.efd), uintptr(unsafe.Pointer(&p.one[0])), uintptr(len(p.one)))
}

// Drain clears the wakes seen so far; the owner calls it on a WakeData
// event, before it looks at what the wakers left it.
func (p *Poller) Drain() {
	syscall.RawSyscall(unix.SYS_READ, uintptr(p.efd), uintptr(unsafe.Pointer(&p.drain[0])), uintptr(len(p.drain)))
}

// Close releases the epoll set and the eventfd. A Wait parked at the
// time returns 0.
func (p *Poller) Close() {
	p.file.Close()
	unix.Close(p.efd)
}

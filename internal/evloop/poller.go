package evloop

import (
	"fmt"
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
	p := &Poller{epfd: epfd, efd: efd}
	if err := p.ctl(unix.EPOLL_CTL_ADD, efd, In, WakeData); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Data returns the 64 bits an event carries (what Add or Mod gave).
func Data(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

func (p *Poller) ctl(op, fd int, events uint32, data uint64) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(data)), Pad: int32(uint32(data >> 32))}
	if err := unix.EpollCtl(p.epfd, op, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
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
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("epoll_ctl del: %w", err)
	}
	return nil
}

// Wait returns the number of events written to events (not empty),
// blocking until some registered descriptor is ready or a Wake; 0 when a
// signal interrupted the wait. It first polls without waiting, as a raw
// system call, which costs the scheduler nothing when events are ready;
// only when none are does it block, through the runtime's
// blocking-system-call path, so that a thread asleep in the kernel holds
// no processor.
func (p *Poller) Wait(events []unix.EpollEvent) int {
	n, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), 0, 0, 0)
	if errno == 0 && n > 0 {
		return int(n)
	}
	m, err := unix.EpollWait(p.epfd, events, -1)
	if err != nil {
		return 0
	}
	return m
}

// Wake makes the current or next Wait return with a WakeData event. Safe
// from any goroutine; wakes coalesce until Drain.
func (p *Poller) Wake() {
	one := uint64(1)
	unix.Write(p.efd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// Drain clears the wakes seen so far; the owner calls it on a WakeData
// event, before it looks at what the wakers left it.
func (p *Poller) Drain() {
	var b [8]byte
	unix.Read(p.efd, b[:])
}

// Close releases the epoll set and the eventfd.
func (p *Poller) Close() {
	unix.Close(p.epfd)
	unix.Close(p.efd)
}

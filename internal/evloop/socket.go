package evloop

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/rawconn"
)

// ErrClosed is Control's error once the socket is closed or attached.
var ErrClosed = errors.New("evloop: socket closed")

// Socket is a non-blocking socket descriptor that the Go runtime does not
// poll (see the package comment). The zero value is not usable; call
// Detach.
type Socket struct {
	fd int // the descriptor; read without mu by the owner, which alone closes it

	mu     sync.Mutex
	closed bool // guarded by mu
}

// Detach takes c's socket out of the runtime: it duplicates c's
// descriptor and closes c. c must be a *net.TCPConn, a *net.UnixConn
// or a *rawconn.TCPSocket that nothing else reads, writes or closes from now on (a later Close of
// c is harmless: it returns an error). The duplicate shares the socket's
// file status, so it is non-blocking like the runtime's. On an error c is
// left open.
func Detach(c net.Conn) (*Socket, error) {
	fd, err := rawconn.Dup(c)
	if err != nil {
		return nil, fmt.Errorf("evloop: %w", err)
	}
	c.Close()
	return &Socket{fd: fd}, nil
}

// FD returns the descriptor, for the owner's epoll registrations.
func (s *Socket) FD() int { return s.fd }

// Read reads into b, which is not empty: n > 0 bytes, or n == 0 with a
// nil error at the end of the stream, or unix.EAGAIN when nothing is
// there yet, or another errno.
func (s *Socket) Read(b []byte) (int, error) {
	for {
		n, _, errno := syscall.RawSyscall(unix.SYS_READ, uintptr(s.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, errno
	}
}

// Write writes as much of b as the socket's send buffer takes now and
// returns how many bytes that was; unix.EAGAIN when it took none, another
// errno (EPIPE, ECONNRESET) when the socket failed.
func (s *Socket) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, _, errno := syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&b[done])),
			uintptr(len(b)-done), unix.MSG_NOSIGNAL, 0, 0)
		switch errno {
		case 0:
			done += int(n)
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if done > 0 {
				return done, nil
			}
		}
		return done, errno
	}
	return done, nil
}

// Shutdown ends the socket's write side (the peer reads end of stream).
func (s *Socket) Shutdown() error {
	if _, _, errno := syscall.RawSyscall(unix.SYS_SHUTDOWN, uintptr(s.fd), unix.SHUT_WR, 0); errno != 0 {
		return fmt.Errorf("shutdown: %w", errno)
	}
	return nil
}

// Control runs f with the descriptor while it cannot be closed, as
// syscall.RawConn's Control does; it returns ErrClosed once the socket is
// closed or attached. Safe from any goroutine.
func (s *Socket) Control(f func(fd uintptr)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	f(uintptr(s.fd))
	return nil
}

// Close closes the descriptor. Safe to call more than once, and from any
// goroutine once the owner no longer uses the socket.
func (s *Socket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if _, _, errno := syscall.RawSyscall(unix.SYS_CLOSE, uintptr(s.fd), 0, 0); errno != 0 && errno != unix.EINTR {
		return fmt.Errorf("close: %w", errno)
	}
	return nil
}

// Attach gives the socket back to the runtime: it returns a net.Conn on
// the same socket (a *net.TCPConn or *net.UnixConn, registered in the
// runtime's poller) and closes the Socket's descriptor. The owner must
// have removed the descriptor from its own epoll set first.
func (s *Socket) Attach() (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	f := os.NewFile(uintptr(s.fd), "evloop")
	c, err := net.FileConn(f) // a duplicate of its own
	s.closed = true
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("evloop: attach: %w", err)
	}
	return c, nil
}

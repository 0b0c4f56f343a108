package rawconn

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Dup duplicates c's descriptor (close-on-exec) with a raw system call
// and returns the duplicate, which the caller then owns; c stays open.
// c must implement syscall.Conn, as *net.TCPConn, *net.UnixConn and
// *TCPSocket do. The duplicate shares the socket's open file
// description, and with it the O_NONBLOCK flag.
func Dup(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("%T has no descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(f uintptr) { fd, derr = rawDup(f) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup: %w", derr)
	}
	return fd, nil
}

// rawDup duplicates fd (close-on-exec) as a raw system call.
func rawDup(fd uintptr) (int, error) {
	n, _, errno := syscall.RawSyscall(unix.SYS_FCNTL, fd, unix.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(n), nil
}

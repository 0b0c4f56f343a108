package loopport

import (
	"fmt"
	"net"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Reservation is a loopback TCP port held bound until Close (see the
// package comment).
type Reservation struct {
	port int
	fd   int
	once sync.Once
}

// Reserve binds a free port on 127.0.0.1 and holds it.
func Reserve() (*Reservation, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reserve a loopback port: socket: %w", err)
	}
	fail := func(what string, err error) (*Reservation, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("reserve a loopback port: %s: %w", what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("SO_REUSEADDR", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail("bind", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	sa4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return fail("getsockname", fmt.Errorf("address %T, want IPv4", sa))
	}
	return &Reservation{port: sa4.Port, fd: fd}, nil
}

// Port is the reserved port number.
func (r *Reservation) Port() int { return r.port }

// Addr is the reserved address, "127.0.0.1:PORT".
func (r *Reservation) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Close releases the port. Safe to call more than once.
func (r *Reservation) Close() error {
	var err error
	r.once.Do(func() { err = unix.Close(r.fd) })
	return err
}

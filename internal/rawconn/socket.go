package rawconn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// keepAlive is the keep-alive the net package gives a TCP connection it
// accepts or dials by default: probes after 15 s idle, every 15 s, 9 of
// them.
const (
	keepAliveIdle     = 15 // seconds
	keepAliveInterval = 15 // seconds
	keepAliveCount    = 9
)

// aLongTimeAgo is a deadline in the past: it ends a wait at once.
var aLongTimeAgo = time.Unix(1, 0)

// TCPSocket is a TCP connection made by Listener.Accept or DialTCP, with no system
// call through the runtime's blocking path until it is closed: the
// descriptor is created, configured and connected with raw system calls
// and registered in the runtime's poller as an *os.File (which, for a
// non-blocking descriptor, costs no such call either). Through the net
// package an accepted connection costs six such calls (accept4, then
// TCP_NODELAY and four keep-alive options) and a dialed one more; for a
// process that is idle between connections, the first of them wakes the
// runtime's monitor thread, which then naps in 20 us steps until the
// process is idle again: about six context switches per connection.
//
// A TCPSocket is a net.Conn for code that blocks on it; Wrap gives its
// raw reads and writes. It also has what code reaching for a socket's
// options expects of a *net.TCPConn: SyscallConn, CloseWrite, SetLinger.
// Safe for concurrent use as a net.Conn is. Errors are *net.OpError, as
// net's; a method called after Close fails with net.ErrClosed.
type TCPSocket struct {
	f      *os.File
	rc     syscall.RawConn // f's, with closed's error
	laddr  *net.TCPAddr
	raddr  *net.TCPAddr
	closed atomic.Bool
}

// Listener is a TCP listener whose Accept makes TCPSockets with raw
// system calls. It listens on a duplicate of a *net.TCPListener's
// descriptor (a net listener cannot read through its syscall.RawConn),
// which it owns with the listener. Safe for concurrent use.
type Listener struct {
	ln     *net.TCPListener
	f      *os.File // the duplicate, in the runtime's poller
	rc     syscall.RawConn
	closed atomic.Bool
}

// Listen takes ln over: closing the Listener closes ln.
func Listen(ln *net.TCPListener) (*Listener, error) {
	f, err := ln.File()
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Listener{ln: ln, f: f, rc: rc}, nil
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening; a waiting Accept returns an error wrapping
// net.ErrClosed. Safe to call more than once.
func (l *Listener) Close() error {
	if l.closed.Swap(true) {
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.ln.Addr(), Err: net.ErrClosed}
	}
	l.f.Close()
	return l.ln.Close()
}

// SetDeadline sets the time after which Accept fails with an error whose
// Timeout is true; zero means none.
func (l *Listener) SetDeadline(t time.Time) error { return l.f.SetReadDeadline(t) }

// Accept waits for and returns the next connection as a *Conn on a
// TCPSocket, with TCP_NODELAY and the net package's default keep-alive.
// Errors are *net.OpError: one wrapping net.ErrClosed once l is closed,
// one whose Timeout is true when l's deadline passes.
func (l *Listener) Accept() (net.Conn, error) {
	opErr := func(err error) error {
		if l.closed.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
			err = net.ErrClosed
		}
		return &net.OpError{Op: "accept", Net: "tcp", Addr: l.ln.Addr(), Err: err}
	}
	var (
		nfd   = -1
		sa    unix.RawSockaddrAny
		errno syscall.Errno
	)
	err := l.rc.Read(func(fd uintptr) bool {
		for {
			n := uint32(unsafe.Sizeof(sa))
			r, _, e := syscall.RawSyscall6(unix.SYS_ACCEPT4, fd, uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)),
				unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
			switch e {
			case 0:
				nfd, errno = int(r), 0
				return true
			case unix.EINTR, unix.ECONNABORTED: // a connection reset while queued: take the next
				continue
			case unix.EAGAIN:
				return false
			}
			errno = e
			return true
		}
	})
	switch {
	case err != nil:
		return nil, opErr(err)
	case errno != 0:
		return nil, opErr(os.NewSyscallError("accept4", errno))
	}
	raddr := tcpAddr(&sa)
	if err := tuneTCP(uintptr(nfd)); err != nil {
		rawClose(nfd)
		return nil, opErr(err)
	}
	laddr, err := sockname(uintptr(nfd))
	if err != nil {
		rawClose(nfd)
		return nil, opErr(err)
	}
	s, err := newTCPSocket(nfd, laddr, raddr)
	if err != nil {
		return nil, opErr(err)
	}
	return Wrap(s), nil
}

// DialTCP connects to raddr as a *Conn on a TCPSocket, with TCP_NODELAY
// and the net package's default keep-alive. The connect waits until ctx
// is done (no other timeout: give ctx one); the error then wraps
// ctx.Err(). Other errors wrap the connect's errno, as net's do
// ("dial tcp 127.0.0.1:1: connect: connection refused").
func DialTCP(ctx context.Context, raddr netip.AddrPort) (net.Conn, error) {
	to := net.TCPAddrFromAddrPort(raddr)
	opErr := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Addr: to, Err: err} }
	if err := ctx.Err(); err != nil {
		return nil, opErr(err)
	}
	family, sa, salen := unix.AF_INET6, unix.RawSockaddrAny{}, uintptr(unix.SizeofSockaddrInet6)
	ip := raddr.Addr()
	if ip.Is4() || ip.Is4In6() {
		family, salen = unix.AF_INET, uintptr(unix.SizeofSockaddrInet4)
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa))
		sa4.Family = unix.AF_INET
		putPort(&sa4.Port, raddr.Port())
		sa4.Addr = ip.Unmap().As4()
	} else {
		sa6 := (*unix.RawSockaddrInet6)(unsafe.Pointer(&sa))
		sa6.Family = unix.AF_INET6
		putPort(&sa6.Port, raddr.Port())
		sa6.Addr = ip.As16()
		if z := ip.Zone(); z != "" {
			ifi, err := net.InterfaceByName(z)
			if err != nil {
				return nil, opErr(err)
			}
			sa6.Scope_id = uint32(ifi.Index)
		}
	}
	r, _, errno := syscall.RawSyscall(unix.SYS_SOCKET, uintptr(family), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if errno != 0 {
		return nil, opErr(os.NewSyscallError("socket", errno))
	}
	fd := int(r)
	if err := tuneTCP(uintptr(fd)); err != nil {
		rawClose(fd)
		return nil, opErr(err)
	}
	connected := false
	for {
		_, _, errno = syscall.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), salen)
		if errno != unix.EINTR {
			break
		}
	}
	// A connect retried after EINTR reports the first one's progress:
	// EALREADY while it goes on, EISCONN once it is done.
	switch errno {
	case 0, unix.EISCONN:
		connected = true
	case unix.EINPROGRESS, unix.EALREADY:
	default:
		rawClose(fd)
		return nil, opErr(os.NewSyscallError("connect", errno))
	}
	// Registered in the poller before the connect completes: its
	// writability is what completion looks like.
	s, err := newTCPSocket(fd, nil, to)
	if err != nil {
		return nil, opErr(err)
	}
	if !connected {
		if err := s.awaitConnect(ctx); err != nil {
			s.Close()
			return nil, opErr(err)
		}
	}
	laddr, err := sockname(uintptr(fd))
	if err != nil {
		s.Close()
		return nil, opErr(err)
	}
	s.laddr = laddr
	return Wrap(s), nil
}

// awaitConnect waits for s's connect to complete, or ctx to end.
func (s *TCPSocket) awaitConnect(ctx context.Context) error {
	if d, ok := ctx.Deadline(); ok {
		if err := s.f.SetWriteDeadline(d); err != nil {
			return err
		}
	}
	stop := context.AfterFunc(ctx, func() { s.f.SetWriteDeadline(aLongTimeAgo) })
	var cerr syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		v, e := getsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if e != 0 {
			cerr = e
			return true
		}
		switch e := syscall.Errno(v); e {
		case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
			return false
		case 0, unix.EISCONN:
			// Writable with no error is connected, but the poller may
			// report a socket before the connect began: ask the kernel.
			var sa unix.RawSockaddrAny
			n := uint32(unsafe.Sizeof(sa))
			_, _, pe := syscall.RawSyscall(unix.SYS_GETPEERNAME, fd, uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)))
			return pe == 0
		default:
			cerr = e
			return true
		}
	})
	stopped := stop()
	switch {
	case ctx.Err() != nil && (err != nil || !stopped):
		return ctx.Err()
	case err != nil:
		return err
	case cerr != 0:
		return os.NewSyscallError("connect", cerr)
	}
	return s.f.SetWriteDeadline(time.Time{})
}

// newTCPSocket makes a TCPSocket of the non-blocking descriptor fd; on an
// error fd is closed.
func newTCPSocket(fd int, laddr, raddr *net.TCPAddr) (*TCPSocket, error) {
	f := os.NewFile(uintptr(fd), "tcp")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &TCPSocket{f: f, laddr: laddr, raddr: raddr}
	s.rc = closedRawConn{rc: rc, s: s}
	return s, nil
}

// tuneTCP sets what the net package sets on a TCP connection it makes:
// TCP_NODELAY and its default keep-alive.
func tuneTCP(fd uintptr) error {
	for _, o := range [...]struct{ level, opt, v int }{
		{unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, keepAliveIdle},
		{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, keepAliveInterval},
		{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepAliveCount},
	} {
		if err := SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	return nil
}

func getsockoptInt(fd uintptr, level, opt int) (int, syscall.Errno) {
	var v int32
	n := uint32(unsafe.Sizeof(v))
	_, _, errno := syscall.RawSyscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&n)), 0)
	return int(v), errno
}

// sockname is fd's local address.
func sockname(fd uintptr) (*net.TCPAddr, error) {
	var sa unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(sa))
	if _, _, errno := syscall.RawSyscall(unix.SYS_GETSOCKNAME, fd, uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n))); errno != 0 {
		return nil, os.NewSyscallError("getsockname", errno)
	}
	return tcpAddr(&sa), nil
}

func rawClose(fd int) { syscall.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }

// tcpAddr decodes an AF_INET or AF_INET6 address the kernel wrote; any
// other family gives an empty address (never nil, never a panic).
func tcpAddr(sa *unix.RawSockaddrAny) *net.TCPAddr {
	switch sa.Addr.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port(sa4.Port)))
	case unix.AF_INET6:
		sa6 := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		a := &net.TCPAddr{IP: make(net.IP, net.IPv6len), Port: int(port(sa6.Port))}
		copy(a.IP, sa6.Addr[:])
		if sa6.Scope_id != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa6.Scope_id)); err == nil {
				a.Zone = ifi.Name
			}
		}
		return a
	}
	return &net.TCPAddr{}
}

// port reads a sockaddr's port, which is in network byte order.
func port(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

func putPort(p *uint16, v uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(v>>8), byte(v)
}

// closedRawConn is a TCPSocket's syscall.RawConn: an *os.File's, whose
// error after Close is the os package's; this one returns net.ErrClosed,
// as a net.Conn's does.
type closedRawConn struct {
	rc syscall.RawConn
	s  *TCPSocket
}

func (c closedRawConn) Control(f func(fd uintptr)) error { return c.s.mapErr(c.rc.Control(f)) }
func (c closedRawConn) Read(f func(fd uintptr) bool) error {
	return c.s.mapErr(c.rc.Read(f))
}
func (c closedRawConn) Write(f func(fd uintptr) bool) error {
	return c.s.mapErr(c.rc.Write(f))
}

func (s *TCPSocket) mapErr(err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
		return net.ErrClosed
	}
	return err
}

func (s *TCPSocket) opError(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		err = net.ErrClosed
	}
	return &net.OpError{Op: op, Net: "tcp", Source: s.laddr, Addr: s.raddr, Err: err}
}

// SyscallConn returns the socket's syscall.RawConn.
func (s *TCPSocket) SyscallConn() (syscall.RawConn, error) { return s.rc, nil }

// Read reads through the runtime's blocking path (Wrap's Conn reads raw).
func (s *TCPSocket) Read(b []byte) (int, error) {
	n, err := s.f.Read(b)
	if err == nil || err == io.EOF {
		return n, err
	}
	return n, s.opError("read", unwrapPath(err))
}

// Write writes through the runtime's blocking path (Wrap's Conn writes
// raw).
func (s *TCPSocket) Write(b []byte) (int, error) {
	n, err := s.f.Write(b)
	if err != nil {
		return n, s.opError("write", unwrapPath(err))
	}
	return n, nil
}

// Close closes the socket. Safe to call more than once: later calls
// return an error wrapping net.ErrClosed.
func (s *TCPSocket) Close() error {
	if s.closed.Swap(true) {
		return s.opError("close", net.ErrClosed)
	}
	if err := s.f.Close(); err != nil {
		return &net.OpError{Op: "close", Net: "tcp", Source: s.laddr, Addr: s.raddr, Err: unwrapPath(err)}
	}
	return nil
}

// CloseWrite shuts down the writing side (the peer reads end of stream).
func (s *TCPSocket) CloseWrite() error {
	var errno syscall.Errno
	if err := s.rc.Control(func(fd uintptr) {
		_, _, errno = syscall.RawSyscall(unix.SYS_SHUTDOWN, fd, unix.SHUT_WR, 0)
	}); err != nil {
		return s.opError("close", err)
	}
	if errno != 0 {
		return s.opError("close", os.NewSyscallError("shutdown", errno))
	}
	return nil
}

// SetLinger sets SO_LINGER as *net.TCPConn's SetLinger does: sec < 0 is
// the default (close returns at once, the kernel sends what is left),
// 0 discards unsent data and resets the connection on close, sec > 0
// lingers that long.
func (s *TCPSocket) SetLinger(sec int) error {
	l := unix.Linger{}
	if sec >= 0 {
		l.Onoff, l.Linger = 1, int32(sec)
	}
	var errno syscall.Errno
	if err := s.rc.Control(func(fd uintptr) {
		_, _, errno = syscall.RawSyscall6(unix.SYS_SETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_LINGER,
			uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
	}); err != nil {
		return s.opError("set", err)
	}
	if errno != 0 {
		return s.opError("set", os.NewSyscallError("setsockopt", errno))
	}
	return nil
}

// LocalAddr is the socket's address (a *net.TCPAddr).
func (s *TCPSocket) LocalAddr() net.Addr { return s.laddr }

// RemoteAddr is the peer's address (a *net.TCPAddr).
func (s *TCPSocket) RemoteAddr() net.Addr { return s.raddr }

// SetDeadline sets the read and write deadlines, as net.Conn's does.
func (s *TCPSocket) SetDeadline(t time.Time) error {
	return s.opError("set", unwrapPath(s.f.SetDeadline(t)))
}

// SetReadDeadline sets the read deadline, as net.Conn's does.
func (s *TCPSocket) SetReadDeadline(t time.Time) error {
	return s.opError("set", unwrapPath(s.f.SetReadDeadline(t)))
}

// SetWriteDeadline sets the write deadline, as net.Conn's does.
func (s *TCPSocket) SetWriteDeadline(t time.Time) error {
	return s.opError("set", unwrapPath(s.f.SetWriteDeadline(t)))
}

// unwrapPath drops the *os.PathError an *os.File puts around its errors
// (they name the file, which a socket has not).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

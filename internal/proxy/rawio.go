package proxy

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawIO reads and writes one TCP socket with raw system calls, made while
// the runtime holds the socket open (syscall.RawConn), so that a close
// from another goroutine waits for the call to end and the descriptor
// cannot be reused under it.
//
// A read or write on a non-blocking socket never blocks, so it need not
// tell the scheduler it is entering a system call: that saves the
// bookkeeping and, on a machine that is often idle between messages, the
// wake-up of the runtime's monitor thread that every ordinary socket call
// makes. When the socket is not ready, the call parks on the runtime's
// network poller exactly as net.Conn does, and deadlines set on the
// connection still apply.
//
// A rawIO is used by one goroutine at a time (the pump of its direction);
// it allocates nothing per call.
type rawIO struct {
	rc syscall.RawConn

	// Arguments and results of the callback in progress; owned by the
	// calling goroutine.
	buf   []byte
	n     int
	errno syscall.Errno

	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
}

// newRawIO returns a rawIO for c, or nil when c is not a plain TCP socket
// (TLS, a wrapped connection): those keep their own Read and Write.
func newRawIO(c net.Conn) *rawIO {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawIO{rc: rc}
	r.readFn = r.readOnce
	r.writeFn = r.writeAll
	return r
}

func (r *rawIO) readOnce(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)))
		switch e {
		case 0:
			r.n, r.errno = int(n), 0
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.errno = 0, e
		return true
	}
}

func (r *rawIO) writeAll(fd uintptr) bool {
	for r.n < len(r.buf) {
		p := r.buf[r.n:]
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			r.n += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			r.errno = e
			return true
		}
	}
	return true
}

// Read reads into b (len(b) > 0) as net.Conn.Read does: at least one
// byte, io.EOF at the end of the stream, or an error.
func (r *rawIO) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.buf, r.n, r.errno = b, 0, 0
	err := r.rc.Read(r.readFn)
	r.buf = nil
	switch {
	case err != nil:
		return 0, err
	case r.errno != 0:
		return 0, os.NewSyscallError("read", r.errno)
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// Write writes all of b, waiting for the socket as needed, and returns
// how many bytes were written.
func (r *rawIO) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.buf, r.n, r.errno = b, 0, 0
	err := r.rc.Write(r.writeFn)
	n := r.n
	r.buf = nil
	switch {
	case err != nil:
		return n, err
	case r.errno != 0:
		return n, os.NewSyscallError("write", r.errno)
	}
	return n, nil
}

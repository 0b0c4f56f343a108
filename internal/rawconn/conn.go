package rawconn

import (
	"context"
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"
)

// Conn is a socket whose reads and writes are raw system calls made
// inside the network poller's callbacks (see the package comment). It
// embeds the net.Conn it wraps for everything else.
//
// Read and Write may run concurrently with each other and with Close, as
// for net.Conn. Neither allocates.
type Conn struct {
	net.Conn
	rc syscall.RawConn

	rmu    sync.Mutex // held for a whole Read
	rbuf   []byte     // guarded by rmu; the caller's buffer
	rn     uintptr    // guarded by rmu
	rerrno syscall.Errno
	readFn func(fd uintptr) bool // c.read, bound once

	wmu     sync.Mutex // held for a whole Write
	wbuf    []byte     // guarded by wmu
	wdone   int        // guarded by wmu
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool // c.write, bound once
}

// Dial connects like net.Dialer and wraps the connection (see Wrap).
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}

// Wrap returns c with raw reads and writes if c is a *net.TCPConn or a
// *net.UnixConn, and c itself otherwise (TLS and other wrapped
// connections keep their own Read and Write).
func Wrap(c net.Conn) net.Conn {
	var sc syscall.Conn
	switch v := c.(type) {
	case *net.TCPConn:
		sc = v
	case *net.UnixConn:
		sc = v
	default:
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	r := &Conn{Conn: c, rc: rc}
	r.readFn, r.writeFn = r.read, r.write
	return r
}

func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerrno = p, 0, 0
	err := c.rc.Read(c.readFn)
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case c.rerrno != 0:
		return 0, c.opError("read", c.rerrno)
	case c.rn == 0:
		return 0, io.EOF
	}
	return int(c.rn), nil
}

// read is the poller callback of Read: false asks it to wait for input.
func (c *Conn) read(fd uintptr) bool {
	for {
		// The socket is non-blocking: this returns at once.
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.rn = n
		default:
			c.rerrno = errno
		}
		return true
	}
}

func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wdone, c.werrno = p, 0, 0
	err := c.rc.Write(c.writeFn)
	c.wbuf = nil
	switch {
	case err != nil:
		return c.wdone, err
	case c.werrno != 0:
		return c.wdone, c.opError("write", c.werrno)
	}
	return c.wdone, nil
}

// write is the poller callback of Write: false asks it to wait for room in
// the send buffer.
func (c *Conn) write(fd uintptr) bool {
	for c.wdone < len(c.wbuf) {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wdone])), uintptr(len(c.wbuf)-c.wdone))
		switch errno {
		case 0:
			c.wdone += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werrno = errno
			return true
		}
	}
	return true
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.RemoteAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

package rawconn

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
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

	rmu    sync.Mutex // held for a whole Read or ReadPooled
	rbuf   []byte     // guarded by rmu; the caller's buffer, or the pooled one
	rpool  Buffers    // guarded by rmu; ReadPooled's buffers, nil in Read
	rbufp  *[]byte    // guarded by rmu; the buffer taken from rpool, nil while none is held
	rn     uintptr    // guarded by rmu
	rerrno syscall.Errno
	readFn func(fd uintptr) bool // c.read, bound once

	st *stamps // guarded by rmu; nil until StampReads (most sockets never stamp)

	wmu     sync.Mutex // held for a whole Write
	wbuf    []byte     // guarded by wmu
	wdone   int        // guarded by wmu
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool // c.write, bound once
}

// stamps is what a Conn that keeps receive timestamps (StampReads) needs,
// all guarded by its rmu: reads then use recvmsg with msg, whose one iovec
// is iov and whose control buffer is oob (uint64s, for the alignment of a
// cmsghdr).
type stamps struct {
	msg   unix.Msghdr
	iov   unix.Iovec
	oob   [oobWords]uint64
	stamp time.Time // the latest Read's, zero for none; also read, unlocked, by ReadStamp on the reading goroutine
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

// Wrap returns c with raw reads and writes if c is a *net.TCPConn, a
// *net.UnixConn or a *TCPSocket, and c itself otherwise (TLS and other wrapped
// connections keep their own Read and Write).
func Wrap(c net.Conn) net.Conn {
	var sc syscall.Conn
	switch v := c.(type) {
	case *net.TCPConn:
		sc = v
	case *net.UnixConn:
		sc = v
	case *TCPSocket:
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

// NetConn returns the connection c wraps (as tls.Conn's NetConn does),
// for code that needs the socket itself: its type, its descriptor, its
// options. Reading or writing it directly bypasses c's locks.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// CloseWrite shuts down the writing side of the socket (Wrap only wraps
// sockets that can).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// Unwrap returns the connection under c when c is a *Conn, and c itself
// otherwise.
func Unwrap(c net.Conn) net.Conn {
	if r, ok := c.(*Conn); ok {
		return r.Conn
	}
	return c
}

// RawConn returns the socket's syscall.RawConn, for waiting on it
// elsewhere than in a Read (internal/idlepark).
func (c *Conn) RawConn() syscall.RawConn { return c.rc }

func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerrno = p, 0, 0
	if st := c.st; st != nil {
		st.stamp = time.Time{}
		st.iov.Base = &p[0]
		st.iov.SetLen(len(p))
	}
	err := c.rc.Read(c.readFn)
	c.rbuf = nil
	if c.st != nil {
		c.st.iov.Base = nil
	}
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

// ReadPooled is Read into a buffer taken from pool only once there is
// something to return: while the socket has nothing to read, the caller
// holds no buffer (a waiting ReadPooled holds none either). It returns the
// buffer and the count of bytes read into it; the caller owns the buffer
// and gives it back to pool when done with its bytes. On an error or at
// the end of the stream it returns a nil buffer, having given back the one
// it took. Like Read, it allocates nothing (but what pool does).
func (c *Conn) ReadPooled(pool Buffers) (*[]byte, int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rpool, c.rbufp, c.rbuf, c.rn, c.rerrno = pool, nil, nil, 0, 0
	if c.st != nil {
		c.st.stamp = time.Time{}
	}
	err := c.rc.Read(c.readFn)
	b := c.rbufp
	c.rpool, c.rbufp, c.rbuf = nil, nil, nil
	if c.st != nil {
		c.st.iov.Base = nil
	}
	if err == nil && c.rerrno == 0 && c.rn > 0 {
		return b, int(c.rn), nil
	}
	if b != nil {
		pool.Put(b)
	}
	switch {
	case err != nil:
		return nil, 0, err
	case c.rerrno != 0:
		return nil, 0, c.opError("read", c.rerrno)
	}
	return nil, 0, io.EOF
}

// read is the poller callback of Read and ReadPooled: false asks it to
// wait for input. With stamps it is recvmsg, keeping the kernel's receive
// timestamp. Under ReadPooled the buffer is taken from the pool for the
// call and given back when the socket had nothing (EAGAIN).
func (c *Conn) read(fd uintptr) bool {
	st := c.st
	var oob []byte
	if st != nil {
		oob = unsafe.Slice((*byte)(unsafe.Pointer(&st.oob[0])), len(st.oob)*8)
	}
	if c.rpool != nil && c.rbufp == nil {
		c.rbufp = c.rpool.Take(fd)
		c.rbuf = *c.rbufp
		if st != nil {
			st.iov.Base = &c.rbuf[0]
			st.iov.SetLen(len(c.rbuf))
		}
	}
	for {
		// The socket is non-blocking: this returns at once.
		var n uintptr
		var errno syscall.Errno
		if st != nil {
			// The kernel shortens Controllen to what it wrote; reset it.
			st.msg.Control = &oob[0]
			st.msg.SetControllen(len(oob))
			n, _, errno = syscall.RawSyscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&st.msg)), 0)
		} else {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		}
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if c.rpool != nil {
				c.rpool.Put(c.rbufp)
				c.rbufp, c.rbuf = nil, nil
			}
			return false
		case 0:
			c.rn = n
			if st != nil {
				if sec, nsec, ok := parseStamp(oob[:min(int(st.msg.Controllen), len(oob))]); ok {
					st.stamp = time.Unix(sec, nsec)
				}
			}
		default:
			c.rerrno = errno
		}
		return true
	}
}

// StampReads asks the kernel for the receive time of what each later Read
// returns (SO_TIMESTAMPNS), read back with ReadStamp. Reads then use
// recvmsg instead of read. The kernel keeps one switch for the whole
// host: while any socket asks, it stamps every packet it receives. The
// first request on a host where none was on takes effect from a kernel
// work queue, so segments received just after it may have no stamp. Call
// it from the goroutine that reads, or while no Read runs; it is not to be
// undone.
func (c *Conn) StampReads() error {
	var serr error
	if err := c.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return fmt.Errorf("rawconn: receive timestamps: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("rawconn: receive timestamps: %w", serr)
	}
	c.rmu.Lock()
	if c.st == nil {
		st := new(stamps)
		st.msg.Iov = &st.iov
		st.msg.SetIovlen(1)
		c.st = st
	}
	c.rmu.Unlock()
	return nil
}

// ReadStamp returns the kernel's receive time of the latest segment whose
// bytes the latest Read returned, by the wall clock (no monotonic
// reading), or the zero Time when there is none: StampReads was not
// called, the Read failed, or the kernel sent no stamp (a socket family
// that keeps none). Call it only from the goroutine that reads, after
// Read: it takes no lock, being on the path of every delayed chunk.
func (c *Conn) ReadStamp() time.Time {
	if c.st == nil {
		return time.Time{}
	}
	return c.st.stamp
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

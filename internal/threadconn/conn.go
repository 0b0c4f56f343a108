package threadconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/rawconn"
)

// Clock tells the time deadlines are measured against.
type Clock interface {
	Now() time.Time
}

// Conn is a TCP or Unix socket read and written with blocking system
// calls. It implements net.Conn with the deadline semantics described in
// the package documentation. Read and Write may be called from different
// goroutines at once; Close may be called from any goroutine at any time.
type Conn struct {
	f      *os.File        // the blocking descriptor; counts calls in progress
	rc     syscall.RawConn // f's, for socket options and shutdown
	clk    Clock
	local  net.Addr
	remote net.Addr

	mu sync.Mutex // guards the fields below
	// closed is set by the first Close.
	closed bool
	// rdl and wdl are the read and write deadlines; zero: none.
	rdl, wdl time.Time
	// rexpired is set when a past read deadline interrupted the reads.
	rexpired bool
	// rarmed and warmed say a receive or send timeout is set on the
	// socket, so clearing the deadline must clear it.
	rarmed, warmed bool
}

// Dial connects to addr as net.Dialer does and returns the connection
// as a blocking Conn. clk is the clock deadlines are compared with.
func Dial(ctx context.Context, clk Clock, network, addr string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return New(c, clk)
}

// New takes c, a *net.TCPConn or *net.UnixConn, and returns a blocking
// Conn on the same socket. c is closed either way; the socket stays open
// in the returned Conn.
func New(c net.Conn, clk Clock) (*Conn, error) {
	defer c.Close()
	fd, err := rawconn.Dup(c)
	if err != nil {
		return nil, fmt.Errorf("threadconn: %w", err)
	}
	// The duplicate shares the open file description, and with it the
	// O_NONBLOCK flag; c is closed before anyone could use it.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("threadconn: %w", err)
	}
	f := os.NewFile(uintptr(fd), c.RemoteAddr().String())
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("threadconn: %w", err)
	}
	return &Conn{f: f, rc: rc, clk: clk, local: c.LocalAddr(), remote: c.RemoteAddr()}, nil
}

// Read reads up to len(p) bytes, blocking the calling thread until at
// least one arrives, the stream ends (io.EOF), the read deadline passes
// (os.ErrDeadlineExceeded) or the Conn is closed (net.ErrClosed).
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := c.arm(true); err != nil {
		return 0, c.opError("read", err)
	}
	n, err := c.f.Read(p)
	if n > 0 {
		return n, nil
	}
	if err == nil {
		err = io.EOF
	}
	if err = c.cause(err, true); err == io.EOF {
		return 0, err
	}
	return 0, c.opError("read", err)
}

// Write writes all of p, blocking the calling thread while the send
// buffer is full. On an error it returns how many bytes were written.
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.arm(false); err != nil {
		return 0, c.opError("write", err)
	}
	n, err := c.f.Write(p)
	if err != nil {
		return n, c.opError("write", c.cause(err, false))
	}
	return n, nil
}

// arm checks the Conn's state before a read (or a write) and sets the
// socket's receive (send) timeout to what is left of the deadline.
func (c *Conn) arm(read bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	dl, armed, opt := c.wdl, &c.warmed, unix.SO_SNDTIMEO
	if read {
		if c.rexpired {
			return os.ErrDeadlineExceeded
		}
		dl, armed, opt = c.rdl, &c.rarmed, unix.SO_RCVTIMEO
	}
	var left time.Duration
	if !dl.IsZero() {
		if left = dl.Sub(c.clk.Now()); left <= 0 {
			return os.ErrDeadlineExceeded
		}
		// A zero timeout means none: wait at least a microsecond.
		left = max(left, time.Microsecond)
	} else if !*armed {
		return nil
	}
	tv := unix.NsecToTimeval(left.Nanoseconds())
	if err := c.control(func(fd int) error { return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv) }); err != nil {
		return err
	}
	*armed = left > 0
	return nil
}

// cause names why a call failed: the Conn closed, a deadline, or err.
func (c *Conn) cause(err error, read bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return net.ErrClosed
	case read && c.rexpired:
		return os.ErrDeadlineExceeded
	case errors.Is(err, syscall.EAGAIN):
		// The socket's timeout ran out.
		return os.ErrDeadlineExceeded
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.local.Network(), Source: c.local, Addr: c.remote, Err: err}
}

// control runs fn on the descriptor while f holds it open.
func (c *Conn) control(fn func(fd int) error) error {
	var ferr error
	if err := c.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// Close shuts the socket down, which wakes any Read or Write blocked on
// it, and releases it once those have returned. Close is safe to call
// more than once; later calls return nil.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.control(func(fd int) error { return unix.Shutdown(fd, unix.SHUT_RDWR) })
	return c.f.Close()
}

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline of reads that start from now on; a
// zero t means none. A t that has already passed also interrupts a read
// in progress and ends reading on this Conn.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.setDeadlineLocked(&c.rdl, t); err != nil || t.IsZero() || t.After(c.clk.Now()) || c.rexpired {
		return err
	}
	c.rexpired = true
	return c.control(func(fd int) error { return unix.Shutdown(fd, unix.SHUT_RD) })
}

// SetWriteDeadline sets the deadline of writes that start from now on; a
// zero t means none. A write already blocked is not interrupted (Close
// does that).
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setDeadlineLocked(&c.wdl, t)
}

// setDeadlineLocked stores t in dl, one of c's deadlines, unless c is
// closed. c.mu is held.
func (c *Conn) setDeadlineLocked(dl *time.Time, t time.Time) error {
	if c.closed {
		return net.ErrClosed
	}
	*dl = t
	return nil
}

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the remote network address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

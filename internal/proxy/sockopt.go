package proxy

import (
	"fmt"
	"net"
	"syscall"

	"github.com/sluicelab/sluice/internal/rawconn"
	"golang.org/x/sys/unix"
)

// tcpConn returns the TCP socket under c (looking through TLS and
// rawconn's wrapper), or nil.
func tcpConn(c net.Conn) syscall.Conn {
	switch v := c.(type) {
	case *net.TCPConn:
		return v
	case *rawconn.TCPSocket:
		return v
	case interface{ NetConn() net.Conn }: // *tls.Conn, *rawconn.Conn
		return tcpConn(v.NetConn())
	}
	return nil
}

// setNotSentLowat sets TCP_NOTSENT_LOWAT on c: the kernel reports the socket
// writable only while fewer than n bytes are unsent, so a writer blocks
// with its data still in sluice. n <= 0 leaves the kernel default.
func setNotSentLowat(c net.Conn, n int) error {
	tc := tcpConn(c)
	if tc == nil || n <= 0 {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return fmt.Errorf("notsent_lowat: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = rawconn.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	}); err != nil {
		return fmt.Errorf("notsent_lowat: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("notsent_lowat %d: %w", n, serr)
	}
	return nil
}

// UnsentBytes returns the bytes written to c's socket that the kernel has
// not sent yet (TCP_INFO tcpi_notsent_bytes). It returns 0 for non-TCP
// connections.
func UnsentBytes(c net.Conn) (int, error) {
	tc := tcpConn(c)
	if tc == nil {
		return 0, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("tcp_info: %w", err)
	}
	return notSent(raw)
}

// notSent is UnsentBytes of the socket ctl controls (a runtime socket's
// or an event loop's); an error for a closed or non-TCP socket.
func notSent(ctl rawconn.Controller) (int, error) {
	var (
		info unix.TCPInfo
		ierr error
	)
	if err := ctl.Control(func(fd uintptr) {
		ierr = rawconn.TCPInfo(fd, &info)
	}); err != nil {
		return 0, fmt.Errorf("tcp_info: %w", err)
	}
	if ierr != nil {
		return 0, fmt.Errorf("tcp_info: %w", ierr)
	}
	return int(info.Notsent_bytes), nil
}

// closeWrite half-closes c if it supports it, else closes it.
func closeWrite(c net.Conn) error {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

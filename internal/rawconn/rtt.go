package rawconn

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxUnwrap bounds how many wrappers RTT looks through.
const maxUnwrap = 8

// Controller runs f with a socket's descriptor while the descriptor
// cannot be closed: a syscall.RawConn, or a socket the proxy's event loop
// holds (evloop.Socket).
type Controller interface {
	Control(f func(fd uintptr)) error
}

// ControllerOf returns the Controller of c's socket, looking through a
// *Conn, a *tls.Conn and any wrapper with a NetConn method, or nil when
// c has no socket it can reach.
func ControllerOf(c net.Conn) Controller {
	for range maxUnwrap {
		switch v := c.(type) {
		case *Conn:
			return v.rc
		case syscall.Conn:
			rc, err := v.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// RTT returns the kernel's round-trip time of c's TCP socket (see
// RTTOf), looking through wrappers as ControllerOf does.
func RTT(c net.Conn) time.Duration {
	return RTTOf(ControllerOf(c))
}

// RTTOf returns the kernel's round-trip time of ctl's TCP socket:
// TCP_INFO tcpi_min_rtt (the least sample over the last
// net.ipv4.tcp_min_rtt_wlen, 300 s by default), or tcpi_rtt (smoothed)
// on a kernel without it; microsecond resolution. The minimum is the
// path's: on request/response traffic the peer delays its ACK until it
// answers, so the smoothed RTT also holds the peer's time to answer
// (milliseconds of server time on loopback). It is 0 for nil, a Unix
// socket, a closed socket and on error. Safe to call while other
// goroutines read and write the socket; one getsockopt per call.
func RTTOf(ctl Controller) time.Duration {
	if ctl == nil {
		return 0
	}
	return rawRTT(ctl)
}

func rawRTT(rc Controller) time.Duration {
	var rtt uint32
	var serr error
	err := rc.Control(func(fd uintptr) {
		var info unix.TCPInfo
		serr = TCPInfo(fd, &info)
		if serr == nil {
			rtt = info.Min_rtt
			if rtt == 0 {
				rtt = info.Rtt
			}
		}
	})
	if err != nil || serr != nil {
		return 0
	}
	return time.Duration(rtt) * time.Microsecond
}

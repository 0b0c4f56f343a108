package rawconn

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxUnwrap bounds how many wrappers RTT looks through.
const maxUnwrap = 8

// RTT returns the kernel's round-trip time of c's TCP socket, looking
// through a *Conn, a *tls.Conn and any wrapper with a NetConn method:
// TCP_INFO tcpi_min_rtt (the least sample over the last
// net.ipv4.tcp_min_rtt_wlen, 300 s by default), or tcpi_rtt (smoothed)
// on a kernel without it; microsecond resolution. The minimum is the
// path's: on request/response traffic the peer delays its ACK until it
// answers, so the smoothed RTT also holds the peer's time to answer
// (milliseconds of server time on loopback). It is 0 for a Unix socket,
// a socket it cannot reach and on error. Safe to call while other
// goroutines read and write c; one getsockopt per call.
func RTT(c net.Conn) time.Duration {
	for range maxUnwrap {
		switch v := c.(type) {
		case *Conn:
			if _, tcp := v.Conn.(*net.TCPConn); !tcp {
				return 0
			}
			return rawRTT(v.rc)
		case *net.TCPConn:
			rc, err := v.SyscallConn()
			if err != nil {
				return 0
			}
			return rawRTT(rc)
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return 0
		}
	}
	return 0
}

func rawRTT(rc syscall.RawConn) time.Duration {
	var rtt uint32
	var serr error
	err := rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
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

package rawconn

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestSockopts: an option set raw reads back through the library's
// getsockopt, TCP_INFO matches the library's, and both fail on a socket
// that is not TCP.
func TestSockopts(t *testing.T) {
	c, _ := testenv.TCPPair(t)
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{4096, 65536} {
		var got int
		var serr, gerr error
		rc.Control(func(fd uintptr) {
			serr = SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, v)
			got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
		})
		if serr != nil || gerr != nil || got != v {
			t.Errorf("TCP_NOTSENT_LOWAT set to %d: %v; reads %d, %v", v, serr, got, gerr)
		}
	}
	var info unix.TCPInfo
	var want *unix.TCPInfo
	var ierr, werr error
	rc.Control(func(fd uintptr) {
		ierr = TCPInfo(fd, &info)
		want, werr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if ierr != nil || werr != nil || info.State != want.State || info.State != 1 /* TCP_ESTABLISHED */ || info.Snd_mss != want.Snd_mss {
		t.Errorf("TCP_INFO: state %d mss %d (%v), want the library's %d %d (%v), established", info.State, info.Snd_mss, ierr, want.State, want.Snd_mss, werr)
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := TCPInfo(uintptr(fds[0]), &info); err == nil {
		t.Error("TCP_INFO of a Unix socket: no error")
	}
	if err := SetsockoptInt(uintptr(fds[0]), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, 1); err == nil {
		t.Error("TCP_NOTSENT_LOWAT on a Unix socket: no error")
	}
}

package wire

import (
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// farewellPeek bounds the unread bytes a watch looks at to tell a
// client's goodbye (Gate.SetFarewell) from more requests, in bytes.
const farewellPeek = 64

// watchPeer watches client's socket while nobody reads it (its
// statement waits for admission) and calls gone, once, from another
// goroutine, when the client has gone: it reset the connection (an error
// or hang-up), or closed its side with nothing unread, or with only
// bytes farewell accepts (nil: none). A client that sent more and is
// still there, or closed after more requests, is not gone. No byte is
// consumed. stop ends the watch and returns once it has ended; gone is
// not called after stop returns. A client whose socket cannot be watched
// (no socket under it) is never reported; nor, for farewell, is a TLS one.
//
// The watch waits in the runtime's poller on a duplicate of the
// descriptor, so it never contends with the pump's own reads and
// deadlines on client; it costs a dup, a poller registration and a
// goroutine per wait, made only for a statement that waits.
func watchPeer(client net.Conn, farewell func([]byte) bool, gone func()) (stop func()) {
	rc, isTLS := rawSocket(client)
	if rc == nil {
		return func() {}
	}
	if isTLS {
		farewell = nil
	}
	nfd := -1
	if err := rc.Control(func(fd uintptr) {
		nfd, _ = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil || nfd < 0 {
		return func() {}
	}
	// The duplicate shares the socket's O_NONBLOCK, so the runtime's
	// poller takes it.
	f := os.NewFile(uintptr(nfd), "client")
	frc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf [farewellPeek]byte
		err := frc.Read(func(fd uintptr) bool { return peerLeft(fd, buf[:], farewell) })
		if err == nil {
			gone()
		}
	}()
	return func() {
		f.Close() // wakes the watch's wait with an error
		<-done
	}
}

// peerLeft reports, without waiting or consuming a byte, whether the
// peer of socket fd has gone (see watchPeer); buf receives a peek.
func peerLeft(fd uintptr, buf []byte, farewell func([]byte) bool) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
	n, err := unix.Poll(fds[:], 0)
	if err != nil || n == 0 {
		return false
	}
	re := fds[0].Revents
	if re&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
		return true // reset, or both sides shut
	}
	if re&unix.POLLRDHUP == 0 {
		return false // more bytes, and the client is still there
	}
	k, errno := peekFD(fd, buf)
	switch {
	case errno == syscall.EAGAIN || errno == syscall.EINTR:
		return false
	case errno != 0 || k == 0:
		return true
	}
	return farewell != nil && k < len(buf) && farewell(buf[:k])
}

package rawconn

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket options as raw system calls: they never wait, and through the
// blocking-system-call path (golang.org/x/sys/unix) each would also wake
// the runtime's monitor thread of an idle process, once per session.

// SetsockoptInt sets an int-valued socket option of fd.
func SetsockoptInt(fd uintptr, level, opt, value int) error {
	v := int32(value)
	_, _, errno := syscall.RawSyscall6(unix.SYS_SETSOCKOPT, fd, uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// TCPInfo reads fd's TCP_INFO into info.
func TCPInfo(fd uintptr, info *unix.TCPInfo) error {
	n := uint32(unsafe.Sizeof(*info))
	_, _, errno := syscall.RawSyscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO, uintptr(unsafe.Pointer(info)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

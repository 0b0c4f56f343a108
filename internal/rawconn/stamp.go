package rawconn

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oobWords sizes a Conn's control buffer, in uint64s: room for one
// SCM_TIMESTAMPNS message with slack.
const oobWords = (unix.SizeofCmsghdr + timespecSize + 32) / 8

// timespecSize is the size of the kernel's struct timespec that
// SCM_TIMESTAMPNS carries: two words, the seconds and the nanoseconds.
const timespecSize = int(unsafe.Sizeof(unix.Timespec{}))

// parseStamp finds an SCM_TIMESTAMPNS control message in oob, the control
// data recvmsg returned, and returns its seconds and nanoseconds. It never
// panics: a truncated or malformed message ends the search with ok false.
func parseStamp(oob []byte) (sec, nsec int64, ok bool) {
	hdr := unix.CmsgLen(0) // the header, aligned: where data begins
	for len(oob) >= hdr {
		length, level, typ := cmsgHeader(oob)
		if length < uint64(hdr) || length > uint64(len(oob)) {
			return 0, 0, false
		}
		if level == unix.SOL_SOCKET && typ == unix.SCM_TIMESTAMPNS && length >= uint64(unix.CmsgLen(timespecSize)) {
			d := oob[hdr:]
			if timespecSize == 16 {
				return int64(binary.NativeEndian.Uint64(d[0:8])), int64(binary.NativeEndian.Uint64(d[8:16])), true
			}
			return int64(int32(binary.NativeEndian.Uint32(d[0:4]))), int64(int32(binary.NativeEndian.Uint32(d[4:8]))), true
		}
		next := unix.CmsgSpace(int(length) - hdr)
		if next > len(oob) {
			return 0, 0, false
		}
		oob = oob[next:]
	}
	return 0, 0, false
}

// cmsgHeader decodes the cmsghdr at the start of b, which holds at least
// one header.
func cmsgHeader(b []byte) (length uint64, level, typ int32) {
	var h unix.Cmsghdr
	lenSize := int(unsafe.Sizeof(h.Len))
	if lenSize == 8 {
		length = binary.NativeEndian.Uint64(b)
	} else {
		length = uint64(binary.NativeEndian.Uint32(b))
	}
	level = int32(binary.NativeEndian.Uint32(b[lenSize:]))
	typ = int32(binary.NativeEndian.Uint32(b[lenSize+4:]))
	return length, level, typ
}

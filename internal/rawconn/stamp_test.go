package rawconn

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/testenv"
)

// cmsg builds one control message of level and type around data, padded
// as the kernel pads it.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	var h unix.Cmsghdr
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&h)), unix.SizeofCmsghdr))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

// timespec encodes sec and nsec as the kernel's struct timespec.
func timespec(sec, nsec int64) []byte {
	b := make([]byte, timespecSize)
	if timespecSize == 16 {
		binary.NativeEndian.PutUint64(b, uint64(sec))
		binary.NativeEndian.PutUint64(b[8:], uint64(nsec))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(sec))
		binary.NativeEndian.PutUint32(b[4:], uint32(nsec))
	}
	return b
}

func TestParseStamp(t *testing.T) {
	stamp := cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespec(1700000000, 123456789))
	other := cmsg(unix.SOL_SOCKET, unix.SCM_RIGHTS, []byte{1, 0, 0, 0})
	tests := []struct {
		name      string
		oob       []byte
		sec, nsec int64
		ok        bool
	}{
		{"alone", stamp, 1700000000, 123456789, true},
		{"after another message", append(append([]byte{}, other...), stamp...), 1700000000, 123456789, true},
		{"none", nil, 0, 0, false},
		{"another message only", other, 0, 0, false},
		{"header cut short", stamp[:unix.SizeofCmsghdr-1], 0, 0, false},
		{"data cut short", stamp[:unix.CmsgLen(timespecSize)-1], 0, 0, false},
		{"length below the header", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, nil)[:unix.CmsgLen(0)], 0, 0, false},
		{"wrong level", cmsg(unix.SOL_TCP, unix.SCM_TIMESTAMPNS, timespec(1, 2)), 0, 0, false},
		{"too short a timestamp", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, []byte{1, 2, 3}), 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec, nsec, ok := parseStamp(tt.oob)
			if sec != tt.sec || nsec != tt.nsec || ok != tt.ok {
				t.Fatalf("parseStamp = %d, %d, %v; want %d, %d, %v", sec, nsec, ok, tt.sec, tt.nsec, tt.ok)
			}
		})
	}
	// A length that claims more than the buffer holds.
	bad := append([]byte{}, stamp...)
	var h unix.Cmsghdr
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS
	h.SetLen(len(bad) + 8)
	copy(bad, unsafe.Slice((*byte)(unsafe.Pointer(&h)), unix.SizeofCmsghdr))
	if _, _, ok := parseStamp(bad); ok {
		t.Fatal("parseStamp accepted a length past the buffer")
	}
}

// FuzzParseStamp: parseStamp never panics, and a timestamp message placed
// after whatever well-formed message the input encodes is found.
func FuzzParseStamp(f *testing.F) {
	f.Add(cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespec(5, 6)), int64(1), int64(2))
	f.Add(cmsg(unix.SOL_SOCKET, unix.SCM_RIGHTS, []byte{3, 0, 0, 0}), int64(1700000000), int64(999999999))
	f.Add([]byte{}, int64(0), int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0x23, 0, 0, 0}, int64(-1), int64(7))
	f.Fuzz(func(t *testing.T, oob []byte, sec, nsec int64) {
		parseStamp(oob)
		if timespecSize != 16 {
			return
		}
		// Any data wrapped as a non-timestamp message, then a stamp.
		b := append(cmsg(unix.SOL_SOCKET, unix.SCM_RIGHTS, oob), cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespec(sec, nsec))...)
		gs, gn, ok := parseStamp(b)
		if !ok || gs != sec || gn != nsec {
			t.Fatalf("parseStamp = %d, %d, %v; want %d, %d, true", gs, gn, ok, sec, nsec)
		}
	})
}

// TestReadStamp: with StampReads, ReadStamp is when the kernel received
// the bytes, not when Read returned them; without, it is zero.
func TestReadStamp(t *testing.T) {
	for _, stamped := range []bool{false, true} {
		c, s := rawPair(t)
		r := Wrap(s).(*Conn)
		if stamped {
			if err := r.StampReads(); err != nil {
				t.Fatal(err)
			}
		}
		if stamped {
			awaitStamps(t, c, r)
		}
		sent := time.Now().Round(0)
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		const held = 30 * time.Millisecond
		time.Sleep(held) // the bytes wait in the receive queue
		buf := make([]byte, 16)
		n, err := r.Read(buf)
		if err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
		read := time.Now().Round(0)
		got := r.ReadStamp()
		if !stamped {
			if !got.IsZero() {
				t.Fatalf("stamp %v without StampReads", got)
			}
			continue
		}
		if got.IsZero() {
			t.Fatal("no stamp with StampReads")
		}
		// Received after it was sent, and held before it was read.
		if got.Before(sent) || read.Sub(got) < held-time.Millisecond {
			t.Fatalf("stamp %v: sent %v, read %v (%v later)", got, sent, read, read.Sub(got))
		}
	}
}

// stampedPair returns a Conn dialled to a loopback listener and the
// accepted end as a Conn whose reads already come with stamps.
func stampedPair(t *testing.T) (net.Conn, *Conn) {
	t.Helper()
	c, s := rawPair(t)
	r := Wrap(s).(*Conn)
	if err := r.StampReads(); err != nil {
		t.Fatal(err)
	}
	awaitStamps(t, c, r)
	return c, r
}

// awaitStamps exchanges a byte from w to r until a read of r comes with a
// stamp: on a host where no socket asked before, the kernel switches
// stamping on from a work queue, and segments received before that carry
// none.
func awaitStamps(t *testing.T, w net.Conn, r *Conn) {
	t.Helper()
	buf := make([]byte, 1)
	testenv.Eventually(t, 5*time.Second, "a read with a stamp after StampReads", func() bool {
		if _, err := w.Write([]byte{'w'}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
		return !r.ReadStamp().IsZero()
	})
}

// TestStampedStream repeats TestConnStream's transfer with stamped reads:
// every byte once, in order, then io.EOF, and a stamp on each read.
func TestStampedStream(t *testing.T) {
	c, r := stampedPair(t)
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.(*Conn).Conn.(interface{ CloseWrite() error }).CloseWrite()
		}
		werr <- err
	}()
	got := make([]byte, 0, len(data))
	buf := make([]byte, 3000)
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		if r.ReadStamp().IsZero() {
			t.Fatalf("read of %d bytes at %d came without a stamp", n, len(got))
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(got), len(data))
	}
}

func TestStampedReadAllocs(t *testing.T) {
	c, r := stampedPair(t)
	msg, buf := []byte("ping"), make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		r.ReadStamp()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per stamped write and read", allocs)
	}
}

func BenchmarkConnPingPongStamped(b *testing.B) {
	c, s := rawPair(b)
	go io.Copy(s, s)
	if err := c.(*Conn).StampReads(); err != nil {
		b.Fatal(err)
	}
	pingPong(b, c)
}

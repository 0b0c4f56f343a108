package fastpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
)

// JournalMax is the largest chunk the program redirects, in bytes: it
// copies each chunk it redirects into the journal, and passes a larger
// one, or one the journal has no room for, to user space instead.
const JournalMax = 4096

// recordHeader is the size of struct record in bpf/relay.c: the socket's
// cookie, the time received and the length, before the bytes.
const recordHeader = 24

// Record is one chunk the program redirected.
type Record struct {
	// Cookie names the socket that received the chunk (Pair.Cookie).
	Cookie uint64
	// At is when the kernel received it: bpf_ktime_get_ns, CLOCK_MONOTONIC
	// nanoseconds.
	At uint64
	// Bytes is a copy of the chunk, valid only until the callback returns.
	Bytes []byte
}

// Journal reads the copies of the chunks the program redirected, in the
// order it handled them, so that user space observes every byte of a
// paired session: the chunks passed to it from the sockets and the
// others from here, in stream order as long as it drains the journal
// before it reads a socket. It is for one goroutine; Close is safe twice.
type Journal struct {
	rd  *ringbuf.Reader
	rec ringbuf.Record
	fd  int
}

// Journal opens the kernel's journal. A Kernel has one; open it once.
func (k *Kernel) Journal() (*Journal, error) {
	rd, err := ringbuf.NewReader(k.objs.Journal)
	if err != nil {
		return nil, fmt.Errorf("fastpath: journal: %w", err)
	}
	// A deadline in the past makes each read return at once once the ring
	// is empty: Drain never blocks.
	rd.SetDeadline(time.Unix(1, 0))
	return &Journal{rd: rd, fd: k.objs.Journal.FD()}, nil
}

// FD is the ring's descriptor, for an event loop to poll: readable
// while records wait. The Journal keeps it; do not close it.
func (j *Journal) FD() int { return j.fd }

// Drain calls f with each record waiting, oldest first, and returns once
// the ring is empty. f must not keep r.Bytes.
func (j *Journal) Drain(f func(r Record)) error {
	for {
		err := j.rd.ReadInto(&j.rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("fastpath: journal: %w", err)
		}
		s := j.rec.RawSample
		if len(s) < recordHeader {
			return fmt.Errorf("fastpath: journal: a record of %d bytes", len(s))
		}
		n := int(binary.LittleEndian.Uint32(s[16:]))
		if n > len(s)-recordHeader {
			return fmt.Errorf("fastpath: journal: a record of %d bytes says %d", len(s), n)
		}
		f(Record{
			Cookie: binary.LittleEndian.Uint64(s),
			At:     binary.LittleEndian.Uint64(s[8:]),
			Bytes:  s[recordHeader : recordHeader+n],
		})
	}
}

// Close releases the reader.
func (j *Journal) Close() error { return j.rd.Close() }

// Pending reports whether records wait, without a system call.
func (j *Journal) Pending() bool { return j.rd.AvailableBytes() > 0 }

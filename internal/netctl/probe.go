package netctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/rawconn"
)

// A probe times ICMP echo requests to the peer of the sockets a link
// direction receives on: the reply crosses the path from that peer to
// sluice, so its round trip grows with the queue there, and the peer's
// kernel answers at once, however busy its processes are (the timestamps
// a TCP receiver sees stretch with every pause of the sending process).
//
// It sends only when told (send, one request per step of a receive side
// with Low-class bytes arriving); a goroutine reads the replies. Its
// socket is opened in the network namespace of the socket it probes
// for, an unprivileged ICMP socket where the host allows one
// (net.ipv4.ping_group_range), else a raw one (CAP_NET_RAW). IPv4 only.
// A reply's arrival is the kernel's timestamp of it, on the wall clock:
// the probe's clock must be the wall clock too (clock.Real), as it is
// wherever real sockets are watched.
type probe struct {
	clk clock.Clock
	key probeKey
	fd  int
	raw bool // a raw socket: replies carry their IP header, and every echo reply to the host comes
	id  uint16
	dst unix.SockaddrInet4

	refs int // sockets using it; guarded by Watcher.mu

	mu sync.Mutex
	// Guarded by mu.
	seq     uint16                  // the last request's
	sent    [probeHistory]time.Time // by sequence number modulo probeHistory
	replied uint16                  // the highest sequence number answered
	rtt     time.Duration           // the last reply's round trip; 0 none yet
	min     time.Duration           // the lowest; 0 none yet
	closed  bool
}

// probeKey tells probes apart: the peer's address in one namespace.
type probeKey struct {
	ns   uint64 // the namespace's inode
	addr [4]byte
}

// probeHistory is how many requests a probe remembers; a reply to an
// older one is ignored.
const probeHistory = 64

// probeTarget returns the key of the probe for the peer of rc, and a
// descriptor of rc's network namespace for openProbe (the caller closes
// it); an error when rc's peer is not IPv4.
func probeTarget(rc rawconn.Controller) (probeKey, int, error) {
	var k probeKey
	var nsfd int
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		var sa unix.Sockaddr
		if sa, err = unix.Getpeername(int(fd)); err != nil {
			return
		}
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			k.addr = a.Addr
		case *unix.SockaddrInet6:
			if ip := a.Addr; [12]byte(ip[:12]) != [12]byte{10: 0xff, 11: 0xff} {
				err = errors.New("an IPv6 peer")
				return
			}
			k.addr = [4]byte(a.Addr[12:])
		default:
			err = errors.New("not an IP socket")
			return
		}
		nsfd, err = unix.IoctlRetInt(int(fd), unix.SIOCGSKNS)
	}); cerr != nil {
		return k, 0, cerr
	}
	if err != nil {
		return k, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		unix.Close(nsfd)
		return k, 0, err
	}
	k.ns = st.Ino
	return k, nsfd, nil
}

// openProbe opens a probe for k from inside the namespace nsfd.
func openProbe(clk clock.Clock, k probeKey, nsfd int) (*probe, error) {
	var fd int
	var raw bool
	err := inNamespace(nsfd, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			raw = true
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netctl: an ICMP socket: %w", err)
	}
	// The reader wakes this often to see whether the probe was closed;
	// the kernel stamps each reply with its arrival.
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := errors.Join(unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netctl: %w", err)
	}
	p := &probe{clk: clk, key: k, fd: fd, raw: raw, id: uint16(os.Getpid() ^ fd<<8), dst: unix.SockaddrInet4{Addr: k.addr}}
	go p.read()
	return p, nil
}

// inNamespace runs f on a thread in the network namespace nsfd: this
// one's if it is the same, else (it needs CAP_SYS_ADMIN) a thread that
// joins it and comes back.
func inNamespace(nsfd int, f func() error) error {
	var mine, theirs unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &mine); err != nil {
		return err
	}
	if err := unix.Fstat(nsfd, &theirs); err != nil {
		return err
	}
	if mine.Ino == theirs.Ino && mine.Dev == theirs.Dev {
		return f()
	}
	runtime.LockOSThread()
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(home)
	if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, and ends with its goroutine.
		return errors.Join(ferr, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// send sends the next echo request, stamped with now.
func (p *probe) send(now time.Time) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.seq++
	seq := p.seq
	p.sent[seq%probeHistory] = now
	p.mu.Unlock()
	var b [16]byte
	b[0] = 8 // echo request
	binary.BigEndian.PutUint16(b[4:], p.id)
	binary.BigEndian.PutUint16(b[6:], seq)
	binary.BigEndian.PutUint64(b[8:], uint64(now.UnixNano()))
	binary.BigEndian.PutUint16(b[2:], checksum(b[:]))
	dst := p.dst
	unix.Sendto(p.fd, b[:], unix.MSG_DONTWAIT, &dst) // a lost request is a missing sample
}

// checksum is the Internet checksum of b (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// read takes replies until the probe is closed.
func (p *probe) read() {
	defer unix.Close(p.fd)
	buf, oob := make([]byte, 1500), make([]byte, 128)
	for {
		n, oobn, _, from, err := unix.Recvmsg(p.fd, buf, oob, 0)
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		at := arrival(oob[:oobn])
		if at.IsZero() {
			at = p.clk.Now()
		}
		b := buf[:n]
		if p.raw {
			if a, ok := from.(*unix.SockaddrInet4); !ok || a.Addr != p.dst.Addr || len(b) < 20 {
				continue
			}
			b = b[int(b[0]&0x0f)*4:]
		}
		if len(b) < 16 || b[0] != 0 || p.raw && binary.BigEndian.Uint16(b[4:]) != p.id {
			continue
		}
		p.reply(binary.BigEndian.Uint16(b[6:]), at)
	}
}

// arrival returns the kernel's timestamp of a reply's arrival from its
// control messages (SO_TIMESTAMPNS), so that the reader's own wake-up
// is not counted in the round trip; zero when there is none.
func arrival(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			return time.Unix(sec, nsec)
		}
	}
	return time.Time{}
}

// reply takes the answer to request seq, arrived at.
func (p *probe) reply(seq uint16, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if int16(p.seq-seq) < 0 || p.seq-seq >= probeHistory {
		return
	}
	sent := p.sent[seq%probeHistory]
	if sent.IsZero() {
		return
	}
	p.sent[seq%probeHistory] = time.Time{}
	rtt := max(at.Sub(sent), time.Microsecond)
	if int16(seq-p.replied) > 0 {
		p.replied = seq
		p.rtt = rtt
	}
	if p.min == 0 || rtt < p.min {
		p.min = rtt
	}
}

// sample returns the probe's view at now: the last reply's round trip,
// or the age of the oldest request still unanswered when that is longer
// (a queue that grows shows before its replies come), and the lowest
// round trip; false before the first reply.
func (p *probe) sample(now time.Time) (rtt, low time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rtt == 0 {
		return 0, 0, false
	}
	rtt = p.rtt
	for s := p.replied + 1; int16(p.seq-s) >= 0 && p.seq-s < probeHistory; s++ {
		if t := p.sent[s%probeHistory]; !t.IsZero() {
			// Requests unanswered for a second are lost, not queued.
			if age := now.Sub(t); age > rtt && age < time.Second {
				rtt = age
			}
			break
		}
	}
	return rtt, p.min, true
}

// sampleKey is the key of the probe's samples in a Controller: apart
// from every socket's (the Watcher's counter never gets near it).
func (p *probe) sampleKey() uint64 { return 1<<63 | uint64(p.fd) }

// close stops the probe; its reader closes the socket within its
// receive timeout. Safe to call more than once.
func (p *probe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
}

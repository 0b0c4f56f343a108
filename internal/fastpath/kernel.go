package fastpath

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
)

// Proto names the framing the program walks.
type Proto uint8

const (
	// PostgreSQL frames messages as a type byte and a big-endian int32
	// length that counts itself: the protocol after the startup packet.
	PostgreSQL Proto = 1
	// MySQL frames packets as a little-endian 3-byte length and a
	// sequence byte; a 0xffffff length continues in the next packet.
	MySQL Proto = 2
)

// ErrUnavailable wraps every reason Open cannot load the programs: no
// privilege, a kernel without BPF sockmap or bpf_loop, a locked-down
// kernel.
var ErrUnavailable = errors.New("kernel fast path unavailable")

// Socket is a connected TCP socket whose descriptor can be borrowed: an
// *evloop.Socket or a syscall.RawConn.
type Socket interface {
	Control(f func(fd uintptr)) error
}

// Kernel is the loaded program and its maps. It is safe for concurrent
// use; the kernel serialises map updates, and each Pair's fields are its
// own. Close is safe twice.
type Kernel struct {
	objs relayObjects
	clk  clock.Clock

	closeOnce sync.Once
	closeErr  error // written once, in closeOnce
}

// Open loads the verdict program and attaches it to a new sockhash. A
// failure wraps ErrUnavailable with the kernel's reason. clk paces the
// waits of Pause and Drained.
func Open(clk clock.Clock) (*Kernel, error) {
	var k Kernel
	if err := loadRelayObjects(&k.objs, nil); err != nil {
		return nil, fmt.Errorf("%w: load BPF objects: %w", ErrUnavailable, err)
	}
	err := link.RawAttachProgram(link.RawAttachProgramOptions{
		Target:  k.objs.Socks.FD(),
		Program: k.objs.Relay,
		Attach:  ebpf.AttachSkSKBVerdict,
	})
	if err != nil {
		k.objs.Close()
		return nil, fmt.Errorf("%w: attach stream verdict: %w", ErrUnavailable, err)
	}
	k.clk = clk
	return &k, nil
}

// Close unloads the program and its maps, once every paired session has
// ended: freeing the sockhash takes each socket out of it, which drops
// what the program passed to user space and was not read yet, and bytes
// in flight between two sockets.
func (k *Kernel) Close() error {
	k.closeOnce.Do(func() { k.closeErr = k.objs.Close() })
	return k.closeErr
}

// Entries returns how many sockets the sockhash, the link map and the flow
// map hold: each Pair adds two to each until it is closed.
func (k *Kernel) Entries() (socks, links, flows int, err error) {
	var errs [3]error
	socks, errs[0] = countKeys(k.objs.Socks)
	links, errs[1] = countKeys(k.objs.Links)
	flows, errs[2] = countKeys(k.objs.Flows)
	return socks, links, flows, errors.Join(errs[:]...)
}

// countKeys counts a map's keys (a sockhash's values, sockets, cannot be
// read back).
func countKeys(m *ebpf.Map) (int, error) {
	var key, next uint64
	n := 0
	err := m.NextKey(nil, &next)
	for err == nil {
		n++
		key = next
		err = m.NextKey(&key, &next)
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return n, nil
	}
	return n, err
}

// side is one socket of a pair.
type side struct {
	sock   Socket
	cookie uint64
	client bool
}

// ErrNotQuiet is Resume's answer for a pair one of whose sockets held
// bytes when it was paired: the program did not see them, so its counts
// and its handshake with user space (Consumed) are off by them. The pair
// stays paused; user space relays it as before.
var ErrNotQuiet = errors.New("fastpath: a socket held unread bytes when paired")

// Pair is one session's two sockets in the kernel: its client's and its
// upstream's. It starts paused: each byte either socket receives is
// counted by the program and passed to user space, which reads it as
// before and reports it with Consumed. Resume hands what comes next to
// the peer in the kernel, once user space has consumed all it was
// passed; Pause hands it back.
//
// The sockets stay in the sockhash until they close (Close only for a
// session that ends): leaving it drops bytes passed to user space and not
// yet read.
//
// A Pair's methods are for its session's owner, one goroutine at a time;
// Stats may be called from any.
type Pair struct {
	k     *Kernel
	proto Proto
	sides [2]side // client, upstream
	quiet bool    // no bytes waited in either receive queue once paired

	resumed bool
	// unsettled is, by side, whether bytes the kernel redirected from it
	// may still be on their way to the peer: set while resumed and by
	// Hold, cleared once Settle or Settled saw them queued.
	unsettled [2]bool
	consumed  [2]uint64 // bytes user space read from each side and sent on
	// base is, per side, what was queued on the socket (acknowledged and
	// in its send queue) when the pair last resumed, and what the other
	// side had redirected and user space had consumed of it by then.
	base [2]struct{ queued, redirected, consumed uint64 }
}

// Pair puts a session's sockets in the kernel's maps, paused. Call it
// when neither peer is about to send (the end of the opening exchange:
// the server has answered and waits, the client waits for that answer),
// so that the program sees every byte from then on; Resume refuses a
// pair whose sockets held bytes. On error the links and flows are gone
// and the program passes whatever the sockets receive to user space; a
// socket already in the sockhash stays there until it closes (see Pair).
func (k *Kernel) Pair(client, upstream Socket, proto Proto) (*Pair, error) {
	p := &Pair{k: k, proto: proto}
	p.sides[0] = side{sock: client, client: true}
	p.sides[1] = side{sock: upstream}
	for i := range p.sides {
		c, err := cookie(p.sides[i].sock)
		if err != nil {
			return nil, err
		}
		p.sides[i].cookie = c
	}
	if p.sides[0].cookie == p.sides[1].cookie {
		return nil, errors.New("fastpath: a socket cannot be its own peer")
	}
	// What each socket had received, and how much of it waited unread,
	// before the program saw it: a byte that arrives between this and the
	// insertion waits in the receive queue unseen, and shows as a
	// difference in what the socket received.
	var before [2]uint64
	p.quiet = true
	for i := range p.sides {
		n, unreadN, err := received(p.sides[i].sock)
		if err != nil {
			return nil, err
		}
		before[i] = n
		if unreadN > 0 {
			p.quiet = false
		}
	}
	for i := range p.sides {
		if err := p.add(i); err != nil {
			return nil, errors.Join(err, p.remove(false))
		}
	}
	for i := range p.sides {
		n, _, err := received(p.sides[i].sock)
		if err != nil {
			return nil, errors.Join(err, p.remove(false))
		}
		if n != before[i] {
			p.quiet = false
		}
	}
	return p, nil
}

// add puts side i in the flow, link and socket maps, in that order: the
// program counts nothing for a socket with no link, and a link exists only
// with its flow.
func (p *Pair) add(i int) error {
	s := p.sides[i]
	if err := p.k.objs.Flows.Update(s.cookie, &relayFlow{}, ebpf.UpdateNoExist); err != nil {
		return fmt.Errorf("fastpath: flow map: %w", err)
	}
	if err := p.k.objs.Links.Update(s.cookie, p.linkOf(i), ebpf.UpdateNoExist); err != nil {
		return fmt.Errorf("fastpath: link map: %w", err)
	}
	var err error
	if cerr := s.sock.Control(func(fd uintptr) {
		err = p.k.objs.Socks.Update(s.cookie, uint64(fd), ebpf.UpdateNoExist)
	}); cerr != nil {
		return fmt.Errorf("fastpath: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("fastpath: sockhash: %w", err)
	}
	return nil
}

func (p *Pair) linkOf(i int) *relayLink {
	l := &relayLink{Peer: p.sides[1-i].cookie, Consumed: p.consumed[i], Proto: uint8(p.proto)}
	if p.resumed {
		l.Redirect = 1
	}
	if p.sides[i].client {
		l.Client = 1
	}
	return l
}

// writeLink publishes side i's link.
func (p *Pair) writeLink(i int) error {
	if err := p.k.objs.Links.Update(p.sides[i].cookie, p.linkOf(i), ebpf.UpdateExist); err != nil {
		return fmt.Errorf("fastpath: link map: %w", err)
	}
	return nil
}

// Consumed reports that user space read n more bytes from side i (0: the
// client's socket, 1: the upstream's) and wrote them on to the peer. While
// the pair is resumed, the program redirects that side's next chunk once
// the count reaches what it passed.
func (p *Pair) Consumed(i int, n int) error {
	p.consumed[i] += uint64(n)
	if !p.resumed {
		return nil
	}
	return p.writeLink(i)
}

// Resume hands both directions to the kernel: each side's chunks go to
// the peer from the first that arrives after user space has consumed all
// the program passed to it. The caller writes nothing it did not read
// from the pair's sockets (an injected answer, say) until Pause returns.
func (p *Pair) Resume() error {
	if p.resumed {
		return nil
	}
	if !p.quiet {
		return ErrNotQuiet
	}
	// The baseline below is only right once what the kernel redirected
	// before is queued: a byte still on its way would count for the new
	// period.
	for i := range p.sides {
		ok, err := p.Settled(i)
		if err != nil {
			return err
		}
		if !ok {
			return ErrUnsettled
		}
	}
	for i := range p.sides {
		q, err := queued(p.sides[i].sock)
		if err != nil {
			return err
		}
		st, err := p.flow(1 - i)
		if err != nil {
			return err
		}
		p.base[i].queued = q
		p.base[i].redirected = st.Redirected
		p.base[i].consumed = p.consumed[1-i]
	}
	p.resumed = true
	p.unsettled = [2]bool{true, true}
	for i := range p.sides {
		if err := p.writeLink(i); err != nil {
			return err
		}
	}
	return nil
}

// SettleLimit is how long the bytes the kernel redirected may take to be
// queued on their peer before Settle and Pause give up with ErrStuck.
const SettleLimit = 5 * time.Second

// ErrStuck is Settle's and Pause's error when the kernel has not queued
// the bytes it redirected within SettleLimit: the session cannot go on
// without losing or reordering them, and should end.
var ErrStuck = errors.New("fastpath: redirected bytes stuck in the kernel")

// ErrUnsettled is Resume's answer while bytes the kernel redirected
// before Hold are still on their way to a peer; the caller stays on user
// space and tries again later.
var ErrUnsettled = errors.New("fastpath: redirected bytes not yet queued")

// Resumed reports whether the pair is resumed.
func (p *Pair) Resumed() bool { return p.resumed }

// Pause takes both directions back to user space: from its return, each
// chunk a socket receives is passed to user space, and every byte the
// kernel redirected before is queued on its peer, so what the caller
// writes next goes after it. The caller writes nothing to either socket
// until Pause returns. It waits at most until ctx ends: Hold, then Settle
// on both sides.
func (p *Pair) Pause(ctx context.Context) error {
	if err := p.Hold(); err != nil {
		return err
	}
	return p.drain(ctx, 0, 1)
}

// Hold stops the kernel redirecting, without waiting: from its return
// each chunk a socket receives is passed to user space. Bytes redirected
// before may still be on their way to the peer: the caller writes to a
// side only once Settle or Settled says the bytes redirected from the
// other side are queued.
func (p *Pair) Hold() error {
	if !p.resumed {
		return nil
	}
	p.resumed = false
	for i := range p.sides {
		if err := p.writeLink(i); err != nil {
			return err
		}
	}
	return nil
}

// Settle waits until every byte the kernel redirected from side from (0:
// the client's socket, 1: the upstream's) is queued on the other side, at
// most until ctx ends. While the pair is resumed the program passes a
// chunk to user space when the journal cannot hold it, and after Hold
// the kernel may still be sending what it redirected before: user space
// calls Settle (or Settled) before it writes to the other side. It
// returns at once when nothing redirected can be in flight.
func (p *Pair) Settle(ctx context.Context, from int) error {
	if !p.resumed && !p.unsettled[from] {
		return nil
	}
	if err := p.drain(ctx, from); err != nil {
		return err
	}
	p.unsettled[from] = p.resumed
	return nil
}

// Settled is Settle without the wait: it reports whether every byte
// redirected from side from is queued on the other side now.
func (p *Pair) Settled(from int) (bool, error) {
	if !p.resumed && !p.unsettled[from] {
		return true, nil
	}
	ok, err := p.queuedAll(from)
	if ok && err == nil {
		p.unsettled[from] = p.resumed
	}
	return ok, err
}

// ErrUnread is Drained's answer when side from saw end of stream before
// user space read every byte the program passed it: the socket notes a
// FIN as it arrives, before the last chunks reach user space through the
// kernel's work queue. The caller reads on (a read that returns end of
// stream again is retried once the socket is readable) and asks again.
var ErrUnread = errors.New("fastpath: end of stream before the bytes passed to user space")

// Drained is for the end of stream on side from (0: the client's socket,
// 1: the upstream's). It checks that user space consumed every byte the
// program passed from it (ErrUnread when not), then waits until every
// byte the kernel redirected from it is queued on the other side: the
// half-close can then be passed on without its FIN overtaking them. It
// waits at most until ctx ends.
func (p *Pair) Drained(ctx context.Context, from int) error {
	if _, err := queued(p.sides[from].sock); err != nil {
		return err
	}
	st, err := p.flow(from)
	if err != nil {
		return err
	}
	if st.Passed > p.consumed[from] {
		return ErrUnread
	}
	return p.drain(ctx, from)
}

// DrainedNow is Drained without the wait: ErrUnread as Drained, else
// whether every byte the kernel redirected from side from is queued on
// the other side now.
func (p *Pair) DrainedNow(from int) (bool, error) {
	st, err := p.flow(from)
	if err != nil {
		return false, err
	}
	if st.Passed > p.consumed[from] {
		return false, ErrUnread
	}
	return p.Settled(from)
}

// drain waits until each side in froms has its redirected bytes queued
// on its peer.
func (p *Pair) drain(ctx context.Context, froms ...int) error {
	for _, from := range froms {
		start := p.k.clk.Now()
		for wait := 20 * time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
			got, want, err := p.queuedSince(from)
			if err != nil {
				return err
			}
			if got >= want {
				break
			}
			if wait == time.Millisecond {
				// Still waiting: the kernel's work that sends redirected
				// bytes may have missed the wake-up that reschedules it.
				if err := kick(p.sides[1-from].sock); err != nil {
					return err
				}
			}
			if p.k.clk.Now().Sub(start) > SettleLimit {
				return fmt.Errorf("fastpath: %d of %d bytes from side %d queued on its peer after %v: %w", got, want, from, SettleLimit, ErrStuck)
			}
			if err := clock.Sleep(ctx, p.k.clk, wait); err != nil {
				return fmt.Errorf("fastpath: %d of %d bytes from side %d queued on its peer: %w", got, want, from, err)
			}
		}
	}
	return nil
}

// queuedAll reports whether every byte redirected from side from, and
// every byte user space consumed from it, is queued on the other side.
func (p *Pair) queuedAll(from int) (bool, error) {
	got, want, err := p.queuedSince(from)
	return err == nil && got >= want, err
}

// queuedSince returns how many bytes were queued on the other side of
// from since the last Resume, and how many must be: what the kernel
// redirected from it and what user space consumed from it since.
func (p *Pair) queuedSince(from int) (got, want uint64, err error) {
	to := 1 - from
	// A system call that locks the socket waits for a verdict still
	// running on it in softirq with the old link: after it, the redirect
	// count is final.
	if _, err := queued(p.sides[from].sock); err != nil {
		return 0, 0, err
	}
	st, err := p.flow(from)
	if err != nil {
		return 0, 0, err
	}
	// Queued on to since the last Resume: what the kernel redirected and
	// what user space wrote (the passed bytes it consumed while the pair
	// resumed).
	want = st.Redirected - p.base[to].redirected + p.consumed[from] - p.base[to].consumed
	q, err := queued(p.sides[to].sock)
	if err != nil {
		return 0, 0, err
	}
	return q - p.base[to].queued, want, nil
}

// Close takes the pair's sockets out of the maps, for a session that
// ended: its sockets are closed, or will be with no further read (a
// socket also leaves the sockhash by itself when it closes; taken out
// while it lives, it drops what the program passed to user space and was
// not read yet). Close is safe twice.
func (p *Pair) Close() error {
	return p.remove(true)
}

// remove deletes the pair's links and flows and, with socks, its sockhash
// entries. Without its link a socket's bytes pass to user space.
func (p *Pair) remove(socks bool) error {
	maps := []*ebpf.Map{p.k.objs.Links, p.k.objs.Flows}
	if socks {
		maps = append(maps, p.k.objs.Socks)
	}
	var errs []error
	for _, s := range p.sides {
		if s.cookie == 0 {
			continue
		}
		for _, m := range maps {
			if err := m.Delete(s.cookie); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (p *Pair) flow(i int) (relayFlow, error) {
	var f relayFlow
	if err := p.k.objs.Flows.Lookup(p.sides[i].cookie, &f); err != nil {
		return f, fmt.Errorf("fastpath: flow map: %w", err)
	}
	return f, nil
}

// Stats returns what the program counted on side i (0: bytes from the
// client, 1: from the upstream) since the pair was made. Safe for
// concurrent use; the counts of one call may be a few messages apart.
func (p *Pair) Stats(i int) (Stats, error) {
	f, err := p.flow(i)
	if err != nil {
		return Stats{}, err
	}
	return statsOf(&f), nil
}

func cookie(s Socket) (uint64, error) {
	var c uint64
	var err error
	if cerr := s.Control(func(fd uintptr) {
		c, err = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
	}); cerr != nil {
		return 0, fmt.Errorf("fastpath: %w", cerr)
	}
	if err != nil {
		return 0, fmt.Errorf("fastpath: SO_COOKIE: %w", err)
	}
	return c, nil
}

// received returns the bytes s has received in all and, read before s is
// in the sockhash, how many of them wait in its receive queue (once it is
// in, SIOCINQ counts only what the program passed).
func received(s Socket) (total uint64, unread int, err error) {
	var info *unix.TCPInfo
	if cerr := s.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			unread, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		}
	}); cerr != nil {
		return 0, 0, fmt.Errorf("fastpath: %w", cerr)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("fastpath: TCP_INFO: %w", err)
	}
	return info.Bytes_received, unread, nil
}

// kick reschedules the kernel's work that sends the bytes redirected to
// s: setting SO_SNDBUF calls the socket's write-space callback, which
// for a socket in a sockhash schedules that work. The size set is the
// one in force, so only its autotuning ends (the socket keeps the size
// it has grown to).
func kick(s Socket) error {
	var err error
	if cerr := s.Control(func(fd uintptr) {
		var n int
		if n, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n/2)
		}
	}); cerr != nil {
		return fmt.Errorf("fastpath: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("fastpath: SO_SNDBUF: %w", err)
	}
	return nil
}

// queued returns the bytes written to s so far that the kernel has taken:
// acknowledged by the peer plus still in the send queue. Its getsockopt
// locks the socket.
func queued(s Socket) (uint64, error) {
	var info *unix.TCPInfo
	var outq int
	var err error
	if cerr := s.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			outq, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		}
	}); cerr != nil {
		return 0, fmt.Errorf("fastpath: %w", cerr)
	}
	if err != nil {
		return 0, fmt.Errorf("fastpath: TCP_INFO: %w", err)
	}
	return info.Bytes_acked + uint64(outq), nil
}

// Reseat gives the pair new handles on its sockets, the same sockets
// under another owner (the proxy's loop hands a session's descriptors to
// the Go runtime): the pair borrows a socket's descriptor through its
// handle. The cookies, and so the maps, do not change.
func (p *Pair) Reseat(client, upstream Socket) {
	p.sides[0].sock, p.sides[1].sock = client, upstream
}

// Cookie is side i's socket cookie (0: the client's socket, 1: the
// upstream's), which names it in the journal's records.
func (p *Pair) Cookie(i int) uint64 { return p.sides[i].cookie }

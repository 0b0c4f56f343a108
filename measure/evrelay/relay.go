package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/measure/harness"
)

// config is the variant measured (see doc.go).
type config struct {
	loops int  // event loops; at least 1
	edge  bool // edge-triggered registration instead of level-triggered
	raw   bool // block in epoll_pwait as a raw system call
	spin  int  // zero-timeout raw polls before a blocking wait; 0: block at once
	keep  bool // use the runtime's descriptors, left in its netpoller, instead of detached duplicates
}

const (
	bufSize   = 64 << 10 // the read buffer shared by a loop's sockets, in bytes
	maxEvents = 128      // events taken per wait
)

// serve relays every client accepted on ln to upstream until ctx ends,
// then closes ln and every relayed socket. open, when not nil, counts the
// pairs being relayed.
func serve(ctx context.Context, log *slog.Logger, ln net.Listener, upstream string, cfg config, open *atomic.Int64) error {
	if open == nil {
		open = new(atomic.Int64)
	}
	loops := make([]*loop, 0, cfg.loops)
	var wg sync.WaitGroup
	defer func() {
		for _, l := range loops {
			l.stop()
		}
		wg.Wait()
	}()
	for range cfg.loops {
		l, err := newLoop(cfg, open)
		if err != nil {
			return err
		}
		loops = append(loops, l)
		wg.Go(l.run)
	}
	next := 0
	return harness.ServePairs(ctx, log, ln, upstream, func(c, u net.Conn) {
		if cfg.keep {
			cfd, cerr := borrow(c)
			ufd, uerr := borrow(u)
			if cerr != nil || uerr != nil {
				c.Close()
				u.Close()
				log.Warn("socket", "err", errors.Join(cerr, uerr))
				return
			}
			open.Add(1)
			loops[next%len(loops)].addKept(cfd, ufd, c, u)
			next++
			return
		}
		cfd, err := detach(c)
		if err != nil {
			u.Close()
			log.Warn("client socket", "err", err)
			return
		}
		ufd, err := detach(u)
		if err != nil {
			unix.Close(cfd)
			log.Warn("upstream socket", "err", err)
			return
		}
		open.Add(1)
		loops[next%len(loops)].add(cfd, ufd)
		next++
	})
}

// detach takes c's socket out of the runtime: it returns a non-blocking
// duplicate of c's descriptor and closes c (which removes the original
// from the runtime's epoll set).
func detach(c net.Conn) (int, error) {
	defer c.Close()
	sc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := sc.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// borrow returns c's own descriptor, which stays registered in the
// runtime's netpoller; c must stay open (and referenced) while it is used.
func borrow(c net.Conn) (int, error) {
	sc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := sc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// sock is one side of a relayed pair. Only its loop's goroutine uses it.
type sock struct {
	fd     int
	peer   *sock
	out    []byte // bytes read from peer not yet written to fd; out[off:] remain
	off    int
	shut   bool   // peer ended: shut down fd's write side once out is written
	rdhup  bool   // the peer of fd has sent its end of stream (EPOLLRDHUP seen)
	eof    bool   // fd's read side ended
	paused bool   // fd is not read until peer's out is written
	events uint32 // level-triggered: the events registered for fd
	closed bool
	conn   net.Conn // with -keep: the runtime's socket, closed in place of fd
}

// loop is one event loop. Its fields other than the queue are used only by
// the goroutine running run.
type loop struct {
	cfg    config
	open   *atomic.Int64 // pairs relayed by every loop
	epfd   int
	efd    int // eventfd: add and stop wake the loop through it
	buf    []byte
	events []unix.EpollEvent
	socks  []*sock // by descriptor

	mu       sync.Mutex
	queue    [][2]int         // pairs accepted and not yet registered
	kept     map[int]net.Conn // with -keep: the runtime's sockets of queued pairs, by descriptor
	stopping bool
}

func newLoop(cfg config, open *atomic.Int64) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	return &loop{cfg: cfg, open: open, epfd: epfd, efd: efd, buf: make([]byte, bufSize),
		events: make([]unix.EpollEvent, maxEvents)}, nil
}

// add hands the loop a client and upstream socket pair; it is safe to call
// from any goroutine. The loop owns and closes both descriptors.
func (l *loop) add(cfd, ufd int) {
	l.mu.Lock()
	l.queue = append(l.queue, [2]int{cfd, ufd})
	l.mu.Unlock()
	l.wake()
}

// addKept is add for descriptors the runtime keeps (-keep): c and u are
// closed in their place.
func (l *loop) addKept(cfd, ufd int, c, u net.Conn) {
	l.mu.Lock()
	if l.kept == nil {
		l.kept = make(map[int]net.Conn)
	}
	l.kept[cfd], l.kept[ufd] = c, u
	l.queue = append(l.queue, [2]int{cfd, ufd})
	l.mu.Unlock()
	l.wake()
}

// stop makes run close every socket and return; safe from any goroutine.
func (l *loop) stop() {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	l.wake()
}

func (l *loop) wake() {
	one := uint64(1)
	unix.Write(l.efd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// run is the loop itself, on a locked OS thread.
func (l *loop) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer unix.Close(l.epfd)
	defer unix.Close(l.efd)
	for {
		n := l.wait()
		woken := false
		for i := range n {
			ev := &l.events[i]
			if int(ev.Fd) == l.efd {
				woken = true
				continue
			}
			l.ready(l.socks[ev.Fd], ev.Events)
		}
		// After the batch, so a descriptor closed and reused by a new pair
		// cannot take the stale events of the old one.
		if woken && l.drain() {
			for _, s := range l.socks {
				if s != nil {
					l.closePair(s)
				}
			}
			return
		}
	}
}

// wait returns the number of events in l.events (0 on EINTR).
func (l *loop) wait() int {
	for range l.cfg.spin {
		if n := l.rawWait(0); n > 0 {
			return n
		}
	}
	if l.cfg.raw {
		return l.rawWait(-1)
	}
	n, err := unix.EpollWait(l.epfd, l.events, -1)
	if err != nil {
		return 0
	}
	return n
}

func (l *loop) rawWait(timeout int) int {
	n, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
		uintptr(len(l.events)), uintptr(timeout), 0, 0)
	if errno != 0 {
		return 0
	}
	return int(n)
}

// drain registers the queued pairs; it reports whether the loop must stop.
func (l *loop) drain() bool {
	var b [8]byte
	unix.Read(l.efd, b[:])
	l.mu.Lock()
	q, stopping := l.queue, l.stopping
	l.queue = nil
	kept := make(map[int]net.Conn, 2*len(q))
	for _, p := range q {
		for _, fd := range p {
			if c := l.kept[fd]; c != nil {
				kept[fd] = c
				delete(l.kept, fd)
			}
		}
	}
	l.mu.Unlock()
	for _, p := range q {
		c, u := &sock{fd: p[0], conn: kept[p[0]]}, &sock{fd: p[1], conn: kept[p[1]]}
		c.peer, u.peer = u, c
		l.register(c)
		l.register(u)
	}
	return stopping
}

func (l *loop) register(s *sock) {
	for s.fd >= len(l.socks) {
		l.socks = append(l.socks, nil)
	}
	l.socks[s.fd] = s
	s.events = unix.EPOLLIN | unix.EPOLLRDHUP
	if l.cfg.edge {
		s.events = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, s.fd, &unix.EpollEvent{Events: s.events, Fd: int32(s.fd)}); err != nil {
		l.closePair(s)
	}
}

// ready handles the events reported for s.
func (l *loop) ready(s *sock, events uint32) {
	if s == nil || s.closed {
		return
	}
	if events&(unix.EPOLLRDHUP|unix.EPOLLHUP) != 0 {
		s.rdhup = true
	}
	if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 && len(s.out) > 0 {
		l.flush(s)
	}
	if !s.closed && !s.paused && !s.eof && events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.pump(s)
	}
	if !s.closed {
		l.update(s)
	}
}

// pump reads s until a short read, writing each chunk to its peer. Once
// the end of stream has been reported it reads on to it: edge-triggered,
// no further event would report it.
func (l *loop) pump(s *sock) {
	p := s.peer
	for {
		n, err := rawRead(s.fd, l.buf)
		switch {
		case err == unix.EAGAIN:
			return
		case err == unix.EINTR:
			continue
		case err != nil:
			l.closePair(s)
			return
		case n == 0:
			s.eof = true
			if len(p.out) == 0 {
				unix.Shutdown(p.fd, unix.SHUT_WR)
			} else {
				p.shut = true
			}
			l.doneIfEnded(s)
			return
		}
		w, err := rawSend(p.fd, l.buf[:n])
		if err != nil && err != unix.EAGAIN {
			l.closePair(s)
			return
		}
		if w < n {
			p.out = append(p.out[:0], l.buf[max(w, 0):n]...)
			p.off = 0
			s.paused = true
			l.update(p)
			return
		}
		if n < len(l.buf) && !s.rdhup {
			return
		}
	}
}

// flush writes s's pending bytes; once they are all written it carries a
// pending end of stream and resumes reading the peer.
func (l *loop) flush(s *sock) {
	for s.off < len(s.out) {
		w, err := rawSend(s.fd, s.out[s.off:])
		if err == unix.EAGAIN {
			return
		}
		if err != nil {
			l.closePair(s)
			return
		}
		s.off += w
	}
	s.out, s.off = s.out[:0], 0
	if s.shut {
		unix.Shutdown(s.fd, unix.SHUT_WR)
		l.doneIfEnded(s)
		return
	}
	if p := s.peer; p.paused {
		p.paused = false
		// The last read may have filled the buffer, so more may be
		// waiting with no new edge to report it: read now.
		l.pump(p)
		if !p.closed {
			l.update(p)
		}
	}
}

// update registers the events s waits for, level-triggered; an
// edge-triggered socket stays registered for everything.
func (l *loop) update(s *sock) {
	if l.cfg.edge || s.closed {
		return
	}
	var want uint32
	if !s.paused && !s.eof {
		want = unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if len(s.out) > 0 {
		want |= unix.EPOLLOUT
	}
	if want != s.events {
		s.events = want
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, s.fd, &unix.EpollEvent{Events: want, Fd: int32(s.fd)})
	}
}

// doneIfEnded closes the pair once both directions have ended and every
// byte has been written.
func (l *loop) doneIfEnded(s *sock) {
	p := s.peer
	if s.eof && p.eof && len(s.out) == 0 && len(p.out) == 0 {
		l.closePair(s)
	}
}

func (l *loop) closePair(s *sock) {
	if s.closed && s.peer.closed {
		return
	}
	for _, x := range [2]*sock{s, s.peer} {
		if x.closed {
			continue
		}
		x.closed = true
		if x.fd < len(l.socks) && l.socks[x.fd] == x {
			l.socks[x.fd] = nil
		}
		if x.conn != nil {
			x.conn.Close()
		} else {
			unix.Close(x.fd)
		}
	}
	l.open.Add(-1)
}

func rawRead(fd int, b []byte) (int, error) {
	n, _, errno := syscall.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return -1, errno
	}
	return int(n), nil
}

func rawSend(fd int, b []byte) (int, error) {
	n, _, errno := syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_NOSIGNAL, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(n), nil
}

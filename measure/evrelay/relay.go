package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/evloop"
	"github.com/sluicelab/sluice/measure/harness"
)

// config is the variant measured (see doc.go).
type config struct {
	loops int  // event loops; at least 1
	edge  bool // edge-triggered registration instead of level-triggered
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
		cs, us, err := detachPair(c, u)
		if err != nil {
			log.Warn("detach", "err", err)
			return
		}
		open.Add(1)
		loops[next%len(loops)].add(cs, us)
		next++
	})
}

// detachPair takes the sockets of a client and its upstream out of the
// runtime (evloop.Detach); on an error both are closed.
func detachPair(c, u net.Conn) (cs, us *evloop.Socket, err error) {
	if cs, err = evloop.Detach(c); err != nil {
		c.Close()
		u.Close()
		return nil, nil, fmt.Errorf("client socket: %w", err)
	}
	if us, err = evloop.Detach(u); err != nil {
		cs.Close()
		u.Close()
		return nil, nil, fmt.Errorf("upstream socket: %w", err)
	}
	return cs, us, nil
}

// sock is one side of a relayed pair. Only its loop's goroutine uses it.
type sock struct {
	s      *evloop.Socket
	peer   *sock
	out    []byte // bytes read from peer not yet written to s; out[off:] remain
	off    int
	shut   bool   // peer ended: shut down s's write side once out is written
	rdhup  bool   // the peer of s has sent its end of stream (RDHup seen)
	eof    bool   // s's read side ended
	paused bool   // s is not read until peer's out is written
	events uint32 // level-triggered: the events registered for s
	closed bool
}

// loop is one event loop. Its fields other than the queue are used only by
// the goroutine running run.
type loop struct {
	cfg    config
	open   *atomic.Int64 // pairs relayed by every loop
	poll   *evloop.Poller
	buf    []byte
	events []unix.EpollEvent
	socks  []*sock // by descriptor

	mu       sync.Mutex
	queue    [][2]*evloop.Socket // pairs accepted and not yet registered
	stopping bool
}

func newLoop(cfg config, open *atomic.Int64) (*loop, error) {
	p, err := evloop.NewPoller()
	if err != nil {
		return nil, err
	}
	return &loop{cfg: cfg, open: open, poll: p, buf: make([]byte, bufSize),
		events: make([]unix.EpollEvent, maxEvents)}, nil
}

// add hands the loop a client and upstream socket pair; it is safe to call
// from any goroutine. The loop owns and closes both sockets.
func (l *loop) add(c, u *evloop.Socket) {
	l.mu.Lock()
	l.queue = append(l.queue, [2]*evloop.Socket{c, u})
	l.mu.Unlock()
	l.poll.Wake()
}

// stop makes run close every socket and return; safe from any goroutine.
func (l *loop) stop() {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	l.poll.Wake()
}

// run is the loop itself.
func (l *loop) run() {
	defer l.poll.Close()
	for {
		n, woken := l.poll.WaitReady(l.events)
		for i := range n {
			ev := &l.events[i]
			l.ready(l.socks[evloop.Data(ev)], ev.Events)
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

// drain registers the queued pairs; it reports whether the loop must stop.
func (l *loop) drain() bool {
	l.poll.Drain()
	l.mu.Lock()
	q, stopping := l.queue, l.stopping
	l.queue = nil
	l.mu.Unlock()
	for _, p := range q {
		c, u := &sock{s: p[0]}, &sock{s: p[1]}
		c.peer, u.peer = u, c
		l.register(c)
		l.register(u)
	}
	return stopping
}

func (l *loop) register(s *sock) {
	fd := s.s.FD()
	for fd >= len(l.socks) {
		l.socks = append(l.socks, nil)
	}
	l.socks[fd] = s
	s.events = evloop.In | evloop.RDHup
	if l.cfg.edge {
		s.events = evloop.In | evloop.Out | evloop.RDHup | unix.EPOLLET
	}
	if err := l.poll.Add(fd, s.events, uint64(fd)); err != nil {
		l.closePair(s)
	}
}

// ready handles the events reported for s.
func (l *loop) ready(s *sock, events uint32) {
	if s == nil || s.closed {
		return
	}
	if events&(evloop.RDHup|evloop.Hup) != 0 {
		s.rdhup = true
	}
	if events&(evloop.Out|evloop.Err|evloop.Hup) != 0 && len(s.out) > 0 {
		l.flush(s)
	}
	if !s.closed && !s.paused && !s.eof && events&(evloop.In|evloop.RDHup|evloop.Hup|evloop.Err) != 0 {
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
		n, err := s.s.Read(l.buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return
		case err != nil:
			l.closePair(s)
			return
		case n == 0:
			s.eof = true
			if len(p.out) == 0 {
				p.s.Shutdown()
			} else {
				p.shut = true
			}
			l.doneIfEnded(s)
			return
		}
		w, err := p.s.Write(l.buf[:n])
		if err != nil && !errors.Is(err, unix.EAGAIN) {
			l.closePair(s)
			return
		}
		if w < n {
			p.out = append(p.out[:0], l.buf[w:n]...)
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
		w, err := s.s.Write(s.out[s.off:])
		if errors.Is(err, unix.EAGAIN) {
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
		s.s.Shutdown()
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
		want = evloop.In | evloop.RDHup
	}
	if len(s.out) > 0 {
		want |= evloop.Out
	}
	if want != s.events {
		s.events = want
		fd := s.s.FD()
		l.poll.Mod(fd, want, uint64(fd))
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
		if fd := x.s.FD(); fd < len(l.socks) && l.socks[fd] == x {
			l.socks[fd] = nil
		}
		x.s.Close()
	}
	l.open.Add(-1)
}

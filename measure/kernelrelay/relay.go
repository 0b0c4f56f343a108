package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/fastpath"
)

// relay splices sessions through sluice's kernel fast path.
type relay struct {
	k     *fastpath.Kernel
	proto fastpath.Proto
}

// session is one spliced pair of connections. mu orders the two copies'
// writes with the pairing: a copy holds it from a read's return to the
// report of what it wrote.
type session struct {
	r     *relay
	conns [2]*net.TCPConn // client, upstream
	mu    sync.Mutex
	p     *fastpath.Pair // guarded by mu; nil until the opening ended
}

// splice relays a and b until both directions end, then closes them.
// User space copies the opening exchange; at its end (the server's first
// ReadyForQuery, or MySQL's OK to the login) the two sockets are paired
// and resumed, so every later byte moves in the kernel.
func (r *relay) splice(a, b *net.TCPConn) error {
	s := &session{r: r, conns: [2]*net.TCPConn{a, b}}
	defer a.Close()
	defer b.Close()
	errs := make(chan error, 1)
	go func() { errs <- s.copy(1) }()
	err := s.copy(0)
	err = errors.Join(err, <-errs)
	s.mu.Lock()
	if s.p != nil {
		err = errors.Join(err, s.p.Close())
	}
	s.mu.Unlock()
	return err
}

// copy relays what side from passes to user space to the other side.
func (s *session) copy(from int) error {
	src, dst := s.conns[from], s.conns[1-from]
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if werr := s.forward(from, dst, buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			err = s.end(from, dst)
			if errors.Is(err, fastpath.ErrUnread) {
				// The chunks before the FIN are still on their way.
				time.Sleep(50 * time.Microsecond)
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
	}
}

// forward writes a chunk on, pairing the session first when the chunk
// ends the opening exchange: the server then waits for the client, and
// the client for this chunk, so neither socket holds a byte.
func (s *session) forward(from int, dst *net.TCPConn, chunk []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	paired := s.p != nil
	if !paired && from == 1 && s.endsOpening(chunk) {
		if err := s.pair(); err != nil {
			return err
		}
	}
	if _, err := dst.Write(chunk); err != nil {
		return err
	}
	if paired {
		return s.p.Consumed(from, len(chunk))
	}
	return nil
}

// readyIdle is PostgreSQL's ReadyForQuery 'I'.
var readyIdle = []byte{'Z', 0, 0, 0, 5, 'I'}

// endsOpening reports whether a server chunk ends the opening exchange:
// PostgreSQL's first ReadyForQuery, or a MySQL packet that is an OK (the
// login's answer; the greeting starts with the protocol version, 10).
func (s *session) endsOpening(chunk []byte) bool {
	if s.r.proto == fastpath.PostgreSQL {
		return bytes.HasSuffix(chunk, readyIdle)
	}
	return len(chunk) >= 5 && int(chunk[0])|int(chunk[1])<<8|int(chunk[2])<<16 == len(chunk)-4 && chunk[4] == 0
}

func (s *session) pair() error {
	var raw [2]fastpath.Socket
	for i, c := range s.conns {
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		raw[i] = rc
	}
	p, err := s.r.k.Pair(raw[0], raw[1], s.r.proto)
	if err != nil {
		return err
	}
	s.p = p
	if err := p.Resume(); err != nil && !errors.Is(err, fastpath.ErrNotQuiet) {
		return err
	}
	return nil
}

// end passes side from's end of stream on, after the bytes before it.
func (s *session) end(from int, dst *net.TCPConn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.p.Drained(ctx, from); err != nil {
			return err
		}
	}
	return dst.CloseWrite()
}

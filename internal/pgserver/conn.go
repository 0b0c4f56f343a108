package pgserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/linger"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// ConnError wraps a failure of the client connection itself: a write
// that failed or a message that could not be read. It ends the session
// instead of being reported to the client.
type ConnError struct{ Err error }

func (e *ConnError) Error() string { return "pgserver: connection: " + e.Err.Error() }
func (e *ConnError) Unwrap() error { return e.Err }

// flushThreshold is how many bytes of output WriteMessage buffers before
// writing them to the client.
const flushThreshold = 64 << 10

// maxIdleOut is the largest output buffer kept between flushes, in bytes.
const maxIdleOut = 1 << 20

// Conn is the server's side of one client connection. The server and,
// while one of its methods runs, the session's Handler use it; it is not
// safe for concurrent use.
//
// Output is buffered: Send and WriteMessage append, Flush writes. The
// Backend encodes into its own buffer and moves it to out on drain, so
// messages keep their order whichever way they were added.
type Conn struct {
	nc  net.Conn
	be  *pgproto3.Backend
	cfg *Config

	out     []byte // encoded messages not yet written
	pending bool   // messages wait in be's buffer
}

// outWriter appends what the Backend flushes to the connection's output.
type outWriter struct{ c *Conn }

func (w outWriter) Write(p []byte) (int, error) {
	w.c.out = append(w.c.out, p...)
	return len(p), nil
}

func newConn(nc net.Conn, cfg *Config) *Conn {
	c := &Conn{nc: nc, cfg: cfg}
	c.be = pgproto3.NewBackend(nc, outWriter{c})
	c.be.SetMaxBodyLen(cfg.maxMessage())
	return c
}

// RemoteAddr returns the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Send buffers a message for the client.
func (c *Conn) Send(m pgproto3.BackendMessage) {
	c.be.Send(m)
	c.pending = true
}

// drain moves messages buffered in the Backend to out.
func (c *Conn) drain() error {
	if !c.pending {
		return nil
	}
	c.pending = false
	if err := c.be.Flush(); err != nil {
		return &ConnError{err}
	}
	return nil
}

// Flush writes buffered messages to the client. Its errors are
// *ConnError.
func (c *Conn) Flush() error {
	if err := c.drain(); err != nil {
		return err
	}
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.nc.Write(c.out)
	c.out = c.out[:0]
	if cap(c.out) > maxIdleOut {
		c.out = nil
	}
	if err != nil {
		return &ConnError{err}
	}
	return nil
}

// WriteMessage appends a message of type t whose body body appends to
// dst, without an intermediate message value: the path for DataRow and
// CopyData, the bulk of any result. If body fails the message is dropped
// and its error returned. Output is flushed once 64 KiB are buffered.
func (c *Conn) WriteMessage(t byte, body func(dst []byte) ([]byte, error)) error {
	if err := c.drain(); err != nil {
		return err
	}
	start := len(c.out)
	out, err := body(append(c.out, t, 0, 0, 0, 0))
	if err != nil {
		c.out = c.out[:start]
		return err
	}
	binary.BigEndian.PutUint32(out[start+1:], uint32(len(out)-start-1))
	c.out = out
	if len(c.out) >= flushThreshold {
		return c.Flush()
	}
	return nil
}

// Receive reads the next client message; it is valid until the next
// Receive. A message longer than Config.MaxMessage is answered with FATAL
// 54000, and the rest of it drained (package linger), before the error
// is returned, so the client learns why the connection ends. Its errors
// are *ConnError.
func (c *Conn) Receive(ctx context.Context) (pgproto3.FrontendMessage, error) {
	msg, err := c.be.Receive()
	if err == nil {
		return msg, nil
	}
	var tooLong *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &tooLong) {
		c.fatal(sqlstate.ProgramLimitExceeded, fmt.Sprintf("message of %d bytes exceeds the limit of %d bytes", tooLong.ActualBodyLen, tooLong.MaxExpectedBodyLen))
		linger.Drain(ctx, c.nc, c.cfg.clock(), int64(tooLong.ActualBodyLen), lingerTimeout)
	}
	return nil, &ConnError{err}
}

// fatal sends a FATAL error and flushes it.
func (c *Conn) fatal(code, msg string) {
	c.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
	c.Flush()
}

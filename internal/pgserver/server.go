package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// DefaultMaxMessage is the message size limit when Config.MaxMessage is
// 0, in bytes.
const DefaultMaxMessage = 64 << 20

// lingerTimeout bounds how long a connection ended mid-message keeps
// reading what the client still sends, so the client can read the FATAL
// error instead of having its write reset.
const lingerTimeout = 5 * time.Second

// Config configures Serve. It is read, never written, by Serve, so one
// Config may serve many connections at once.
type Config struct {
	Auth Auth
	// MaxMessage bounds a client message body, in bytes; a message
	// announcing more ends the connection with FATAL 54000. 0 means
	// DefaultMaxMessage.
	MaxMessage int
	// AuthTimeout bounds the startup and authentication exchange, as a
	// socket deadline on the wall clock. 0 means no bound.
	AuthTimeout time.Duration
	// Clock times the drain after an over-limit message; nil means
	// clock.Real.
	Clock clock.Clock
}

func (c *Config) maxMessage() int {
	if c.MaxMessage > 0 {
		return c.MaxMessage
	}
	return DefaultMaxMessage
}

func (c *Config) clock() clock.Clock {
	if c.Clock == nil {
		return clock.Real{}
	}
	return c.Clock
}

// Startup is a client's startup packet, as Serve hands it to the Backend.
type Startup struct {
	User string
	// Params are the packet's parameters (user, database, options,
	// application_name, ...), protocol extensions (_pq_.*) excluded.
	Params map[string]string
}

// Key is a session's cancel key, sent as BackendKeyData and matched
// against CancelRequests.
type Key struct {
	ProcessID uint32
	Secret    []byte // 4 bytes in protocol 3.0
}

// Param is a ParameterStatus to report.
type Param struct{ Name, Value string }

// Session is what a Backend opens for an authenticated client.
type Session struct {
	Handler Handler
	Key     Key
	// Params are reported with ParameterStatus, in order, after
	// AuthenticationOk.
	Params []Param
}

// Backend is the application behind the server: it admits clients,
// opens their sessions and routes cancel requests. Serve calls it from
// many connections' goroutines at once.
type Backend interface {
	// Check vets a startup packet before authentication; an error ends
	// the connection with it as FATAL.
	Check(st *Startup) error
	// Open opens the session of an authenticated client; c carries the
	// session's output and, for COPY FROM STDIN, its input. An error
	// ends the connection with it as FATAL.
	Open(ctx context.Context, c *Conn, st *Startup) (*Session, error)
	// Cancel handles a CancelRequest. The key is the client's claim:
	// Cancel must check it against the live sessions' keys and ignore a
	// mismatch, as PostgreSQL does.
	Cancel(key Key)
}

// Serve serves the PostgreSQL protocol on nc until the client leaves,
// the connection fails or ctx ends; it does not close nc. It returns nil
// after Terminate, ErrCancelRequest for a cancel connection,
// ErrAuthFailed when authentication failed, and otherwise the error that
// ended the connection (a *ConnError for I/O: io.EOF when the client
// hung up).
func Serve(ctx context.Context, nc net.Conn, cfg *Config, b Backend) error {
	c := newConn(nc, cfg)
	if cfg.AuthTimeout > 0 {
		nc.SetDeadline(clock.SocketDeadline(cfg.AuthTimeout))
	}
	st, err := c.startup(ctx, b)
	if err != nil {
		return err
	}
	if err := c.authenticate(ctx, &cfg.Auth, st.User); err != nil {
		return err
	}
	sess, err := b.Open(ctx, c, st)
	if err != nil {
		c.Send(fatalResponse(err))
		c.Flush()
		return err
	}
	defer sess.Handler.End()
	if cfg.AuthTimeout > 0 {
		nc.SetDeadline(time.Time{})
	}
	c.Send(&pgproto3.AuthenticationOk{})
	for _, p := range sess.Params {
		c.Send(&pgproto3.ParameterStatus{Name: p.Name, Value: p.Value})
	}
	c.Send(&pgproto3.BackendKeyData{ProcessID: sess.Key.ProcessID, SecretKey: sess.Key.Secret})
	c.Send(&pgproto3.ReadyForQuery{TxStatus: sess.Handler.TxStatus()})
	if err := c.Flush(); err != nil {
		return err
	}
	return c.loop(ctx, sess.Handler)
}

// startup reads the startup packet, declining SSL and GSS encryption and
// passing a CancelRequest to b.
func (c *Conn) startup(ctx context.Context, b Backend) (*Startup, error) {
	for {
		msg, err := c.be.ReceiveStartupMessage()
		if err != nil {
			return nil, &ConnError{err}
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return nil, &ConnError{err}
			}
		case *pgproto3.CancelRequest:
			b.Cancel(Key{ProcessID: m.ProcessID, Secret: append([]byte(nil), m.SecretKey...)})
			return nil, ErrCancelRequest
		case *pgproto3.StartupMessage:
			return c.admit(m, b)
		}
	}
}

// admit negotiates the protocol version and vets the startup packet.
func (c *Conn) admit(m *pgproto3.StartupMessage, b Backend) (*Startup, error) {
	st := &Startup{User: m.Parameters["user"], Params: map[string]string{}}
	// Clients asking for a newer minor version or for protocol
	// extensions are served as plain 3.0.
	var unknown []string
	for k, v := range m.Parameters {
		if strings.HasPrefix(k, "_pq_.") {
			unknown = append(unknown, k)
		} else {
			st.Params[k] = v
		}
	}
	if m.ProtocolVersion != pgproto3.ProtocolVersion30 || len(unknown) > 0 {
		sort.Strings(unknown)
		c.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknown})
	}
	if st.User == "" {
		c.fatal(sqlstate.InvalidAuthorizationSpecification, "no PostgreSQL user name specified in startup packet")
		return nil, ErrAuthFailed
	}
	if err := b.Check(st); err != nil {
		c.Send(fatalResponse(err))
		c.Flush()
		return nil, fmt.Errorf("pgserver: startup refused: %w", err)
	}
	return st, nil
}

// errUnexpected answers a message the server does not take at this
// point.
func errUnexpected(msg pgproto3.FrontendMessage) error {
	return &Error{Code: sqlstate.ProtocolViolation, Message: fmt.Sprintf("unexpected message %T", msg)}
}

// loop serves messages until Terminate or a connection error.
func (c *Conn) loop(ctx context.Context, h Handler) error {
	skip := false // an extended-protocol error: discard until Sync
	for {
		msg, err := c.Receive(ctx)
		if err != nil {
			var ce *ConnError
			if errors.As(err, &ce) && !isIOError(ce.Err) {
				// A message that does not decode: the stream cannot be
				// trusted further.
				c.fatal(sqlstate.ProtocolViolation, "invalid frontend message: "+ce.Err.Error())
			}
			return err
		}
		switch msg.(type) {
		case *pgproto3.Terminate:
			return nil
		case *pgproto3.Sync:
			skip = false
			h.Sync()
			c.Send(&pgproto3.ReadyForQuery{TxStatus: h.TxStatus()})
			err = c.Flush()
		case *pgproto3.Flush:
			err = c.Flush()
		case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
			// Left over from a COPY FROM STDIN that failed.
		default:
			if !skip {
				skip, err = c.command(ctx, h, msg)
			}
		}
		if err != nil {
			return err
		}
	}
}

// command serves a message other than Sync, Flush, Terminate and COPY
// data. skip reports an extended-protocol error, after which messages
// are discarded until Sync.
func (c *Conn) command(ctx context.Context, h Handler, msg pgproto3.FrontendMessage) (skip bool, err error) {
	switch m := msg.(type) {
	case *pgproto3.Query:
		if err = h.Query(ctx, m.String); err != nil && !isConnError(err) {
			c.Send(h.Error(err))
			err = nil
		}
		if err == nil {
			c.Send(&pgproto3.ReadyForQuery{TxStatus: h.TxStatus()})
			err = c.Flush()
		}
	case *pgproto3.FunctionCall:
		c.Send(h.Error(&Error{Code: sqlstate.FeatureNotSupported, Message: "the function call protocol is not supported"}))
		c.Send(&pgproto3.ReadyForQuery{TxStatus: h.TxStatus()})
		err = c.Flush()
	default:
		if err = c.extended(ctx, h, msg); err != nil && !isConnError(err) {
			c.Send(h.Error(err))
			return true, c.Flush()
		}
	}
	return false, err
}

// extended dispatches a message of the extended query protocol.
func (c *Conn) extended(ctx context.Context, h Handler, msg pgproto3.FrontendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.Parse:
		return h.Parse(ctx, m)
	case *pgproto3.Bind:
		return h.Bind(ctx, m)
	case *pgproto3.Describe:
		return h.Describe(ctx, m)
	case *pgproto3.Execute:
		return h.Execute(ctx, m)
	case *pgproto3.Close:
		return h.Close(ctx, m)
	}
	return errUnexpected(msg)
}

// isIOError reports whether a receive error is the connection's rather
// than a malformed message's.
func isIOError(err error) bool {
	var tooLong *pgproto3.ExceededMaxBodyLenErr
	var opErr *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &opErr) || errors.As(err, &tooLong)
}

func isConnError(err error) bool {
	var ce *ConnError
	return errors.As(err, &ce)
}

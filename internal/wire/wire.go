package wire

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/session"
)

// ErrHandled is returned by a front end's Open when the connection was
// served entirely during the opening exchange (a PostgreSQL CancelRequest)
// and is not a session. The proxy closes it quietly.
var ErrHandled = errors.New("connection handled during the opening exchange")

// Register opens the session in the registry. A front end calls it once,
// when the client has said who it is (PostgreSQL StartupMessage, MySQL
// HandshakeResponse) and before dialling upstream, and records the
// identity with Session.SetIdentity.
type Register func() *session.Session

// Observer watches one direction of a session's bytes.
type Observer interface {
	// Observe is called with each chunk, in order, before it is forwarded.
	// It must not retain p after returning.
	Observe(p []byte) error
}

// Replayer is implemented by an Observer or a Rewriter that can be shown
// chunks after they passed (the kernel's fast path relays a session's
// bytes and user space reads them from its journal later). After
// ReplayAt(at), what the chunks it is shown begin or end is stamped at,
// on its clock's time line, instead of that clock's now, until ReplayAt
// is called with the zero time. It is called by the goroutine that
// shows it the chunks.
type Replayer interface {
	ReplayAt(at time.Time)
}

// Remainder is implemented by a down-direction Observer that can tell
// where the server's message in flight ends. When an administrator
// terminates a session, the down pump forwards the rest of that message
// before the protocol's error, so the client never reads the error as
// the tail of a torn message.
type Remainder interface {
	// Remaining returns how many of the server's next bytes to observe
	// before asking again: the rest of the message in flight, or of its
	// header; 0 at a message boundary. ok is false when the stream is
	// malformed and has no boundary. It is called by the down pump only,
	// between chunks.
	Remaining() (n int, ok bool)
}

// Nop observes nothing.
type Nop struct{}

// Observe does nothing.
func (Nop) Observe([]byte) error { return nil }

// Dialer connects to the route's upstream.
type Dialer func(ctx context.Context) (net.Conn, error)

// Network returns the network of an upstream address for net.Dial: "unix"
// for an absolute path (a Unix socket, as PostgreSQL's
// /var/run/postgresql/.s.PGSQL.5432), "tcp" for host:port.
func Network(addr string) string {
	if strings.HasPrefix(addr, "/") {
		return "unix"
	}
	return "tcp"
}

// Conn is a session after the opening exchange, ready for relaying.
type Conn struct {
	Session  *session.Session // as returned by Register
	Client   net.Conn         // the client side; a *tls.Conn when TLS was terminated
	Upstream net.Conn         // the server side
	Up       Observer         // client to server bytes; nil means Nop
	Down     Observer         // server to client bytes; nil means Nop
	// Buffered holds client bytes the front end read past the opening
	// exchange; the proxy forwards them upstream (through Up) first.
	Buffered []byte
	// Close, if set, is called once when the session ends, after both
	// pumps have stopped.
	Close func()
	// InternalError, if set, returns the protocol's message telling the
	// client that sluice ended the session for an internal error (a
	// PostgreSQL ErrorResponse FATAL XX000, a MySQL ERR 1105). The proxy
	// calls it once, after both pumps have stopped; nil sends nothing.
	InternalError func(msg string) []byte
	// Inject, if set, is where the front end's own answers to the client
	// come from (see Injector): the proxy sends them through the down
	// pump, in order with the server's bytes.
	Inject Injector
	// Terminated, if set, returns the protocol's message telling the
	// client that sluice ended its session for reason: an administrator
	// (a PostgreSQL ErrorResponse FATAL 57P01, a MySQL ERR 1927), or idle
	// in a transaction past its pool's idle_in_transaction (FATAL 25P03,
	// MySQL ERR 1927 saying so). The proxy calls it once, after both
	// pumps have stopped; nil sends nothing.
	Terminated func(reason session.EndReason) []byte
	// Sockets, if set, is where the front end's observers read the state
	// of the session's sockets (TCP_INFO) from: the proxy moves it along
	// when it takes the descriptors away from Client and Upstream (its
	// event loop) and when it gives them back.
	Sockets *Sockets
}

// Sockets holds a session's two sockets as the proxy holds them now, for
// reading their kernel state. Safe for concurrent use.
type Sockets struct {
	mu               sync.Mutex
	client, upstream rawconn.Controller // guarded by mu; nil: no socket to read
}

// NewSockets returns the sockets of client and upstream
// (rawconn.ControllerOf).
func NewSockets(client, upstream net.Conn) *Sockets {
	return &Sockets{client: rawconn.ControllerOf(client), upstream: rawconn.ControllerOf(upstream)}
}

// Set moves the sockets: the proxy holds their descriptors elsewhere now.
func (s *Sockets) Set(client, upstream rawconn.Controller) {
	s.mu.Lock()
	s.client, s.upstream = client, upstream
	s.mu.Unlock()
}

// RTT returns the kernel RTT of the client and upstream sockets
// (rawconn.RTTOf).
func (s *Sockets) RTT() (client, upstream time.Duration) {
	s.mu.Lock()
	c, u := s.client, s.upstream
	s.mu.Unlock()
	return rawconn.RTTOf(c), rawconn.RTTOf(u)
}

// Fatal ends a session with a protocol error the client can read.
type Fatal struct {
	Err   error
	Reply []byte // bytes to send to the client before closing; may be nil
}

func (f *Fatal) Error() string { return f.Err.Error() }
func (f *Fatal) Unwrap() error { return f.Err }

package pg

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/opt"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// Defaults for zero Options fields.
const (
	DefaultMaxMessage     = 1 << 30 // PostgreSQL's own limit, bytes
	DefaultMaxSQL         = 4096    // bytes
	DefaultDialTimeout    = 5 * time.Second
	DefaultStartupTimeout = 30 * time.Second
)

// KeyLookup finds the session that registered a cancel key.
// *session.Registry implements it.
type KeyLookup interface {
	ByCancelKey(key string) *session.Session
}

// Coordinators finds the coordinator session a shard connection of a
// distributed query works for, from the application_name of its
// startup (see the package documentation); nil when it names none.
// *wlm.Runtime implements it. It must be safe for concurrent use and
// must not block.
type Coordinators interface {
	Coordinator(app string) *session.Session
}

// Options configure a Frontend. The zero value of each field is a usable
// default.
type Options struct {
	Clock  clock.Clock  // nil: clock.Real
	Logger *slog.Logger // nil: discard
	// Upstream is the upstream address ("host:port"). It names the
	// upstream in error messages, and cancel connections dial it; when
	// empty they use the route's Dialer instead.
	Upstream string
	// TLS is the client-facing TLS configuration. nil answers 'N' to
	// SSLRequest; otherwise sluice answers 'S' and terminates TLS, and
	// also accepts direct TLS (a ClientHello as the first byte), which
	// like PostgreSQL it requires to negotiate ALPN "postgresql".
	TLS *tls.Config
	// UpstreamTLS, when set, makes sluice send SSLRequest to the upstream
	// and speak TLS to it (cancel connections too). A ServerName is taken
	// from Upstream when the config has none. nil is plain TCP.
	UpstreamTLS *tls.Config
	// MaxMessage is the largest message length (the length word's value)
	// accepted in either direction after startup; 0 is 1 GiB. A client
	// message over it ends the session with SQLSTATE 08P01.
	MaxMessage int
	// MaxSQL is how many bytes of SQL text a statement record keeps; 0 is
	// 4096. Longer text is cut at a UTF-8 boundary.
	MaxSQL int
	// DialTimeout bounds a cancel connection (dial, TLS, request); 0 is 5 s.
	DialTimeout time.Duration
	// StartupTimeout bounds the whole opening exchange, from the first
	// byte read to the StartupMessage forwarded upstream; 0 is 30 s.
	StartupTimeout time.Duration
	// Keys finds the session a client CancelRequest is for; nil drops
	// every CancelRequest.
	Keys KeyLookup
	// Forward, when set, inspects the simple Query statements of the
	// sessions whose user it names and rewrites the CREATE/ALTER USER
	// ... RESOURCE POOL statements it takes (see forward.go). nil, and
	// every other session, relays the client's bytes untouched.
	Forward wire.Forwarder
	// Admit, when set, holds the first request of each transaction until
	// the Admitter lets its statement run (see admit.go). nil, and the
	// sessions of users Forward names, are never held.
	Admit wire.Admitter
	// WhatIf, when set, counts every client session's round trips and
	// transactions (see whatif.go); nil counts nothing.
	WhatIf *whatif.Table
	// Coordinators, when set, links each client session whose
	// application_name names a coordinator session to it
	// (session.Session.Link); nil links none.
	Coordinators Coordinators
}

// Frontend is the PostgreSQL front end of a route. It is safe for
// concurrent use; each Open serves one client connection.
type Frontend struct {
	clk            clock.Clock
	log            *slog.Logger
	upstream       string
	tls            *tls.Config // SSLRequest path
	directTLS      *tls.Config // direct TLS path: tls plus ALPN "postgresql"
	upTLS          *tls.Config
	maxMessage     int
	maxSQL         int
	dialTimeout    time.Duration
	startupTimeout time.Duration
	keys           KeyLookup
	forward        wire.Forwarder
	admit          wire.Admitter
	whatIf         *whatif.Table // nil counts nothing
	coords         Coordinators
}

// New returns a front end configured by o.
func New(o Options) *Frontend {
	f := &Frontend{
		clk:            cmp.Or[clock.Clock](o.Clock, clock.Real{}),
		log:            cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
		upstream:       o.Upstream,
		tls:            o.TLS,
		upTLS:          o.UpstreamTLS,
		maxMessage:     min(opt.Positive(o.MaxMessage, DefaultMaxMessage), math.MaxInt32),
		maxSQL:         opt.Positive(o.MaxSQL, DefaultMaxSQL),
		dialTimeout:    opt.Positive(o.DialTimeout, DefaultDialTimeout),
		startupTimeout: opt.Positive(o.StartupTimeout, DefaultStartupTimeout),
		keys:           o.Keys,
		forward:        o.Forward,
		admit:          o.Admit,
		whatIf:         o.WhatIf,
		coords:         o.Coordinators,
	}
	if f.tls != nil {
		f.directTLS = f.tls
		if !slices.Contains(f.tls.NextProtos, alpnPostgres) {
			f.directTLS = f.tls.Clone()
			f.directTLS.NextProtos = append(f.directTLS.NextProtos, alpnPostgres)
		}
	}
	if f.upTLS != nil && f.upTLS.ServerName == "" && !f.upTLS.InsecureSkipVerify {
		if host, _, err := net.SplitHostPort(f.upstream); err == nil {
			f.upTLS = f.upTLS.Clone()
			f.upTLS.ServerName = host
		}
	}
	return f
}

// alpnPostgres is the ALPN protocol name of PostgreSQL over direct TLS.
const alpnPostgres = "postgresql"

// errStartupTimeout is the cause when the opening exchange takes longer
// than Options.StartupTimeout.
var errStartupTimeout = errors.New("startup exchange timed out")

// Open runs the opening exchange on client: it answers SSLRequest ('S'
// and a TLS handshake when Options.TLS is set, else 'N') and
// GSSENCRequest ('N'), serves a CancelRequest (returning wire.ErrHandled),
// or reads the StartupMessage, calls register and records the identity,
// dials the upstream (with SSLRequest and TLS when Options.UpstreamTLS is
// set) and forwards the StartupMessage unchanged. Authentication and
// everything after it flow through the returned Conn's observers.
//
// A malformed startup packet gets a FATAL ErrorResponse with SQLSTATE
// 08P01, a failed upstream connection one with 08006 naming the upstream;
// Open then returns an error, having closed the session it registered
// (if any) and the upstream connection. Closing client is the caller's.
// The whole exchange is bounded by Options.StartupTimeout and by ctx.
func (f *Frontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	ctx, cancel := clock.WithTimeout(ctx, f.clk, f.startupTimeout, errStartupTimeout)
	defer cancel()
	stopClient := context.AfterFunc(ctx, func() { _ = client.SetDeadline(clock.LongAgo) })
	defer stopClient()

	conn, pkt, err := f.startup(ctx, client)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
		}
		return wire.Conn{}, err
	}
	if pkt.kind == packetCancel {
		f.forwardCancel(ctx, pkt.key)
		return wire.Conn{}, wire.ErrHandled
	}

	sess := register()
	if sess == nil {
		return wire.Conn{}, errors.New("pg: register returned no session")
	}
	app := pkt.param("application_name")
	sess.SetIdentity(pkt.user(), pkt.database(), app)
	kind := pkt.sessionKind()
	sess.SetKind(kind)
	linked := false
	if f.coords != nil && kind == session.KindClient && app != "" {
		if c := f.coords.Coordinator(app); c != nil && sess.Link(c) {
			linked = true
			f.log.Debug("pg: shard connection linked to its coordinator", "session", sess.ID, "coordinator", c.ID, "coordinator_route", c.Info.Route)
		}
	}

	up, err := f.connect(ctx, dial, pkt.raw)
	if err != nil {
		msg := fmt.Sprintf("sluice: could not connect to upstream %s: %s", f.upstreamName(), reason(ctx, err))
		_, _ = conn.Write(errorResponse(severityFatal, sqlstate.ConnectionFailure, msg))
		sess.Close(f.clk.Now())
		return wire.Conn{}, fmt.Errorf("pg: connect to upstream %s: %w", f.upstreamName(), err)
	}
	if !stopClient() {
		// The deadline fired (or is firing) while the exchange finished.
		_ = up.Close()
		sess.Close(f.clk.Now())
		return wire.Conn{}, fmt.Errorf("pg: opening exchange: %w", context.Cause(ctx))
	}

	forwards := f.forward != nil && f.forward.Forwards(sess.User())
	var gate *wire.Gate
	if !forwards && kind == session.KindClient && !linked {
		// A replication connection is never held: its START_REPLICATION
		// or BASE_BACKUP is one statement as long as the stream, and
		// holding it would stall a standby and keep a slot for good.
		// Nor is a shard connection: its statements run inside the
		// coordinator's, which holds a slot already; waiting for a
		// second one could deadlock the distributed statement.
		gate = wire.NewGate(f.admit)
	}
	upObs, downObs := f.observers(sess, func(k []byte) { f.installKey(sess, k, dial, gate) })
	upObs.physical = kind == session.KindReplication
	wc := wire.Conn{Session: sess, Client: conn, Upstream: up, Up: upObs, Down: downObs, InternalError: f.OpenFailure,
		Terminated: func(reason session.EndReason) []byte {
			if !downObs.atBoundary() {
				// The server's bytes stopped inside a message: an error
				// after them would be read as the rest of it. Close
				// without one rather than tear the frame.
				return nil
			}
			return terminated(reason)
		}}
	if forwards {
		wc.Up, wc.Down = forwarding(f.forward, f.log, sess, upObs, downObs)
	} else if gate != nil {
		gate.SetPeer(conn)
		gate.SetFarewell(farewell)
		gate.Track(sess, f.clk)
		inj := &injector{s: downObs}
		adm := &admitUp{Admitting: wire.Admitting{Gate: gate}, obs: upObs, inj: inj}
		upObs.adm = adm
		downObs.gate, downObs.inj = gate, inj
		wc.Up, wc.Inject, wc.Close = adm, inj, gate.Close
		if f.keys == nil {
			// No CancelRequest finds the session, but the console's
			// cancel of a held statement still ends its wait.
			sess.SetCanceler(gate.Canceler(nil))
		}
	}
	if _, clientTLS := conn.(*tls.Conn); f.upTLS != nil && !clientTLS {
		wc.Down = newSASLFilter(wc.Down)
	}
	f.watch(&wc, kind, upObs, downObs)
	return wc, nil
}

// OpenFailure returns the ErrorResponse (FATAL, SQLSTATE XX000) that tells
// a client sluice ended its session for an internal error. A client reads
// it at any point of the opening exchange, and after it whenever the
// server's last message reached the client whole.
func (f *Frontend) OpenFailure(msg string) []byte {
	return errorResponse(severityFatal, sqlstate.InternalError, msg)
}

// terminated returns the ErrorResponse PostgreSQL sends a session that
// pg_terminate_backend ends: FATAL 57P01 admin_shutdown.
func terminated(reason session.EndReason) []byte {
	if reason == session.EndIdleInTransaction {
		return errorResponse(severityFatal, sqlstate.IdleInTransactionSessionTimeout, MsgIdleInTransaction)
	}
	return errorResponse(severityFatal, sqlstate.AdminShutdown, "terminating connection due to administrator command")
}

// MsgIdleInTransaction is the message of the FATAL 25P03
// (idle_in_transaction_session_timeout) a session reads when it sat idle
// in a transaction, holding an admission slot, past its pool's
// idle_in_transaction: PostgreSQL's own for its
// idle_in_transaction_session_timeout.
const MsgIdleInTransaction = "terminating connection due to idle-in-transaction timeout"

// observers returns the two observers of a session. onKey receives the
// payload of the server's BackendKeyData.
func (f *Frontend) observers(sess *session.Session, onKey func(key []byte)) (*clientObserver, *serverObserver) {
	t := &tracker{}
	return &clientObserver{fr: framer{max: f.maxMessage}, t: t, sess: sess, clk: clock.NewReplay(f.clk), maxSQL: f.maxSQL},
		&serverObserver{fr: framer{max: f.maxMessage}, t: t, clk: clock.NewReplay(f.clk), onKey: onKey, rows: -1}
}

// connect dials the upstream, negotiates TLS when configured and sends the
// startup packet. The connection's I/O is bounded by ctx while it runs.
func (f *Frontend) connect(ctx context.Context, dial wire.Dialer, startup []byte) (net.Conn, error) {
	up, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = up.SetDeadline(clock.LongAgo) })
	if f.upTLS != nil {
		tc, err := f.startTLS(ctx, up)
		if err != nil {
			stop()
			_ = up.Close()
			return nil, err
		}
		up = tc
	}
	if _, err := up.Write(startup); err != nil {
		stop()
		_ = up.Close()
		return nil, err
	}
	if !stop() {
		_ = up.Close()
		return nil, context.Cause(ctx)
	}
	return up, nil
}

// startTLS asks the upstream for TLS with SSLRequest and runs the client
// handshake, as libpq does with sslmode=require or stricter.
func (f *Frontend) startTLS(ctx context.Context, up net.Conn) (net.Conn, error) {
	if _, err := up.Write(sslRequestPacket); err != nil {
		return nil, err
	}
	var b [1]byte
	if _, err := io.ReadFull(up, b[:]); err != nil {
		return nil, fmt.Errorf("read answer to SSLRequest: %w", err)
	}
	if b[0] != 'S' {
		return nil, fmt.Errorf("upstream refused TLS (answered %s to SSLRequest)", typeName(b[0]))
	}
	tc := tls.Client(up, f.upTLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// upstreamName names the upstream in messages.
func (f *Frontend) upstreamName() string {
	if f.upstream == "" {
		return "(route upstream)"
	}
	return f.upstream
}

// reason renders a connection error the way a database user expects
// ("connection refused", "i/o timeout"), without Go's operation prefix.
func reason(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return context.Cause(ctx).Error()
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

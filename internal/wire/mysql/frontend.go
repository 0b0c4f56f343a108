package mysql

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/opt"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// Options configure a Frontend. The zero value of each field is usable.
type Options struct {
	Clock  clock.Clock  // statement times; nil means clock.Real
	Logger *slog.Logger // nil discards

	// Upstream is the upstream address, used in messages and by the
	// side connection that runs KILL QUERY.
	Upstream string

	// TLS, if set, lets clients upgrade to TLS, which sluice terminates:
	// the greeting the client sees offers CLIENT_SSL. If nil the greeting
	// does not offer it, and a client that asks anyway gets an ERR.
	TLS *tls.Config
	// UpstreamTLS, if set, makes sluice upgrade every upstream connection
	// to TLS (the upstream must offer it); nil means plain.
	UpstreamTLS *tls.Config

	// KillUser and KillPassword are the credentials of the side
	// connection that runs KILL QUERY to cancel a statement. With no
	// KillUser, statements on this route cannot be cancelled.
	KillUser, KillPassword string

	// MaxPacket is the largest logical packet accepted from a client, in
	// bytes; larger ones end the session with ER_NET_PACKET_TOO_LARGE.
	// 0 means 1 GiB, the ceiling of max_allowed_packet.
	MaxPacket int
	// MaxSQL is how many bytes of SQL text are kept per statement; 0
	// means 4096.
	MaxSQL int
	// ConnectTimeout bounds reaching the upstream: dialling it and
	// reading its greeting, and later the TLS handshake with it when
	// UpstreamTLS is set; 0 is 10 s. At the limit the client is told,
	// with an ERR naming the upstream. It also bounds the dial of the side
	// connection that runs KILL QUERY.
	ConnectTimeout time.Duration
	// StartupTimeout bounds the whole opening exchange, from the start of
	// Open until the client's handshake response is forwarded upstream
	// (with TLS on one leg only, until the server's OK or ERR that ends
	// authentication); 0 is 30 s. At the limit Open stops and returns an
	// error; the caller closes the client, Open the upstream. After it
	// the server's own connect_timeout bounds authentication.
	StartupTimeout time.Duration

	// Forward, when set, inspects the COM_QUERY statements of the
	// sessions whose user it names and rewrites the CREATE/ALTER USER
	// ... RESOURCE POOL statements it takes (see forward.go). nil, and
	// every other session, relays the client's bytes untouched.
	Forward wire.Forwarder
	// Admit, when set, holds the first command of each transaction until
	// the Admitter lets its statement run (see admit.go). nil, and the
	// sessions of users Forward names, are never held.
	Admit wire.Admitter
	// WhatIf, when set, counts every client session's round trips and
	// transactions (see whatif.go); nil counts nothing.
	WhatIf *whatif.Table
}

// Defaults for zero Options fields.
const (
	DefaultStartupTimeout = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second

	defaultMaxPacket = 1 << 30
	defaultMaxSQL    = 4096
)

// Limits of the opening exchange.
const (
	// maxHandshake bounds a packet from the upstream during the opening
	// exchange (its greeting, authentication packets), in bytes.
	maxHandshake = 1 << 20
	// maxLoginPacket bounds a packet from the client before
	// authentication completes (its handshake response with connection
	// attributes, authentication data that Open relays), in bytes.
	// Clients send a few hundred bytes (the mariadb CLI 221 with its
	// connection attributes, go-sql-driver 183); a larger packet gets
	// an ERR (ER_NET_PACKET_TOO_LARGE) and ends the session, as the
	// server refuses one over its max_allowed_packet.
	maxLoginPacket = 16 << 10
)

// Causes of a timed-out opening exchange.
var (
	errStartupTimeout = errors.New("opening exchange timed out (startup_timeout)")
	errConnectTimeout = errors.New("upstream did not answer in time (connect_timeout)")
)

// Frontend opens MySQL and MariaDB sessions for one route. It is safe for
// concurrent use.
type Frontend struct {
	o     Options
	log   *slog.Logger
	gates gates // the sessions under admission, by upstream connection id (KILL QUERY)
}

// New returns a Frontend with options o.
func New(o Options) *Frontend {
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.Real{})
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	o.MaxPacket = opt.Positive(o.MaxPacket, defaultMaxPacket)
	o.MaxSQL = opt.Positive(o.MaxSQL, defaultMaxSQL)
	o.StartupTimeout = opt.Positive(o.StartupTimeout, DefaultStartupTimeout)
	o.ConnectTimeout = opt.Positive(o.ConnectTimeout, DefaultConnectTimeout)
	return &Frontend{o: o, log: o.Logger}
}

// CanCancel reports whether statements on this route can be cancelled
// (KillUser is set). The workload manager refuses abort rules for pools
// used on a route that cannot.
func (f *Frontend) CanCancel() bool { return f.o.KillUser != "" }

// Open runs the opening exchange with a client that has just connected,
// and returns the session ready for relaying.
//
// It dials the upstream and forwards its greeting with the capability
// bits patched (see patchGreeting), reads the client's handshake
// response (terminating TLS first if the client asks and TLS is
// configured), registers the session with the user and database, and
// forwards the response, upgrading the upstream to TLS first if
// configured. The authentication exchange that follows is left to the
// relay and the observers, unless TLS was used on one side only: then
// the sequence ids of the two sides differ by one, and Open relays the
// exchange itself, renumbering, until the server's OK or ERR.
//
// If the upstream cannot be reached within Options.ConnectTimeout, the
// client gets a greeting from sluice and, after its handshake response,
// ERR 9001 naming the upstream; Open returns the error. The exchange is
// bounded by Options.StartupTimeout and by ctx; a client packet over
// maxLoginPacket gets ERR 1153 and ends it.
func (f *Frontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	ctx, cancel := clock.WithTimeout(ctx, f.o.Clock, f.o.StartupTimeout, errStartupTimeout)
	defer cancel()
	var guard ioGuard
	guard.add(client)
	stop := context.AfterFunc(ctx, guard.interrupt)
	wc, err := f.open(ctx, client, register, dial, &guard)
	if !stop() {
		// ctx ended, perhaps as the exchange finished: deadlines may be set.
		if err == nil {
			wc.Upstream.Close()
			if wc.Session != nil {
				wc.Session.Close(f.o.Clock.Now())
			}
			return wire.Conn{}, fmt.Errorf("mysql: opening exchange: %w", context.Cause(ctx))
		}
		return wire.Conn{}, withCause(ctx, err)
	}
	return wc, err
}

func (f *Frontend) open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer, guard *ioGuard) (wc wire.Conn, err error) {
	up, gp, err := f.connect(ctx, dial)
	if err != nil {
		f.refuse(ctx, client, erUpstream, sqlstate.MySQLGeneral,
			fmt.Sprintf("sluice: could not connect to upstream %s: %s", f.o.Upstream, reason(err)))
		return wire.Conn{}, fmt.Errorf("mysql: upstream %s: %w", f.o.Upstream, err)
	}
	guard.add(up)
	var sess *session.Session
	defer func() {
		if err != nil {
			up.Close()
			if sess != nil {
				sess.Close(f.o.Clock.Now())
			}
		}
	}()

	// The upstream's greeting.
	if len(gp) > 4 && gp[4] == 0xff { // the upstream refuses (too many connections, host blocked, ...)
		client.Write(gp)
		return wire.Conn{}, fmt.Errorf("mysql: upstream %s refused the connection: error %d", f.o.Upstream, parseERR(gp[4:]))
	}
	g, err := parseGreeting(gp[4:])
	if err != nil {
		f.refuse(ctx, client, erHandshake, sqlstate.MySQLCommunication,
			fmt.Sprintf("sluice: malformed greeting from upstream %s", f.o.Upstream))
		return wire.Conn{}, fmt.Errorf("mysql: greeting from upstream %s: %w", f.o.Upstream, err)
	}
	if f.o.UpstreamTLS != nil && g.caps&capSSL == 0 {
		f.refuse(ctx, client, erUpstream, sqlstate.MySQLGeneral,
			fmt.Sprintf("sluice: upstream %s does not offer TLS", f.o.Upstream))
		return wire.Conn{}, fmt.Errorf("mysql: upstream %s does not offer TLS", f.o.Upstream)
	}
	serverCaps, serverExt := patchGreeting(gp[4:], g, f.o.TLS != nil)
	if _, err := client.Write(gp); err != nil {
		return wire.Conn{}, fmt.Errorf("mysql: send greeting to client: %w", err)
	}

	// The client's handshake response.
	client, rp, r, err := f.readResponse(ctx, client)
	if err != nil {
		return wire.Conn{}, err
	}
	clientSeq := rp[3]
	if r.caps&(capCompress|capZstdCompression) != 0 {
		return wire.Conn{}, f.reject(client, clientSeq+1, erHandshake, sqlstate.MySQLCommunication,
			"sluice: compression is not supported on this route")
	}

	// The upstream leg.
	upSeq := uint8(1)
	if f.o.UpstreamTLS != nil {
		if _, err := up.Write(sslRequest(rp[4:], 1)); err != nil {
			return wire.Conn{}, fmt.Errorf("mysql: send SSL request to upstream: %w", err)
		}
		tc, err := f.upstreamTLS(ctx, up)
		if err != nil {
			msg := fmt.Sprintf("sluice: TLS with upstream %s failed: %s", f.o.Upstream, reason(err))
			return wire.Conn{}, f.reject(client, clientSeq+1, erUpstream, sqlstate.MySQLGeneral, msg)
		}
		up, upSeq = tc, 2
	}
	setClientSSL(rp[4:], f.o.UpstreamTLS != nil)
	rp[3] = upSeq

	sess = register()
	sess.SetIdentity(r.user, r.database, r.program)
	caps := serverCaps & r.caps
	var ext uint32
	if caps&capMariaDBClientMySQL == 0 {
		ext = serverExt & r.ext
	}
	offset := int(upSeq) - int(clientSeq) // upstream sequence id minus client's
	upObs, downObs := newObservers(connConfig{
		sess: sess, clock: f.o.Clock, log: f.log,
		maxSQL: f.o.MaxSQL, maxPacket: int64(f.o.MaxPacket),
		caps: caps, ext: ext,
		auth: offset == 0, authSeq: upSeq,
	})
	if _, err := up.Write(rp); err != nil {
		return wire.Conn{}, fmt.Errorf("mysql: send handshake response to upstream: %w", err)
	}
	forward := f.o.Forward != nil && f.o.Forward.Forwards(r.user)
	var buffered []byte
	authed := false
	if offset != 0 {
		authUp := up
		var sniff *authSniffer // notes whether the login succeeded
		if forward {
			sniff = &authSniffer{Conn: up}
			authUp = sniff
		}
		buffered, err = relayAuth(client, authUp, offset)
		if err != nil {
			if tl := (*tooLargeError)(nil); errors.As(err, &tl) {
				client.Write(tooLargeReply(tl))
			}
			return wire.Conn{}, fmt.Errorf("mysql: authentication: %w", err)
		}
		authed = sniff != nil && sniff.accepted()
	}
	var upRelay, downRelay wire.Observer = upObs, downObs
	if forward {
		upRelay, downRelay = forwarding(f.o.Forward, f.log, sess, upObs, downObs, authed)
	}
	var gate *wire.Gate
	if !forward {
		gate = wire.NewGate(f.o.Admit)
	}
	var canceler session.Canceler
	if f.o.KillUser != "" {
		canceler = &killer{o: &f.o, log: f.log, dial: dial, sess: sess, connID: g.connID}
	}
	var inj *injector
	var closeConn func()
	if gate != nil {
		gate.SetPeer(client)
		gate.SetFarewell(farewell)
		gate.Track(sess, f.o.Clock)
		inj = &injector{d: downObs}
		adm := &admitUp{Admitting: wire.Admitting{Gate: gate}, u: upObs, inj: inj, route: &f.gates}
		upObs.adm = adm
		downObs.gate, downObs.inj = gate, inj
		upRelay = adm
		f.gates.add(g.connID, gate)
		id := g.connID
		closeConn = func() {
			f.gates.remove(id, gate)
			gate.Close()
		}
		canceler = gate.Canceler(canceler)
	}
	if canceler != nil {
		sess.SetCanceler(canceler)
	}
	socks := wire.NewSockets(client, up)
	if wi := openWhatIf(f.o.WhatIf, sess, f.o.Clock.Now(), socks); wi != nil {
		upObs.c.wi = wi
		prev := closeConn
		closeConn = func() {
			wi.Close(f.o.Clock.Now())
			if prev != nil {
				prev()
			}
		}
	}
	f.log.Debug("mysql: session opened", "session", sess.ID, "user", r.user,
		"database", r.database, "upstream_connection", g.connID, "server", g.version)
	return wire.Conn{
		Session:  sess,
		Client:   client,
		Upstream: up,
		Up:       upRelay,
		Down:     downRelay,
		Buffered: buffered,
		Inject:   injectorOrNil(inj),
		Close:    closeConn,
		Sockets:  socks,
		// The answer to the client's last command: its sequence id + 1.
		InternalError: func(msg string) []byte { return errPacket(upObs.f.lastSeq+1, erUnknown, sqlstate.MySQLGeneral, msg) },
		// At a packet boundary, after the server's latest packet when an
		// answer is under way (a result set cut short, as MariaDB ends a
		// killed one); inside a packet, nothing: the connection closes
		// rather than tear the frame.
		Terminated: func(reason session.EndReason) []byte {
			seq, ok := downObs.errSeq(upObs.f.lastSeq + 1)
			if !ok {
				return nil
			}
			if reason == session.EndIdleInTransaction {
				return errPacket(seq, erConnectionKilled, sqlstate.MySQLInterrupted, MsgIdleInTransaction)
			}
			return errPacket(seq, erConnectionKilled, sqlstate.MySQLInterrupted, "Connection was killed")
		},
	}, nil
}

// MsgIdleInTransaction is the message of the ERR 1927
// (ER_CONNECTION_KILLED) a session reads when it sat idle in a
// transaction, holding an admission slot, past its pool's
// idle_in_transaction.
const MsgIdleInTransaction = "Connection was killed: idle in transaction past the resource pool's idle_in_transaction"

// connect dials the upstream and reads its greeting, within
// Options.ConnectTimeout. On error the connection is closed.
func (f *Frontend) connect(ctx context.Context, dial wire.Dialer) (net.Conn, []byte, error) {
	ctx, cancel := clock.WithTimeout(ctx, f.o.Clock, f.o.ConnectTimeout, errConnectTimeout)
	defer cancel()
	up, err := dial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("dial: %w", withCause(ctx, err))
	}
	stop := context.AfterFunc(ctx, func() { up.SetDeadline(clock.LongAgo) })
	gp, err := readPacket(up, maxHandshake)
	if !stop() { // the deadline is set, or about to be
		if err == nil {
			err = errors.New("greeting read too late")
		}
		err = withCause(ctx, err)
	}
	if err != nil {
		up.Close()
		return nil, nil, fmt.Errorf("read greeting: %w", err)
	}
	return up, gp, nil
}

// upstreamTLS runs the TLS handshake with the upstream, within
// Options.ConnectTimeout.
func (f *Frontend) upstreamTLS(ctx context.Context, up net.Conn) (*tls.Conn, error) {
	ctx, cancel := clock.WithTimeout(ctx, f.o.Clock, f.o.ConnectTimeout, errConnectTimeout)
	defer cancel()
	tc := tls.Client(up, f.o.UpstreamTLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, withCause(ctx, err)
	}
	return tc, nil
}

// withCause adds to err why ctx ended, if it has and err does not say.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// reason says in a few words why reaching the upstream failed, for the
// client: the timeout that expired, or the system's word for a network
// error ("connection refused"), without the addresses the message
// names already.
func reason(err error) string {
	for _, cause := range []error{errConnectTimeout, errStartupTimeout} {
		if errors.Is(err, cause) {
			return cause.Error()
		}
	}
	var se *os.SyscallError
	var oe *net.OpError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the upstream closed the connection"
	case errors.As(err, &se):
		return se.Err.Error()
	case errors.As(err, &oe) && oe.Err != nil:
		return oe.Err.Error()
	}
	return err.Error()
}

// readLogin reads a packet the client sends before authentication
// completes. One over maxLoginPacket is not read past its header: the
// client gets ER_NET_PACKET_TOO_LARGE.
func readLogin(client net.Conn) ([]byte, error) {
	p, err := readPacket(client, maxLoginPacket)
	if tl := (*tooLargeError)(nil); errors.As(err, &tl) {
		client.Write(tooLargeReply(tl))
	}
	return p, err
}

// tooLargeReply is the ERR a client gets for a packet over the limit
// before authentication completes.
func tooLargeReply(tl *tooLargeError) []byte {
	return errPacket(tl.seq+1, erNetPacketTooBig, sqlstate.MySQLCommunication, fmt.Sprintf(
		"sluice: packet of %d bytes before authentication; at most %d accepted", tl.size, tl.max))
}

// readResponse reads the client's handshake response, terminating TLS
// first if the client sends an SSLRequest. It returns the client
// connection to use from then on (a *tls.Conn after TLS), the packet with
// its header, and its decoding. On a protocol error it answers the client
// with an ERR.
func (f *Frontend) readResponse(ctx context.Context, client net.Conn) (net.Conn, []byte, response, error) {
	rp, err := readLogin(client)
	if err != nil {
		return client, nil, response{}, fmt.Errorf("mysql: read handshake response: %w", err)
	}
	r, err := parseResponse(rp[4:])
	if err == nil && r.sslOnly {
		if f.o.TLS == nil {
			return client, nil, r, f.reject(client, rp[3]+1, erHandshake, sqlstate.MySQLCommunication,
				"sluice: TLS is not configured for this route")
		}
		tc := tls.Server(client, f.o.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			return client, nil, r, fmt.Errorf("mysql: TLS with client: %w", err)
		}
		client = tc
		if rp, err = readLogin(client); err != nil {
			return client, nil, r, fmt.Errorf("mysql: read handshake response: %w", err)
		}
		r, err = parseResponse(rp[4:])
		if err == nil && r.sslOnly {
			err = errors.New("second SSL request")
		}
	}
	if err != nil {
		msg := "sluice: malformed handshake response"
		if errors.Is(err, errProtocol320) {
			msg = "sluice: clients must speak protocol 4.1"
		}
		return client, nil, r, f.reject(client, rp[3]+1, erHandshake, sqlstate.MySQLCommunication, msg)
	}
	return client, rp, r, nil
}

// reject sends the client an ERR packet and returns the error it names.
func (f *Frontend) reject(client net.Conn, seq uint8, code uint16, state, msg string) error {
	client.Write(errPacket(seq, code, state, msg))
	return errors.New("mysql: " + msg)
}

// refuse greets the client as a server would, waits for its handshake
// response, and answers it with an ERR carrying msg, numbered after the
// response (sequence id 2, or 3 after TLS), so the client shows why the
// session could not open. Errors are ignored: the session is failing
// anyway.
func (f *Frontend) refuse(ctx context.Context, client net.Conn, code uint16, state, msg string) {
	var scramble [20]byte
	rand.Read(scramble[:])
	for i, c := range scramble { // printable, never NUL
		scramble[i] = 0x21 + c%94
	}
	if _, err := client.Write(ownGreeting(scramble, f.o.TLS != nil)); err != nil {
		return
	}
	rp, err := readLogin(client)
	if err != nil {
		return
	}
	if r, err := parseResponse(rp[4:]); err == nil && r.sslOnly && f.o.TLS != nil {
		tc := tls.Server(client, f.o.TLS)
		if tc.HandshakeContext(ctx) != nil {
			return
		}
		client = tc
		if rp, err = readLogin(client); err != nil {
			return
		}
	}
	client.Write(errPacket(rp[3]+1, code, state, msg))
}

// ioGuard interrupts blocking I/O on the connections of an opening
// exchange when its context ends.
type ioGuard struct {
	mu    sync.Mutex
	conns []net.Conn // guarded by mu
	done  bool       // guarded by mu
}

func (g *ioGuard) add(c net.Conn) {
	g.mu.Lock()
	g.conns = append(g.conns, c)
	if g.done {
		c.SetDeadline(clock.LongAgo)
	}
	g.mu.Unlock()
}

func (g *ioGuard) interrupt() {
	g.mu.Lock()
	g.done = true
	for _, c := range g.conns {
		c.SetDeadline(clock.LongAgo)
	}
	g.mu.Unlock()
}

// injectorOrNil keeps a nil *injector from becoming a non-nil
// wire.Injector.
func injectorOrNil(j *injector) wire.Injector {
	if j == nil {
		return nil
	}
	return j
}

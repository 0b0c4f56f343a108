package mysql

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
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
	// DialTimeout bounds dialling the upstream; 0 means only the context
	// passed to Open bounds it.
	DialTimeout time.Duration

	// Forward, when set, inspects the COM_QUERY statements of the
	// sessions whose user it names and rewrites the CREATE/ALTER USER
	// ... RESOURCE POOL statements it takes (see forward.go). nil, and
	// every other session, relays the client's bytes untouched.
	Forward wire.Forwarder
}

// Defaults.
const (
	defaultMaxPacket = 1 << 30
	defaultMaxSQL    = 4096
	// maxHandshake bounds a greeting or handshake response (connection
	// attributes included) read during the opening exchange.
	maxHandshake = 1 << 20
)

// Frontend opens MySQL and MariaDB sessions for one route. It is safe for
// concurrent use.
type Frontend struct {
	o   Options
	log *slog.Logger
}

// New returns a Frontend with options o.
func New(o Options) *Frontend {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxPacket <= 0 {
		o.MaxPacket = defaultMaxPacket
	}
	if o.MaxSQL <= 0 {
		o.MaxSQL = defaultMaxSQL
	}
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
// If the upstream cannot be reached, the client gets a greeting from
// sluice and, after its handshake response, ERR 2003 naming the
// upstream; Open returns the error. ctx bounds the whole exchange.
func (f *Frontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	var guard ioGuard
	guard.add(client)
	stop := context.AfterFunc(ctx, guard.interrupt)
	wc, err := f.open(ctx, client, register, dial, &guard)
	if !stop() && err == nil {
		// ctx ended while the exchange finished: deadlines may be set.
		wc.Upstream.Close()
		if wc.Session != nil {
			wc.Session.Close(f.o.Clock.Now())
		}
		return wire.Conn{}, fmt.Errorf("mysql: opening exchange: %w", context.Cause(ctx))
	}
	return wc, err
}

func (f *Frontend) open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer, guard *ioGuard) (wc wire.Conn, err error) {
	dctx := ctx
	if f.o.DialTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, f.o.DialTimeout)
		defer cancel()
	}
	up, err := dial(dctx)
	if err != nil {
		err = fmt.Errorf("mysql: dial upstream %s: %w", f.o.Upstream, err)
		f.refuse(ctx, client, crConnHostError, "HY000",
			fmt.Sprintf("sluice: could not connect to upstream %s: %v", f.o.Upstream, err))
		return wire.Conn{}, err
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
	gp, err := readPacket(up, maxHandshake)
	if err != nil {
		return wire.Conn{}, fmt.Errorf("mysql: read greeting from upstream %s: %w", f.o.Upstream, err)
	}
	if len(gp) > 4 && gp[4] == 0xff { // the upstream refuses (too many connections, host blocked, ...)
		client.Write(gp)
		return wire.Conn{}, fmt.Errorf("mysql: upstream %s refused the connection: error %d", f.o.Upstream, parseERR(gp[4:]))
	}
	g, err := parseGreeting(gp[4:])
	if err != nil {
		f.refuse(ctx, client, erHandshake, "08S01",
			fmt.Sprintf("sluice: malformed greeting from upstream %s", f.o.Upstream))
		return wire.Conn{}, fmt.Errorf("mysql: greeting from upstream %s: %w", f.o.Upstream, err)
	}
	if f.o.UpstreamTLS != nil && g.caps&capSSL == 0 {
		f.refuse(ctx, client, crSSLConnError, "HY000",
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
		return wire.Conn{}, f.reject(client, clientSeq+1, erHandshake, "08S01",
			"sluice: compression is not supported on this route")
	}

	// The upstream leg.
	upSeq := uint8(1)
	if f.o.UpstreamTLS != nil {
		if _, err := up.Write(sslRequest(rp[4:], 1)); err != nil {
			return wire.Conn{}, fmt.Errorf("mysql: send SSL request to upstream: %w", err)
		}
		tc := tls.Client(up, f.o.UpstreamTLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			msg := fmt.Sprintf("sluice: TLS with upstream %s failed: %v", f.o.Upstream, err)
			return wire.Conn{}, f.reject(client, clientSeq+1, crSSLConnError, "HY000", msg)
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
			return wire.Conn{}, fmt.Errorf("mysql: authentication: %w", err)
		}
		authed = sniff != nil && sniff.accepted()
	}
	var upRelay, downRelay wire.Observer = upObs, downObs
	if forward {
		upRelay, downRelay = forwarding(f.o.Forward, f.log, sess, upObs, downObs, authed)
	}
	if f.o.KillUser != "" {
		sess.SetCanceler(&killer{o: &f.o, log: f.log, dial: dial, sess: sess, connID: g.connID})
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
	}, nil
}

// readResponse reads the client's handshake response, terminating TLS
// first if the client sends an SSLRequest. It returns the client
// connection to use from then on (a *tls.Conn after TLS), the packet with
// its header, and its decoding. On a protocol error it answers the client
// with an ERR.
func (f *Frontend) readResponse(ctx context.Context, client net.Conn) (net.Conn, []byte, response, error) {
	rp, err := readPacket(client, maxHandshake)
	if err != nil {
		return client, nil, response{}, fmt.Errorf("mysql: read handshake response: %w", err)
	}
	r, err := parseResponse(rp[4:])
	if err == nil && r.sslOnly {
		if f.o.TLS == nil {
			return client, nil, r, f.reject(client, rp[3]+1, erHandshake, "08S01",
				"sluice: TLS is not configured for this route")
		}
		tc := tls.Server(client, f.o.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			return client, nil, r, fmt.Errorf("mysql: TLS with client: %w", err)
		}
		client = tc
		if rp, err = readPacket(client, maxHandshake); err != nil {
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
		return client, nil, r, f.reject(client, rp[3]+1, erHandshake, "08S01", msg)
	}
	return client, rp, r, nil
}

// reject sends the client an ERR packet and returns the error it names.
func (f *Frontend) reject(client net.Conn, seq uint8, code uint16, state, msg string) error {
	client.Write(errPacket(seq, code, state, msg))
	return errors.New("mysql: " + msg)
}

// refuse greets the client as a server would, waits for its handshake
// response, and answers it with an ERR carrying msg, so the client shows
// why the session could not open. Errors are ignored: the session is
// failing anyway.
func (f *Frontend) refuse(ctx context.Context, client net.Conn, code uint16, state, msg string) {
	var scramble [20]byte
	rand.Read(scramble[:])
	for i, c := range scramble { // printable, never NUL
		scramble[i] = 0x21 + c%94
	}
	if _, err := client.Write(ownGreeting(scramble, f.o.TLS != nil)); err != nil {
		return
	}
	rp, err := readPacket(client, maxHandshake)
	if err != nil {
		return
	}
	if r, err := parseResponse(rp[4:]); err == nil && r.sslOnly && f.o.TLS != nil {
		tc := tls.Server(client, f.o.TLS)
		if tc.HandshakeContext(ctx) != nil {
			return
		}
		client = tc
		if rp, err = readPacket(client, maxHandshake); err != nil {
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
		c.SetDeadline(aLongTimeAgo)
	}
	g.mu.Unlock()
}

func (g *ioGuard) interrupt() {
	g.mu.Lock()
	g.done = true
	for _, c := range g.conns {
		c.SetDeadline(aLongTimeAgo)
	}
	g.mu.Unlock()
}

// aLongTimeAgo is a deadline in the past: it makes blocked I/O return.
var aLongTimeAgo = time.Unix(1, 0)

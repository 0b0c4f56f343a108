package mysql

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wire"
)

// Data-port forwarding. For a session whose user Options.Forward names,
// the client observer is also a wire.Rewriter: every COM_QUERY the
// client sends in the command phase, once the server has accepted its
// login, is shown whole to the Forwarder, and when it takes the
// statement the packet is replaced by a COM_QUERY of the rest, with the
// same sequence id and its own length.
//
//	COM_QUERY: int<3> length, int<1> sequence id, 0x03, [query attributes], sql
//
// A command is held back only while it is incomplete, and only up to
// wire.MaxForwardQuery bytes; longer ones, and every other packet (prepared
// statements, LOCAL INFILE data, authentication), pass untouched. The
// Forwarder's rest translates PASSWORD 'x' to IDENTIFIED BY 'x'. When
// the Forwarder refuses a statement, sluice sends instead
//
//	SIGNAL SQLSTATE '42704' SET MESSAGE_TEXT = '...'
//
// which MariaDB runs outside a stored program: the client gets the
// server's own ERR packet (error 1644, ER_SIGNAL_EXCEPTION, with that
// SQLSTATE and message) with the sequence ids the exchange expects, and
// the session goes on. The user is checked again at each command, so
// COM_CHANGE_USER to a user the Forwarder does not name stops it.

// forwarding returns the observers of a session whose statements fwd
// inspects. authed says the login has already succeeded (Open relayed
// it); otherwise the returned server observer watches for the server's
// OK.
func forwarding(fwd wire.Forwarder, log *slog.Logger, sess *session.Session, up *upObserver, down *downObserver, authed bool) (*forwardUp, wire.Observer) {
	fu := &forwardUp{obs: up, authed: new(atomic.Bool), Forwarding: wire.Forwarding{
		Fwd: fwd, Log: log, Sess: sess, Fallback: sqlstate.MySQLGeneral, Raise: signalStatement,
	}}
	fu.hold = wire.Holdback{HeaderLen: 4, Header: fu.header, Inspect: fu.command, Start: fu.start}
	if authed {
		fu.authed.Store(true)
		return fu, down
	}
	return fu, &forwardDown{obs: down, authed: fu.authed}
}

// forwardUp observes the client's bytes with the ordinary observer and
// rewrites its COM_QUERY packets. It observes inside Rewrite, packet by
// packet, so that the phase it reads at the start of each packet is the
// one the ordinary observer has reached there. It is used by the client
// pump only.
type forwardUp struct {
	wire.Forwarding
	obs    *upObserver
	authed *atomic.Bool // the server has accepted the login

	hold     wire.Holdback // the framing: holds back the commands to inspect
	seen     int           // bytes of the current chunk observed
	cont     bool          // the next physical packet continues the current logical one
	eligible bool          // the current logical packet may be inspected
	msg      []byte        // the replacement packet
}

var _ wire.Rewriter = (*forwardUp)(nil)

// Observe implements wire.Observer. It does nothing: Rewrite, which the
// proxy calls right after it with the same bytes, observes them.
func (f *forwardUp) Observe(p []byte) error { return nil }

// Rewrite implements wire.Rewriter. Chunks that hold no command of
// interest are returned as they are.
func (f *forwardUp) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	if len(p) == 0 {
		return f.hold.Rewrite(ctx, p)
	}
	f.seen = 0
	out, err := f.hold.Rewrite(ctx, p)
	if err == nil {
		err = f.obs.Observe(p[f.seen:])
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// start is called where a packet header begins, with the part of the
// chunk before it. When a logical packet starts there, it brings the
// ordinary observer up to here, then decides with the phase it is in.
func (f *forwardUp) start(before []byte) error {
	if f.cont {
		return nil
	}
	err := f.obs.Observe(before[f.seen:])
	f.seen = len(before)
	if err != nil {
		return err
	}
	f.eligible = f.mayInspect()
	return nil
}

// header decides what to do with the physical packet whose header is
// hdr: its whole size, and whether to inspect it: it is the only
// physical packet of an eligible logical packet, not empty, and at most
// wire.MaxForwardQuery bytes.
func (f *forwardUp) header(hdr []byte) (size int, inspect bool) {
	length := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	first := !f.cont
	f.cont = length == maxPayload
	size = 4 + length
	return size, first && f.eligible && !f.cont && length != 0 && size <= wire.MaxForwardQuery
}

// mayInspect reports whether the logical packet starting now may be a
// statement to show the Forwarder: the login has succeeded, the client
// is in the command phase, and the session's user is still one the
// Forwarder names.
func (f *forwardUp) mayInspect() bool {
	if !f.authed.Load() {
		return false
	}
	c := f.obs.c
	c.mu.Lock()
	ph := c.phase
	c.mu.Unlock()
	return ph == phCommand && f.Fwd.Forwards(f.Sess.User())
}

// command shows the statement of a COM_QUERY packet pkt (header
// included) to the Forwarder. It returns the packet to send instead, or
// false to send pkt as it is.
func (f *forwardUp) command(ctx context.Context, pkt []byte) ([]byte, bool) {
	payload := pkt[4:]
	if len(payload) == 0 || payload[0] != comQuery {
		return nil, false
	}
	body := payload[1:]
	sql := body
	if f.obs.c.caps&capQueryAttributes != 0 {
		if sql = skipQueryAttributes(body); sql == nil {
			return nil, false
		}
	}
	attrs := body[:len(body)-len(sql)]
	rest, took := f.Statement(ctx, string(sql))
	if !took {
		return nil, false
	}
	n := 1 + len(attrs) + len(rest)
	if n >= maxPayload {
		// Not reachable from a packet under wire.MaxForwardQuery; send the
		// original, which the server refuses as a syntax error.
		return nil, false
	}
	f.msg = append(f.msg[:0], byte(n), byte(n>>8), byte(n>>16), pkt[3], comQuery)
	f.msg = append(f.msg, attrs...)
	f.msg = append(f.msg, rest...)
	return f.msg, true
}

// signalStatement returns a statement that makes MySQL or MariaDB raise
// an error with SQLSTATE code and message msg. The message is quoted for
// the default sql_mode (backslashes escape).
func signalStatement(code, msg string) string {
	q := strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(msg)
	return "SIGNAL SQLSTATE '" + code + "' SET MESSAGE_TEXT = '" + q + "'"
}

// forwardDown observes the server's bytes with the ordinary observer and
// notes the OK that ends the login (or the ERR that fails it), after
// which it only calls the ordinary observer. It is used by the server
// pump only.
type forwardDown struct {
	obs    *downObserver
	authed *atomic.Bool

	done  bool // the login has ended
	leads packetLeads
}

// Observe implements wire.Observer.
func (d *forwardDown) Observe(p []byte) error {
	if err := d.obs.Observe(p); err != nil {
		return err
	}
	if !d.done {
		d.leads.scan(p, func(c byte) bool {
			switch c {
			case 0x00: // OK
				d.authed.Store(true)
				d.done = true
			case 0xff: // ERR: the login failed
				d.done = true
			}
			return d.done
		})
	}
	return nil
}

// packetLeads follows a stream of MySQL packets across chunks and finds
// the first payload byte of each logical packet (continuation packets of
// 16 MiB ones are part of the same logical packet; an empty packet has
// no first byte). The zero value is at the start of a packet.
type packetLeads struct {
	hdr   [4]byte
	hn    int  // bytes in hdr
	rem   int  // payload bytes of the current physical packet still to skip
	first bool // the next payload byte is the first of a logical packet
	cont  bool // the next physical packet continues the current logical one
}

// scan follows b, calling lead with each first payload byte; it stops
// early, mid-stream, when lead returns true.
func (l *packetLeads) scan(b []byte, lead func(c byte) (stop bool)) {
	for len(b) > 0 {
		if l.rem > 0 {
			if l.first {
				l.first = false
				if lead(b[0]) {
					return
				}
			}
			n := min(l.rem, len(b))
			l.rem -= n
			b = b[n:]
			continue
		}
		n := copy(l.hdr[l.hn:], b)
		l.hn += n
		b = b[n:]
		if l.hn < 4 {
			return
		}
		l.hn = 0
		length := int(l.hdr[0]) | int(l.hdr[1])<<8 | int(l.hdr[2])<<16
		l.first, l.cont, l.rem = !l.cont, length == maxPayload, length
	}
}

// atBoundary reports whether the stream so far ends a logical packet
// that had a first byte.
func (l *packetLeads) atBoundary() bool { return l.rem == 0 && l.hn == 0 && !l.first }

// authSniffer passes an upstream connection through while Open relays
// the login, and notes the first byte of each logical packet the server
// sends, so that after the exchange it can tell an OK from an ERR.
type authSniffer struct {
	net.Conn
	leads packetLeads
	last  byte // first payload byte of the latest logical packet
}

func (s *authSniffer) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	s.leads.scan(p[:n], func(c byte) bool { s.last = c; return false })
	return n, err
}

// accepted reports whether the last packet the server sent was an OK.
func (s *authSniffer) accepted() bool { return s.last == 0x00 && s.leads.atBoundary() }

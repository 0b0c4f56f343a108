package pg

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// The opening packets carry no type byte: a length word (counting itself)
// and a request code, which is either a protocol version (StartupMessage)
// or one of the magic numbers below.
//
//	SSLRequest:     int32 8, int32 80877103
//	GSSENCRequest:  int32 8, int32 80877104
//	CancelRequest:  int32 len, int32 80877102, int32 pid, byte[4..256] secret
//	StartupMessage: int32 len, int32 version, { string name, string value }, byte 0
const (
	codeCancelRequest = 80877102
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104

	// minStartupPacket and maxStartupPacket bound the length word;
	// 10000 is PostgreSQL's MAX_STARTUP_PACKET_LENGTH.
	minStartupPacket = 8
	maxStartupPacket = 10000

	// tlsHandshakeRecord is the first byte of a TLS ClientHello, which a
	// client using direct TLS sends instead of SSLRequest.
	tlsHandshakeRecord = 0x16
)

// sslRequestPacket is the SSLRequest sluice sends upstream.
var sslRequestPacket = func() []byte {
	b, _ := (&pgproto3.SSLRequest{}).Encode(nil)
	return b
}()

// packetKind says what an opening packet asks for.
type packetKind uint8

const (
	packetSSL packetKind = iota + 1
	packetGSSENC
	packetCancel
	packetStartup
)

// startupPacket is a decoded opening packet.
type startupPacket struct {
	kind    packetKind
	raw     []byte      // the whole packet, length word included
	version uint32      // packetStartup: protocol version, major<<16 | minor
	params  [][2]string // packetStartup: name/value pairs in order
	key     []byte      // packetCancel: pid and secret, as sent
}

// param returns a startup parameter, "" when absent.
func (p *startupPacket) param(name string) string {
	for _, kv := range p.params {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}

// user returns the user name the client logs in as.
func (p *startupPacket) user() string { return p.param("user") }

// database returns the database the server will use: the user name when
// none is given, except on a physical replication connection, which has
// none.
func (p *startupPacket) database() string {
	if db := p.param("database"); db != "" {
		return db
	}
	if p.sessionKind() == session.KindReplication {
		return ""
	}
	return p.user()
}

// sessionKind returns what the connection is for, from its replication
// parameter as the server reads it: exactly "database" is KindLogical; a
// true boolean (parseBool) is KindReplication; anything else (absent,
// false, a value the server refuses) is KindClient.
func (p *startupPacket) sessionKind() session.Kind {
	v := p.param("replication")
	if v == "database" {
		return session.KindLogical
	}
	if b, ok := parseBool(v); ok && b {
		return session.KindReplication
	}
	return session.KindClient
}

// parseBool reads a boolean as PostgreSQL's parse_bool does: in any case,
// no spaces, a prefix of "true", "false" or "yes", "no",
// "on", "off" (at least "of" for it), "1" or "0". ok is false for
// anything else.
func parseBool(v string) (b, ok bool) {
	v = strings.ToLower(v)
	if v == "" {
		return false, false
	}
	prefix := func(word string) bool { return strings.HasPrefix(word, v) }
	switch {
	case v == "1" || v == "on" || prefix("true") || prefix("yes"):
		return true, true
	case v == "0" || len(v) >= 2 && prefix("off") || prefix("false") || prefix("no"):
		return false, true
	}
	return false, false
}

// startupError is a malformed opening packet. Its message is sent to the
// client.
type startupError struct{ msg string }

func (e *startupError) Error() string { return e.msg }

// parseStartup decodes one opening packet, length word included. It never
// panics and never reads past raw.
func parseStartup(raw []byte) (startupPacket, error) {
	if len(raw) < minStartupPacket {
		return startupPacket{}, &startupError{fmt.Sprintf("invalid startup packet length %d: must be %d to %d bytes",
			len(raw), minStartupPacket, maxStartupPacket)}
	}
	if n := binary.BigEndian.Uint32(raw); int64(n) != int64(len(raw)) {
		return startupPacket{}, &startupError{fmt.Sprintf("startup packet length word %d does not match its %d bytes", n, len(raw))}
	}
	p := startupPacket{raw: raw}
	code := binary.BigEndian.Uint32(raw[4:])
	switch code {
	case codeSSLRequest, codeGSSENCRequest:
		if len(raw) != 8 {
			return startupPacket{}, &startupError{fmt.Sprintf("invalid length %d of SSLRequest or GSSENCRequest: must be 8 bytes", len(raw))}
		}
		p.kind = packetSSL
		if code == codeGSSENCRequest {
			p.kind = packetGSSENC
		}
		return p, nil
	case codeCancelRequest:
		if len(raw) < 16 || len(raw) > 12+maxSecret {
			return startupPacket{}, &startupError{fmt.Sprintf("invalid length %d of CancelRequest: must be 16 to %d bytes", len(raw), 12+maxSecret)}
		}
		p.kind, p.key = packetCancel, raw[8:]
		return p, nil
	}
	if major := code >> 16; major != 3 {
		return startupPacket{}, &startupError{fmt.Sprintf("unsupported frontend protocol %d.%d: sluice supports 3.x", major, code&0xffff)}
	}
	p.kind, p.version = packetStartup, code
	b := raw[8:]
	for {
		name, rest, ok := cstring(b)
		if !ok {
			return startupPacket{}, &startupError{"invalid startup packet layout: expected terminator as last byte"}
		}
		if len(name) == 0 {
			if len(rest) != 0 {
				return startupPacket{}, &startupError{"invalid startup packet layout: bytes after the terminator"}
			}
			return p, nil
		}
		value, rest, ok := cstring(rest)
		if !ok {
			return startupPacket{}, &startupError{fmt.Sprintf("invalid startup packet layout: parameter %q has no value", name)}
		}
		p.params = append(p.params, [2]string{string(name), string(value)})
		b = rest
	}
}

// startup reads opening packets until a StartupMessage or CancelRequest,
// answering SSLRequest and GSSENCRequest on the way. It returns the
// connection to keep talking on (TLS when negotiated). Malformed packets
// are answered with a FATAL ErrorResponse (08P01).
func (f *Frontend) startup(ctx context.Context, client net.Conn) (net.Conn, startupPacket, error) {
	conn := client
	secure := false
	for {
		raw, direct, err := readPacket(conn, !secure && f.tls != nil)
		if err != nil {
			var se *startupError
			if errors.As(err, &se) {
				_, _ = conn.Write(errorResponse(severityFatal, sqlstate.ProtocolViolation, "sluice: "+se.msg))
			}
			return nil, startupPacket{}, fmt.Errorf("pg: read startup packet: %w", err)
		}
		if direct {
			tc := tls.Server(&prefixConn{Conn: conn, prefix: []byte{tlsHandshakeRecord}}, f.directTLS)
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, startupPacket{}, fmt.Errorf("pg: direct TLS handshake: %w", err)
			}
			if tc.ConnectionState().NegotiatedProtocol != alpnPostgres {
				// As PostgreSQL: direct TLS must say it carries PostgreSQL,
				// so a TLS client of another protocol is not mistaken for one.
				msg := "direct TLS connection without ALPN protocol \"" + alpnPostgres + "\""
				_, _ = tc.Write(errorResponse(severityFatal, sqlstate.ProtocolViolation, "sluice: "+msg))
				return nil, startupPacket{}, fmt.Errorf("pg: %s", msg)
			}
			conn, secure = tc, true
			continue
		}
		pkt, err := parseStartup(raw)
		if err == nil && secure && pkt.kind == packetSSL {
			err = &startupError{"SSLRequest on a connection that is already encrypted"}
		}
		if err != nil {
			var se *startupError
			if errors.As(err, &se) {
				_, _ = conn.Write(errorResponse(severityFatal, sqlstate.ProtocolViolation, "sluice: "+se.msg))
			}
			return nil, startupPacket{}, fmt.Errorf("pg: startup packet: %w", err)
		}
		switch pkt.kind {
		case packetSSL:
			if f.tls == nil {
				if _, err := conn.Write([]byte{'N'}); err != nil {
					return nil, startupPacket{}, fmt.Errorf("pg: answer SSLRequest: %w", err)
				}
				continue
			}
			if _, err := conn.Write([]byte{'S'}); err != nil {
				return nil, startupPacket{}, fmt.Errorf("pg: answer SSLRequest: %w", err)
			}
			tc := tls.Server(conn, f.tls)
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, startupPacket{}, fmt.Errorf("pg: TLS handshake: %w", err)
			}
			conn, secure = tc, true
		case packetGSSENC:
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return nil, startupPacket{}, fmt.Errorf("pg: answer GSSENCRequest: %w", err)
			}
		default:
			return conn, pkt, nil
		}
	}
}

// readPacket reads one length-prefixed opening packet. With tlsOK, a
// first byte of 0x16 is a direct TLS ClientHello: direct is true and
// nothing past that byte has been read. Reads are exact, so nothing the
// client sent after the packet is consumed.
func readPacket(r io.Reader, tlsOK bool) (raw []byte, direct bool, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:1]); err != nil {
		return nil, false, err
	}
	if tlsOK && hdr[0] == tlsHandshakeRecord {
		return nil, true, nil
	}
	if _, err := io.ReadFull(r, hdr[1:]); err != nil {
		return nil, false, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < minStartupPacket || n > maxStartupPacket {
		return nil, false, &startupError{fmt.Sprintf("invalid startup packet length %d: must be %d to %d bytes",
			n, minStartupPacket, maxStartupPacket)}
	}
	raw = make([]byte, n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(r, raw[4:]); err != nil {
		return nil, false, err
	}
	return raw, false, nil
}

// prefixConn replays bytes already read before reading from Conn.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

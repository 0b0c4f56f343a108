package mysql

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Capability flags (CLIENT_*), the lower 32 bits.
const (
	capLongPassword         = 1 << 0 // MariaDB: CLIENT_MYSQL, clear when extended capabilities are used
	capFoundRows            = 1 << 1
	capLongFlag             = 1 << 2
	capConnectWithDB        = 1 << 3
	capCompress             = 1 << 5
	capLocalFiles           = 1 << 7
	capProtocol41           = 1 << 9
	capSSL                  = 1 << 11
	capTransactions         = 1 << 13
	capSecureConnection     = 1 << 15
	capMultiStatements      = 1 << 16
	capMultiResults         = 1 << 17
	capPSMultiResults       = 1 << 18
	capPluginAuth           = 1 << 19
	capConnectAttrs         = 1 << 20
	capPluginAuthLenenc     = 1 << 21
	capDeprecateEOF         = 1 << 24
	capOptionalMetadata     = 1 << 25 // MySQL: CLIENT_OPTIONAL_RESULTSET_METADATA
	capZstdCompression      = 1 << 26
	capQueryAttributes      = 1 << 27
	capMariaDBClientMySQL   = capLongPassword
	capsDroppedFromGreeting = capCompress | capZstdCompression
)

// MariaDB extended capabilities, bits 32 and up of the capability set,
// held here shifted down by 32.
const (
	extComMulti      = 1 << 1
	extCacheMetadata = 1 << 4
)

// Server status flags.
const (
	statusAutocommit   = 0x0002
	statusMoreResults  = 0x0008
	statusCursorExists = 0x0040
)

// greeting is the server's initial handshake packet (protocol 10).
type greeting struct {
	version string
	connID  uint32
	caps    uint32 // capability flags, both halves
	ext     uint32 // MariaDB extended capabilities; 0 unless caps lacks CLIENT_MYSQL
	status  uint16
	plugin  string

	capsAt  int // payload offset of the lower capability bytes
	upperAt int // payload offset of the upper capability bytes; -1 if absent
	extAt   int // payload offset of the MariaDB extended capabilities; -1 if absent
}

var errShortGreeting = errors.New("greeting too short")

// parseGreeting decodes a HandshakeV10 payload. It never panics.
func parseGreeting(p []byte) (greeting, error) {
	g := greeting{upperAt: -1, extAt: -1}
	if len(p) < 1 {
		return g, errShortGreeting
	}
	if p[0] != 10 {
		return g, fmt.Errorf("protocol version %d, 10 expected", p[0])
	}
	end := bytes.IndexByte(p[1:], 0)
	if end < 0 {
		return g, errors.New("greeting: unterminated server version")
	}
	g.version = string(p[1 : 1+end])
	pos := 1 + end + 1
	// thread id 4, scramble part 1 8, filler 1, capabilities (lower) 2.
	if len(p) < pos+15 {
		return g, errShortGreeting
	}
	g.connID = binary.LittleEndian.Uint32(p[pos:])
	pos += 4 + 8 + 1
	g.capsAt = pos
	g.caps = uint32(binary.LittleEndian.Uint16(p[pos:]))
	pos += 2
	// charset 1, status 2, capabilities (upper) 2, scramble length 1,
	// reserved 6, MariaDB extended capabilities (or reserved) 4.
	if len(p) < pos+16 {
		return g, nil // pre-4.1 servers stop here
	}
	g.status = binary.LittleEndian.Uint16(p[pos+1:])
	g.upperAt = pos + 3
	g.caps |= uint32(binary.LittleEndian.Uint16(p[pos+3:])) << 16
	scrambleLen := int(p[pos+5])
	g.extAt = pos + 12
	if g.caps&capMariaDBClientMySQL == 0 {
		g.ext = binary.LittleEndian.Uint32(p[g.extAt:])
	}
	pos += 16
	if g.caps&capSecureConnection != 0 {
		n := max(13, scrambleLen-8)
		if len(p) < pos+n {
			return g, errShortGreeting
		}
		pos += n
	}
	if g.caps&capPluginAuth != 0 && pos < len(p) {
		rest := p[pos:]
		if i := bytes.IndexByte(rest, 0); i >= 0 {
			rest = rest[:i]
		}
		g.plugin = string(rest)
	}
	return g, nil
}

// patchGreeting rewrites, in place, the capability bits of a greeting
// payload the client is allowed to see: CLIENT_SSL is offered exactly when
// sluice can terminate TLS, compression never (the observers read the
// uncompressed framing), nor MariaDB's COM_MULTI. It returns the
// capabilities as patched.
func patchGreeting(p []byte, g greeting, offerTLS bool) (caps, ext uint32) {
	caps = g.caps &^ capsDroppedFromGreeting
	if offerTLS {
		caps |= capSSL
	} else {
		caps &^= capSSL
	}
	binary.LittleEndian.PutUint16(p[g.capsAt:], uint16(caps))
	if g.upperAt >= 0 {
		binary.LittleEndian.PutUint16(p[g.upperAt:], uint16(caps>>16))
	} else {
		caps &= 0xffff
	}
	ext = g.ext
	if g.extAt >= 0 && g.caps&capMariaDBClientMySQL == 0 {
		ext &^= extComMulti
		binary.LittleEndian.PutUint32(p[g.extAt:], ext)
	}
	return caps, ext
}

// response is the client's HandshakeResponse41, or its SSLRequest prefix.
type response struct {
	caps      uint32
	maxPacket uint32
	charset   uint8
	ext       uint32 // MariaDB extended capabilities; 0 unless caps lacks CLIENT_MYSQL
	sslOnly   bool   // an SSLRequest: the 32-byte prefix with CLIENT_SSL set
	user      string
	database  string
	plugin    string
	program   string // connection attribute program_name, if sent
}

// responsePrefix is the length of the fixed part of HandshakeResponse41,
// which is also the whole SSLRequest.
const responsePrefix = 32

var errShortResponse = errors.New("handshake response too short")

// errProtocol320 is returned for a client that does not speak 4.1.
var errProtocol320 = errors.New("client does not speak protocol 4.1")

// parseResponse decodes a HandshakeResponse41 payload. It never panics.
func parseResponse(p []byte) (response, error) {
	var r response
	if len(p) < 4 {
		return r, errShortResponse
	}
	r.caps = binary.LittleEndian.Uint32(p)
	if r.caps&capProtocol41 == 0 {
		return r, errProtocol320
	}
	if len(p) < responsePrefix {
		return r, errShortResponse
	}
	r.maxPacket = binary.LittleEndian.Uint32(p[4:])
	r.charset = p[8]
	if r.caps&capMariaDBClientMySQL == 0 {
		r.ext = binary.LittleEndian.Uint32(p[28:])
	}
	if len(p) == responsePrefix && r.caps&capSSL != 0 {
		r.sslOnly = true
		return r, nil
	}
	rest := p[responsePrefix:]
	user, rest, ok := cstring(rest)
	if !ok {
		return r, errors.New("handshake response: unterminated user name")
	}
	r.user = string(user)
	// Auth response.
	switch {
	case r.caps&capPluginAuthLenenc != 0:
		n, k, ok := lenenc(rest)
		if !ok || uint64(len(rest)-k) < n {
			return r, errors.New("handshake response: truncated auth response")
		}
		rest = rest[k+int(n):]
	case r.caps&capSecureConnection != 0:
		if len(rest) < 1 || len(rest)-1 < int(rest[0]) {
			return r, errors.New("handshake response: truncated auth response")
		}
		rest = rest[1+int(rest[0]):]
	default:
		if _, rest, ok = cstring(rest); !ok {
			return r, errors.New("handshake response: unterminated auth response")
		}
	}
	if r.caps&capConnectWithDB != 0 && len(rest) > 0 {
		db, tail, ok := cstring(rest)
		if !ok {
			return r, errors.New("handshake response: unterminated database name")
		}
		r.database, rest = string(db), tail
	}
	if r.caps&capPluginAuth != 0 && len(rest) > 0 {
		pl, tail, ok := cstring(rest)
		if !ok { // some clients omit the terminator at the very end
			pl, tail = rest, nil
		}
		r.plugin, rest = string(pl), tail
	}
	if r.caps&capConnectAttrs != 0 && len(rest) > 0 {
		n, k, ok := lenenc(rest)
		if !ok || uint64(len(rest)-k) < n {
			return r, errors.New("handshake response: truncated connection attributes")
		}
		r.program = programName(rest[k : k+int(n)])
	}
	return r, nil
}

// programName returns the program_name connection attribute, or "".
func programName(attrs []byte) string {
	for len(attrs) > 0 {
		k, rest, ok := lenencString(attrs)
		if !ok {
			return ""
		}
		v, rest, ok := lenencString(rest)
		if !ok {
			return ""
		}
		if string(k) == "program_name" {
			return string(v)
		}
		attrs = rest
	}
	return ""
}

// lenencString splits a length-encoded string off the front of b.
func lenencString(b []byte) (s, rest []byte, ok bool) {
	n, k, ok := lenenc(b)
	if !ok || uint64(len(b)-k) < n {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// cstring splits a NUL-terminated string off the front of b.
func cstring(b []byte) (s, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

// setClientSSL sets or clears CLIENT_SSL in a HandshakeResponse41 payload.
func setClientSSL(p []byte, on bool) {
	c := binary.LittleEndian.Uint32(p)
	if on {
		c |= capSSL
	} else {
		c &^= capSSL
	}
	binary.LittleEndian.PutUint32(p, c)
}

// sslRequest builds the SSLRequest sluice sends the upstream for a client
// whose response is resp (payload): its 32-byte prefix with CLIENT_SSL.
func sslRequest(resp []byte, seq uint8) []byte {
	b := packet(seq, resp[:responsePrefix])
	setClientSSL(b[4:], true)
	return b
}

// Capabilities sluice offers when it greets a client itself (the
// upstream is unreachable and all it will say is why).
const ownCaps = capLongPassword | capFoundRows | capLongFlag | capConnectWithDB |
	capProtocol41 | capTransactions | capSecureConnection | capMultiStatements |
	capMultiResults | capPluginAuth | capPluginAuthLenenc | capConnectAttrs

// ownGreeting builds a HandshakeV10 packet (header included) with a
// mysql_native_password scramble of 20 bytes.
func ownGreeting(scramble [20]byte, offerTLS bool) []byte {
	caps := uint32(ownCaps)
	if offerTLS {
		caps |= capSSL
	}
	p := []byte{10}
	p = append(p, "5.5.5-sluice"...)
	p = append(p, 0, 0, 0, 0, 0) // terminator, connection id 0
	p = append(p, scramble[:8]...)
	p = append(p, 0, byte(caps), byte(caps>>8), 45) // filler, caps, utf8mb4_general_ci
	p = append(p, statusAutocommit, 0, byte(caps>>16), byte(caps>>24), 21)
	p = append(p, make([]byte, 10)...) // reserved
	p = append(p, scramble[8:]...)
	p = append(p, 0)
	p = append(p, "mysql_native_password"...)
	p = append(p, 0)
	return packet(0, p)
}

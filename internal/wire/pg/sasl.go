package pg

import (
	"bytes"
	"context"
	"encoding/binary"

	"github.com/sluicelab/sluice/internal/wire"
)

// saslFilter takes the channel-binding SCRAM mechanisms (names ending in
// -PLUS) out of the server's AuthenticationSASL, for a session whose
// client reached sluice without TLS while sluice reaches the server with
// it. Such a server offers SCRAM-SHA-256-PLUS because its own connection
// is TLS; the client, on plain TCP, can bind to no channel, and libpq
// refuses a server that offers only what it cannot do, or one whose
// offer contradicts the connection it sees. Channel binding cannot pass a
// relay in any case: each leg has its own TLS channel. PgBouncer offers
// plain SCRAM-SHA-256 for the same reason.
//
// It frames the server's messages until authentication ends
// (AuthenticationOk, an ErrorResponse, or a message no authentication
// exchange sends) and passes every later byte untouched, without framing.
// The observer beside it sees the server's bytes as they were sent.
type saslFilter struct {
	wire.Observer
	hold wire.Holdback
	done bool   // authentication has ended: frame no more
	msg  []byte // the rewritten AuthenticationSASL
}

var _ wire.Rewriter = (*saslFilter)(nil)

// maxAuthMessage bounds the authentication messages held back, in bytes:
// a SASL message is a few hundred bytes.
const maxAuthMessage = 64 << 10

// Authentication request codes.
const (
	authOK   = 0
	authSASL = 10
)

func newSASLFilter(obs wire.Observer) *saslFilter {
	f := &saslFilter{Observer: obs}
	f.hold = wire.Holdback{HeaderLen: headerLen, Header: f.header, Inspect: f.inspect}
	return f
}

// Rewrite implements wire.Rewriter.
func (f *saslFilter) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	return f.hold.Rewrite(ctx, p)
}

func (f *saslFilter) header(h []byte) (int, bool) {
	n := int(binary.BigEndian.Uint32(h[1:headerLen]))
	if f.done || n < 4 {
		return 0, false // pass the rest untouched
	}
	if h[0] != 'R' || n+1 > maxAuthMessage {
		f.done = true
		return 1 + n, false
	}
	return 1 + n, true
}

func (f *saslFilter) inspect(_ context.Context, msg []byte) ([]byte, bool) {
	if len(msg) < headerLen+4 {
		f.done = true
		return nil, false
	}
	switch binary.BigEndian.Uint32(msg[headerLen:]) {
	case authOK:
		f.done = true
	case authSASL:
		return f.withoutPlus(msg)
	}
	return nil, false
}

// withoutPlus rebuilds an AuthenticationSASL with its -PLUS mechanisms
// left out. A list that holds nothing else, or does not parse, goes on as
// it is.
func (f *saslFilter) withoutPlus(msg []byte) ([]byte, bool) {
	f.msg = append(f.msg[:0], msg[:headerLen+4]...)
	list := msg[headerLen+4:]
	kept, dropped := 0, false
	for len(list) > 0 && list[0] != 0 {
		end := bytes.IndexByte(list, 0)
		if end < 0 {
			return nil, false
		}
		name := list[:end+1]
		list = list[end+1:]
		if bytes.HasSuffix(name[:end], []byte("-PLUS")) {
			dropped = true
			continue
		}
		f.msg = append(f.msg, name...)
		kept++
	}
	if !dropped || kept == 0 || len(list) == 0 {
		return nil, false
	}
	f.msg = append(f.msg, 0)
	binary.BigEndian.PutUint32(f.msg[1:headerLen], uint32(len(f.msg)-1))
	return f.msg, true
}

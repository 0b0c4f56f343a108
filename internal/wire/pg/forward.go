package pg

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wire"
)

// Data-port forwarding. For a session whose user Options.Forward names,
// the client observer is also a wire.Rewriter: every simple Query
// message the client sends after the server's first ReadyForQuery is
// shown whole to the Forwarder, and when it takes the statement the
// message is replaced by a Query of the rest, with its own length.
//
//	Query: 'Q' int32 len, string sql
//
// A Query is held back only while it is incomplete, and only up to
// wire.MaxForwardQuery bytes: a longer one passes untouched, as does
// everything else (the extended protocol's Parse, COPY data, ...). When
// the Forwarder refuses a statement, sluice sends instead a DO block
// that raises the error with its SQLSTATE, so the client gets the
// server's own ErrorResponse and ReadyForQuery in order and the session
// stays in step. Until the first ReadyForQuery (the end of
// authentication) nothing is inspected: a client cannot act before it
// has logged in.

// forwarding returns the observers of a session whose statements fwd
// inspects.
func forwarding(fwd wire.Forwarder, log *slog.Logger, sess *session.Session, up *clientObserver, down *serverObserver) (*forwardUp, *forwardDown) {
	ready := new(atomic.Bool)
	fu := &forwardUp{obs: up, ready: ready, Forwarding: wire.Forwarding{
		Fwd: fwd, Log: log, Sess: sess, Fallback: sqlstate.InternalError, Raise: raiseStatement,
	}}
	fu.hold = wire.Holdback{HeaderLen: headerLen, Header: fu.header, Inspect: fu.query}
	return fu, &forwardDown{obs: down, ready: ready, fr: framer{max: down.fr.max}}
}

// forwardUp observes the client's bytes with the ordinary observer and
// rewrites its Query messages. It is used by the client pump only.
type forwardUp struct {
	wire.Forwarding
	obs   *clientObserver
	ready *atomic.Bool // the server has sent its first ReadyForQuery

	hold wire.Holdback // the framing: holds back the Queries to inspect
	msg  []byte        // the replacement Query
}

var _ wire.Rewriter = (*forwardUp)(nil)

// Observe implements wire.Observer with the ordinary client observer.
func (f *forwardUp) Observe(p []byte) error { return f.obs.Observe(p) }

// Rewrite implements wire.Rewriter. Chunks that hold no Query of
// interest are returned as they are.
func (f *forwardUp) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	return f.hold.Rewrite(ctx, p)
}

// header decides what to do with a message whose header is h: its
// whole size, and whether it is a Query to inspect. A length the
// protocol does not allow breaks the framing: the size is 0, and the
// rest of the stream passes untouched (the client observer has already
// ended the session for it).
func (f *forwardUp) header(h []byte) (size int, inspect bool) {
	n := int64(binary.BigEndian.Uint32(h[1:headerLen]))
	if n < 4 {
		return 0, false
	}
	size = int(n) + 1
	return size, h[0] == 'Q' && size <= wire.MaxForwardQuery && f.ready.Load()
}

// query shows the Query message msg to the Forwarder. It returns the
// message to send instead, or false to send msg as it is.
func (f *forwardUp) query(ctx context.Context, msg []byte) ([]byte, bool) {
	body := msg[headerLen:]
	if len(body) == 0 || bytes.IndexByte(body, 0) != len(body)-1 {
		return nil, false // malformed: the server will say so
	}
	rest, took := f.Statement(ctx, string(body[:len(body)-1]))
	if !took {
		return nil, false
	}
	f.msg = append(f.msg[:0], 'Q', 0, 0, 0, 0)
	f.msg = append(f.msg, rest...)
	f.msg = append(f.msg, 0)
	binary.BigEndian.PutUint32(f.msg[1:headerLen], uint32(len(f.msg)-1))
	return f.msg, true
}

// raiseStatement returns a statement that makes PostgreSQL raise the
// error code with message msg. The message is an escape string literal
// (E-prefixed), which reads the same whatever standard_conforming_strings
// says, inside a dollar quote whose tag it does not contain.
func raiseStatement(code, msg string) string {
	lit := "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(msg) + "'"
	body := "BEGIN RAISE EXCEPTION USING ERRCODE = '" + code + "', MESSAGE = " + lit + "; END"
	tag := "$sluice$"
	for i := 1; strings.Contains(body, tag); i++ {
		tag = "$sluice" + strconv.Itoa(i) + "$"
	}
	return "DO " + tag + body + tag
}

// forwardDown observes the server's bytes with the ordinary observer and
// notes the first ReadyForQuery, which ends authentication. It is used
// by the server pump only.
type forwardDown struct {
	obs   *serverObserver
	ready *atomic.Bool
	fr    framer // skips messages until the first ReadyForQuery
}

// Observe implements wire.Observer. Once the first ReadyForQuery has
// been seen it only calls the ordinary observer.
func (d *forwardDown) Observe(p []byte) error {
	if err := d.obs.Observe(p); err != nil || d.ready.Load() {
		return err
	}
	return d.fr.walk(p, d)
}

// header implements messageHandler: it notes a ReadyForQuery. The
// ordinary observer has validated the stream already.
func (d *forwardDown) header() error {
	if d.fr.hdr[0] == 'Z' {
		d.ready.Store(true)
	}
	return d.fr.parseHeader()
}

// count, payloadRead and message implement messageHandler: past the
// message type, forwardDown needs nothing of the stream.
func (d *forwardDown) count(int)    {}
func (d *forwardDown) payloadRead() {}
func (d *forwardDown) message()     {}

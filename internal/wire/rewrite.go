package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicelab/sluice/internal/session"
)

// Rewriter is an Observer that may also change the bytes it observes.
// The proxy checks for it once per pump; an observer that does not
// implement it costs nothing.
type Rewriter interface {
	// Rewrite is called with each chunk, in order, after Observe, and
	// returns the bytes to forward now in its place. It may return p
	// itself, a different slice, or nothing; it may hold back an
	// incomplete message and return it with a later chunk. It must not
	// retain p after returning; the slice it returns is valid until its
	// next call. An error ends the session as Observe's does (a *Fatal
	// sends its Reply). At the end of the stream the proxy calls it once
	// more with an empty p, and it returns what it still holds back, as
	// it is, so no byte the client sent is lost.
	Rewrite(ctx context.Context, p []byte) ([]byte, error)
}

// Forwarder takes workload-management statements out of a data route's
// stream: the CREATE USER and ALTER USER ... RESOURCE POOL statements of
// the users it names. A protocol front end asks it when a session opens
// and, for those users only, shows it every simple statement. It must be
// safe for concurrent use.
type Forwarder interface {
	// Forwards reports whether user's statements are shown to Forward.
	Forwards(user string) bool
	// Forward inspects one statement text. took false means "not mine":
	// the statement goes to the database unchanged. took true with a
	// nil error means the forwarder has acted on it (bound the user to
	// the pool) and rest is what the database gets instead. took true
	// with an error means it refused: the front end makes the client see
	// the error in the protocol's own way and keeps the session usable.
	// A *Refusal error carries the SQLSTATE to report; any other error
	// is reported as XX000. ctx carries the session the statement came
	// from (SessionFrom).
	Forward(ctx context.Context, sql string) (rest string, took bool, err error)
}

// sessionKey is the context key of the session a Forwarder is shown a
// statement of.
type sessionKey struct{}

// WithSession returns ctx carrying s, for a Forwarder to know whose
// statement it is shown.
func WithSession(ctx context.Context, s *session.Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionFrom returns the session ctx carries, or nil.
func SessionFrom(ctx context.Context) *session.Session {
	s, _ := ctx.Value(sessionKey{}).(*session.Session)
	return s
}

// Refusal is an error a Forwarder reports to the client.
type Refusal struct {
	Code    string // SQLSTATE, five characters
	Message string // the error message, as the database would word it
}

func (r *Refusal) Error() string { return fmt.Sprintf("%s: %s", r.Code, r.Message) }

// RefusalOf returns the SQLSTATE and message a front end reports for an
// error of Forward: a *Refusal's own when its code is an error SQLSTATE,
// else fallback and the error's text.
func RefusalOf(err error, fallback string) (code, msg string) {
	var r *Refusal
	if errors.As(err, &r) && ErrorState(r.Code) {
		return r.Code, r.Message
	}
	return fallback, err.Error()
}

// ErrorState reports whether c is a SQLSTATE of an error: five digits or
// upper-case letters, outside the success (00), warning (01) and no-data
// (02) classes.
func ErrorState(c string) bool {
	if len(c) != 5 || c[:2] == "00" || c[:2] == "01" || c[:2] == "02" {
		return false
	}
	for i := 0; i < len(c); i++ {
		if !(c[i] >= '0' && c[i] <= '9' || c[i] >= 'A' && c[i] <= 'Z') {
			return false
		}
	}
	return true
}

// Output assembles what one Rewrite call forwards: runs of its input and
// other bytes. While it has only passed input on, whole and in order, it
// is a prefix of the input and costs no copy. The zero value is not
// usable; call NewOutput.
type Output struct {
	in     []byte
	pos    int    // input consumed
	out    []byte // the output, once it is not a prefix of in
	direct bool   // the output is in[:pos]
}

// NewOutput starts the output of a call whose input is in; buf is a
// buffer to reuse (its contents are discarded), nil for none.
func NewOutput(in, buf []byte) Output {
	return Output{in: in, out: buf[:0], direct: true}
}

// Pos returns how many input bytes have been consumed.
func (o *Output) Pos() int { return o.pos }

// Pass forwards the next n input bytes.
func (o *Output) Pass(n int) {
	if !o.direct {
		o.out = append(o.out, o.in[o.pos:o.pos+n]...)
	}
	o.pos += n
}

// Skip consumes the next n input bytes without forwarding them.
func (o *Output) Skip(n int) {
	o.detach()
	o.pos += n
}

// Emit forwards b, which is not the next input.
func (o *Output) Emit(b []byte) {
	o.detach()
	o.out = append(o.out, b...)
}

func (o *Output) detach() {
	if o.direct {
		o.out = append(o.out[:0], o.in[:o.pos]...)
		o.direct = false
	}
}

// Result returns the bytes to forward: a prefix of the input, or the
// reused buffer.
func (o *Output) Result() []byte {
	if o.direct {
		return o.in[:o.pos]
	}
	return o.out
}

// Buffer returns the buffer the output was assembled in, to be passed to
// the next NewOutput (nil while the output is a prefix of the input).
func (o *Output) Buffer() []byte {
	if o.direct {
		return o.out[:0]
	}
	return o.out
}

// MaxForwardQuery is the largest statement message, header included,
// that a protocol's data-port forwarding holds back to show the
// Forwarder, in bytes; a longer one passes untouched.
const MaxForwardQuery = 1 << 20

// Forwarding is what a protocol's data-port forwarding shows its
// Forwarder: the statements of one session. Set the fields before the
// first Statement and do not change them after.
type Forwarding struct {
	Fwd  Forwarder
	Log  *slog.Logger
	Sess *session.Session
	// Fallback is the SQLSTATE reported for a refusal that carries none.
	Fallback string
	// Raise returns the statement that makes the server raise an error
	// with SQLSTATE code and message msg, so that the client reads the
	// refusal in the protocol's own way.
	Raise func(code, msg string) string
}

// Statement shows sql to the Forwarder under the session's context and
// returns the statement to send in its place, or took false to send sql
// as it is. A refusal is logged at Info and replaced by its Raise
// statement.
func (f *Forwarding) Statement(ctx context.Context, sql string) (rest string, took bool) {
	rest, took, err := f.Fwd.Forward(WithSession(ctx, f.Sess), sql)
	if !took {
		return "", false
	}
	if err != nil {
		code, text := RefusalOf(err, f.Fallback)
		f.Log.Info("forwarded statement refused", "session", f.Sess.ID, "user", f.Sess.User(), "code", code, "err", text)
		rest = f.Raise(code, text)
	}
	return rest, true
}

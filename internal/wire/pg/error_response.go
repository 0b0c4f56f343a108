package pg

import (
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/session"
)

// ErrorResponse ('E' from the server): a command failed.
//
//	ErrorResponse: 'E' int32 len, { byte field, string value }, byte 0
//
// Only the SQLSTATE ('C') and severity ('V', else 'S') are read, from a
// buffered prefix: PostgreSQL sends them first. An Execute's statement
// ends here (Cancelled for 57014, Failed otherwise) and the rest of its
// batch is skipped by the server until Sync; a simple Query's statement
// records the code and ends at ReadyForQuery. A FATAL or PANIC error ends
// every statement in flight: the server is closing the session.

// Severities sluice sends.
const severityFatal = "FATAL"

// severityError is the severity of an error that ends only the statement.
const severityError = "ERROR"

// maxErrorPrefix is how much of an ErrorResponse is buffered.
const maxErrorPrefix = 512

// onErrorResponse ends or marks the front statement.
func (s *serverObserver) onErrorResponse() {
	code, fatal := errorFields(s.fr.buf)
	o := outcomeOf(code)
	if o == session.OK {
		o = session.Failed // an error without a code still failed
	}
	switch {
	case fatal:
		s.failAll(o, code)
	case s.endExtended(o, -1, code):
		s.batchErr = code
	case s.curOK && s.cur.kind == kindSimple:
		if s.code == "" {
			s.code = code
		}
	default:
		s.batchErr = code
	}
}

// errorFields scans an ErrorResponse payload (or a prefix of it) for the
// SQLSTATE and reports whether the severity is FATAL or PANIC.
func errorFields(b []byte) (code string, fatal bool) {
	var sev, sevLocal []byte
	for len(b) > 0 && b[0] != 0 {
		f := b[0]
		v, rest, ok := cstring(b[1:])
		if !ok {
			break
		}
		switch f {
		case 'C':
			code = string(v)
		case 'V':
			sev = v
		case 'S':
			sevLocal = v
		}
		b = rest
	}
	if sev == nil {
		sev = sevLocal
	}
	switch string(sev) {
	case "FATAL", "PANIC":
		return code, true
	}
	return code, false
}

// errorResponse encodes an ErrorResponse sluice sends to a client.
func errorResponse(severity, code, msg string) []byte {
	e := pgproto3.ErrorResponse{Severity: severity, SeverityUnlocalized: severity, Code: code, Message: msg}
	b, err := e.Encode(nil)
	if err != nil {
		// Encode fails only for a message over 1 GiB; sluice's are short.
		panic("pg: encode ErrorResponse: " + err.Error())
	}
	return b
}

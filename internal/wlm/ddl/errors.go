package ddl

import (
	"fmt"
	"strings"
)

// Error is a statement error with a SQLSTATE. Position is the 1-based
// character (not byte) position in the statement text of the offending
// token, or 0 when no single token is to blame; it maps to the Position
// field of a PostgreSQL ErrorResponse.
type Error struct {
	Code     string
	Message  string
	Detail   string
	Hint     string
	Position int
}

// Error returns "SQLSTATE: message" followed by the position if known.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Position > 0 {
		fmt.Fprintf(&b, " (at character %d)", e.Position)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Errorf returns an *Error with code and position.
func Errorf(code string, pos int, format string, args ...any) *Error {
	return &Error{Code: code, Position: pos, Message: fmt.Sprintf(format, args...)}
}

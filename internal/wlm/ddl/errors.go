package ddl

import (
	"fmt"
	"strings"
)

// SQLSTATE codes used by the parser and by the workload manager when it
// executes statements.
const (
	CodeSyntax            = "42601" // syntax_error
	CodeUndefinedObject   = "42704" // undefined_object
	CodeDuplicateObject   = "42710" // duplicate_object
	CodeUndefinedColumn   = "42703" // undefined_column
	CodeUndefinedTable    = "42P01" // undefined_table
	CodeInvalidParameter  = "22023" // invalid_parameter_value
	CodeNotSupported      = "0A000" // feature_not_supported
	CodeDependentObjects  = "2BP01" // dependent_objects_still_exist
	CodeInternal          = "XX000" // internal_error
	CodeInvalidPassword   = "28P01" // invalid_password
	CodeProtocolViolation = "08P01" // protocol_violation
	CodeUndefinedParam    = "42P02" // undefined_parameter
	CodeReadOnly          = "42501" // insufficient_privilege: the console's views only read
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

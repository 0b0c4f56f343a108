package pgserver

import (
	"errors"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// ErrAuthFailed is returned by Serve when the client failed to
// authenticate; the client has been told why.
var ErrAuthFailed = errors.New("pgserver: authentication failed")

// ErrCancelRequest is returned by Serve for a connection that carried a
// CancelRequest, which Backend.Cancel has handled.
var ErrCancelRequest = errors.New("pgserver: cancel request handled")

// Responder is implemented by errors that know their ErrorResponse.
type Responder interface {
	error
	ErrorResponse() *pgproto3.ErrorResponse
}

// Response returns err's ErrorResponse: its own if err wraps a
// Responder, else internal_error (XX000) with err's text.
func Response(err error) *pgproto3.ErrorResponse {
	var r Responder
	if errors.As(err, &r) {
		return r.ErrorResponse()
	}
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: sqlstate.InternalError, Message: err.Error()}
}

// Errorf is an error with a SQLSTATE, severity ERROR.
type Error struct {
	Code, Message string
}

func (e *Error) Error() string { return e.Message + " (SQLSTATE " + e.Code + ")" }

// ErrorResponse implements Responder.
func (e *Error) ErrorResponse() *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: e.Code, Message: e.Message}
}

// fatalResponse returns err's response with severity FATAL.
func fatalResponse(err error) *pgproto3.ErrorResponse {
	r := *Response(err)
	r.Severity, r.SeverityUnlocalized = "FATAL", "FATAL"
	return &r
}

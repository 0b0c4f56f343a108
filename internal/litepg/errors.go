package litepg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
	sqlite "modernc.org/sqlite"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// pgError is an error reported to the client in an ErrorResponse.
type pgError struct {
	code   string // SQLSTATE
	msg    string
	detail string
	hint   string
	fatal  bool // the session ends after reporting it
}

func (e *pgError) Error() string { return e.msg + " (SQLSTATE " + e.code + ")" }

func syntaxErrorf(format string, args ...any) *pgError {
	return &pgError{code: sqlstate.SyntaxError, msg: fmt.Sprintf(format, args...)}
}

func unsupportedf(format string, args ...any) *pgError {
	return &pgError{code: sqlstate.FeatureNotSupported, msg: fmt.Sprintf(format, args...)}
}

// errCanceled is the error of a statement ended by a CancelRequest.
var errCanceled = &pgError{code: sqlstate.QueryCanceled, msg: "canceling statement due to user request"}

// errAborted is the error of a statement sent in a failed transaction.
var errAborted = &pgError{code: sqlstate.InFailedSQLTransaction, msg: "current transaction is aborted, commands ignored until end of transaction block"}

// toPGError maps err, from any layer, to the error the client sees.
// SQLite errors keep SQLite's message and get the closest SQLSTATE.
func toPGError(err error) *pgError {
	var pe *pgError
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.Canceled) {
		return errCanceled
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return sqliteError(se.Code(), se.Error())
	}
	return &pgError{code: sqlstate.InternalError, msg: err.Error()}
}

// sqliteError maps an SQLite result code and message to a pgError.
func sqliteError(code int, raw string) *pgError {
	msg := sqlstate.Message(raw)
	e := &pgError{code: sqlstate.FromSQLite(code, msg), msg: msg}
	if e.code == sqlstate.SerializationFailure {
		e.msg = "could not serialize access due to concurrent update: " + msg
	}
	return e
}

// ErrorResponse renders e as a protocol message (pgserver.Responder).
func (e *pgError) ErrorResponse() *pgproto3.ErrorResponse {
	sev := "ERROR"
	if e.fatal {
		sev = "FATAL"
	}
	return &pgproto3.ErrorResponse{
		Severity:            sev,
		SeverityUnlocalized: sev,
		Code:                e.code,
		Message:             e.msg,
		Detail:              e.detail,
		Hint:                e.hint,
	}
}

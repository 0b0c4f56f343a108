package litepg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLSTATE codes the server reports.
const (
	codeProtocolViolation         = "08P01"
	codeFeatureNotSupported       = "0A000"
	codeNumericValueOutOfRange    = "22003"
	codeInvalidDatetimeFormat     = "22007"
	codeCharacterNotInRepertoire  = "22021"
	codeInvalidTextRepresentation = "22P02"
	codeInvalidBinaryRepresent    = "22P03"
	codeBadCopyFileFormat         = "22P04"
	codeNotNullViolation          = "23502"
	codeForeignKeyViolation       = "23503"
	codeUniqueViolation           = "23505"
	codeCheckViolation            = "23514"
	codeIntegrityViolation        = "23000"
	codeActiveSQLTransaction      = "25001"
	codeReadOnlySQLTransaction    = "25006"
	codeNoActiveSQLTransaction    = "25P01"
	codeInFailedSQLTransaction    = "25P02"
	codeInvalidSQLStatementName   = "26000"
	codeInvalidAuthorization      = "28000"
	codeInvalidPassword           = "28P01"
	codeInvalidCursorName         = "34000"
	codeSerializationFailure      = "40001"
	codeSyntaxOrAccessRule        = "42000"
	codeSyntaxError               = "42601"
	codeUndefinedColumn           = "42703"
	codeUndefinedFunction         = "42883"
	codeUndefinedTable            = "42P01"
	codeUndefinedParameter        = "42P02"
	codeUndefinedObject           = "42704"
	codeDuplicateTable            = "42P07"
	codeDuplicateObject           = "42710"
	codeDuplicatePreparedStmt     = "42P05"
	codeDuplicateCursor           = "42P03"
	codeDatatypeMismatch          = "42804"
	codeGroupingError             = "42803"
	codeAmbiguousColumn           = "42702"
	codeProgramLimitExceeded      = "54000"
	codeDiskFull                  = "53100"
	codeOutOfMemory               = "53200"
	codeTooManyConnections        = "53300"
	codeCantChangeRuntimeParam    = "55P02"
	codeQueryCanceled             = "57014"
	codeAdminShutdown             = "57P01"
	codeIOError                   = "58030"
	codeInternalError             = "XX000"
	codeDataCorrupted             = "XX001"
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
	return &pgError{code: codeSyntaxError, msg: fmt.Sprintf(format, args...)}
}

func unsupportedf(format string, args ...any) *pgError {
	return &pgError{code: codeFeatureNotSupported, msg: fmt.Sprintf(format, args...)}
}

// errCanceled is the error of a statement ended by a CancelRequest.
var errCanceled = &pgError{code: codeQueryCanceled, msg: "canceling statement due to user request"}

// errAborted is the error of a statement sent in a failed transaction.
var errAborted = &pgError{code: codeInFailedSQLTransaction, msg: "current transaction is aborted, commands ignored until end of transaction block"}

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
	return &pgError{code: codeInternalError, msg: err.Error()}
}

// sqliteStates maps a primary SQLite result code to the SQLSTATE of its
// errors; read-only. sqliteError treats BUSY, LOCKED, CONSTRAINT and
// ERROR itself.
var sqliteStates = map[int]string{
	sqlite3.SQLITE_INTERRUPT: codeQueryCanceled,
	sqlite3.SQLITE_TOOBIG:    codeProgramLimitExceeded,
	sqlite3.SQLITE_READONLY:  codeReadOnlySQLTransaction,
	sqlite3.SQLITE_FULL:      codeDiskFull,
	sqlite3.SQLITE_NOMEM:     codeOutOfMemory,
	sqlite3.SQLITE_IOERR:     codeIOError,
	sqlite3.SQLITE_CANTOPEN:  codeIOError,
	sqlite3.SQLITE_CORRUPT:   codeDataCorrupted,
	sqlite3.SQLITE_NOTADB:    codeDataCorrupted,
	sqlite3.SQLITE_MISMATCH:  codeDatatypeMismatch,
	sqlite3.SQLITE_RANGE:     codeUndefinedParameter,
}

// constraintStates maps an extended SQLITE_CONSTRAINT result code to its
// SQLSTATE; read-only. Other constraints are integrity violations.
var constraintStates = map[int]string{
	sqlite3.SQLITE_CONSTRAINT_UNIQUE:     codeUniqueViolation,
	sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY: codeUniqueViolation,
	sqlite3.SQLITE_CONSTRAINT_NOTNULL:    codeNotNullViolation,
	sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY: codeForeignKeyViolation,
	sqlite3.SQLITE_CONSTRAINT_CHECK:      codeCheckViolation,
}

// sqliteError maps an SQLite result code and message to a pgError.
func sqliteError(code int, raw string) *pgError {
	msg := sqliteMessage(raw)
	e := &pgError{msg: msg}
	switch primary := code & 0xff; primary {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		e.code = codeSerializationFailure
		e.msg = "could not serialize access due to concurrent update: " + msg
	case sqlite3.SQLITE_CONSTRAINT:
		e.code = constraintStates[code]
		if e.code == "" {
			e.code = codeIntegrityViolation
		}
	case sqlite3.SQLITE_ERROR:
		e.code = classifyLogicError(msg)
	default:
		e.code = sqliteStates[primary]
		if e.code == "" {
			e.code = codeInternalError
		}
	}
	return e
}

// logicErrors maps the messages of generic SQLite errors to SQLSTATEs,
// first match first: a message matches an entry that it starts with one
// of the prefixes or contains one of the infixes of; read-only.
var logicErrors = []struct {
	code              string
	prefixes, infixes []string
}{
	{codeSyntaxError, nil, []string{"syntax error", "incomplete input", "unrecognized token"}},
	{codeUndefinedTable, []string{"no such table", "no such view"}, nil},
	{codeUndefinedColumn, []string{"no such column"}, []string{"has no column named"}},
	{codeUndefinedFunction, []string{"no such function", "wrong number of arguments to function"}, nil},
	{codeUndefinedObject, []string{"no such index", "no such savepoint"}, nil},
	{codeAmbiguousColumn, []string{"ambiguous column name"}, nil},
	{codeDuplicateObject, nil, []string{"already exists"}}, // codeDuplicateTable for a table or view
	{codeGroupingError, nil, []string{"misuse of aggregate", "GROUP BY"}},
	{codeNumericValueOutOfRange, nil, []string{"integer overflow"}},
	{codeActiveSQLTransaction, nil, []string{"cannot start a transaction within a transaction"}},
	{codeNoActiveSQLTransaction, nil, []string{"no transaction is active"}},
	{codeFeatureNotSupported, nil, []string{"not supported", "not authorized"}},
}

// classifyLogicError picks the SQLSTATE of a generic SQLite error from
// its message.
func classifyLogicError(msg string) string {
	for _, le := range logicErrors {
		if !slices.ContainsFunc(le.prefixes, func(p string) bool { return strings.HasPrefix(msg, p) }) &&
			!slices.ContainsFunc(le.infixes, func(p string) bool { return strings.Contains(msg, p) }) {
			continue
		}
		if le.code == codeDuplicateObject && (strings.HasPrefix(msg, "table") || strings.HasPrefix(msg, "view")) {
			return codeDuplicateTable
		}
		return le.code
	}
	return codeSyntaxOrAccessRule
}

// sqliteMessage strips the driver's decorations from an SQLite error
// message: the generic text of the result code before the first ": ",
// and the trailing " (code)" and " (SQLITE_BUSY)".
func sqliteMessage(raw string) string {
	msg := strings.TrimSuffix(raw, " (SQLITE_BUSY)")
	if i := strings.LastIndex(msg, " ("); i >= 0 && strings.HasSuffix(msg, ")") {
		if isDigits(msg[i+2 : len(msg)-1]) {
			msg = msg[:i]
		}
	}
	if i := strings.Index(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return msg
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
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

package sqlstate

import (
	"slices"
	"strings"
)

// SQLite's primary result codes that FromSQLite tells apart (the low
// byte of a result code; https://sqlite.org/rescode.html).
const (
	sqliteError      = 1
	sqliteBusy       = 5
	sqliteLocked     = 6
	sqliteNoMem      = 7
	sqliteReadOnly   = 8
	sqliteInterrupt  = 9
	sqliteIOErr      = 10
	sqliteCorrupt    = 11
	sqliteFull       = 13
	sqliteCantOpen   = 14
	sqliteTooBig     = 18
	sqliteConstraint = 19
	sqliteMismatch   = 20
	sqliteAuth       = 23
	sqliteRange      = 25
	sqliteNotADB     = 26
)

// SQLite's extended constraint codes.
const (
	sqliteConstraintCheck      = sqliteConstraint | 1<<8
	sqliteConstraintForeignKey = sqliteConstraint | 3<<8
	sqliteConstraintNotNull    = sqliteConstraint | 5<<8
	sqliteConstraintPrimaryKey = sqliteConstraint | 6<<8
	sqliteConstraintUnique     = sqliteConstraint | 8<<8
)

// sqliteStates maps a primary result code to its SQLSTATE; read-only.
// FromSQLite treats ERROR, BUSY, LOCKED and CONSTRAINT itself.
var sqliteStates = map[int]string{
	sqliteInterrupt: QueryCanceled,
	sqliteTooBig:    ProgramLimitExceeded,
	sqliteReadOnly:  ReadOnlySQLTransaction,
	sqliteFull:      DiskFull,
	sqliteNoMem:     OutOfMemory,
	sqliteIOErr:     IOError,
	sqliteCantOpen:  IOError,
	sqliteCorrupt:   DataCorrupted,
	sqliteNotADB:    DataCorrupted,
	sqliteMismatch:  DatatypeMismatch,
	sqliteRange:     UndefinedParameter,
	sqliteAuth:      InsufficientPrivilege,
}

// constraintStates maps an extended constraint code to its SQLSTATE;
// read-only. Other constraints are integrity violations.
var constraintStates = map[int]string{
	sqliteConstraintUnique:     UniqueViolation,
	sqliteConstraintPrimaryKey: UniqueViolation,
	sqliteConstraintNotNull:    NotNullViolation,
	sqliteConstraintForeignKey: ForeignKeyViolation,
	sqliteConstraintCheck:      CheckViolation,
}

// logicErrors maps the messages of SQLite's generic errors (result code
// ERROR) to SQLSTATEs, first match first: a message matches an entry
// that it starts with one of the prefixes or contains one of the
// infixes of; read-only.
var logicErrors = []struct {
	code              string
	prefixes, infixes []string
}{
	{SyntaxError, nil, []string{"syntax error", "incomplete input", "unrecognized token"}},
	{UndefinedTable, []string{"no such table", "no such view"}, nil},
	{UndefinedColumn, []string{"no such column"}, []string{"has no column named"}},
	{UndefinedFunction, []string{"no such function", "wrong number of arguments to function"}, nil},
	{UndefinedObject, []string{"no such index", "no such savepoint"}, nil},
	{AmbiguousColumn, []string{"ambiguous column name"}, nil},
	{DuplicateObject, nil, []string{"already exists"}}, // DuplicateTable for a table or view
	{GroupingError, nil, []string{"misuse of aggregate", "GROUP BY"}},
	{NumericValueOutOfRange, nil, []string{"integer overflow"}},
	{DatatypeMismatch, nil, []string{"datatype mismatch"}},
	{ActiveSQLTransaction, nil, []string{"cannot start a transaction within a transaction"}},
	{NoActiveSQLTransaction, nil, []string{"no transaction is active"}},
	{InsufficientPrivilege, nil, []string{"not authorized"}},
	{FeatureNotSupported, nil, []string{"not supported"}},
}

// FromSQLite returns the SQLSTATE of an SQLite error with result code
// code (primary or extended) and message msg, the message as SQLite
// wrote it (see Message). BUSY and LOCKED are serialization failures;
// a generic error is classified by its message, and one no rule
// matches is 42000; a code without a rule is XX000.
func FromSQLite(code int, msg string) string {
	switch primary := code & 0xff; primary {
	case sqliteBusy, sqliteLocked:
		return SerializationFailure
	case sqliteConstraint:
		if s, ok := constraintStates[code]; ok {
			return s
		}
		return IntegrityViolation
	case sqliteError:
		return classifyLogicError(msg)
	default:
		if s, ok := sqliteStates[primary]; ok {
			return s
		}
		return InternalError
	}
}

// classifyLogicError picks the SQLSTATE of a generic SQLite error from
// its message.
func classifyLogicError(msg string) string {
	for _, le := range logicErrors {
		if !slices.ContainsFunc(le.prefixes, func(p string) bool { return strings.HasPrefix(msg, p) }) &&
			!slices.ContainsFunc(le.infixes, func(p string) bool { return strings.Contains(msg, p) }) {
			continue
		}
		if le.code == DuplicateObject && (strings.HasPrefix(msg, "table") || strings.HasPrefix(msg, "view")) {
			return DuplicateTable
		}
		return le.code
	}
	return SyntaxErrorOrAccessRuleViolation
}

// Message strips the Go driver's decorations from an SQLite error's
// text: the result code's generic text before the first ": " ("SQL
// logic error: "), and a trailing " (code)" or " (SQLITE_BUSY)".
func Message(raw string) string {
	msg := strings.TrimSuffix(raw, " (SQLITE_BUSY)")
	if i := strings.LastIndex(msg, " ("); i >= 0 && strings.HasSuffix(msg, ")") && isDigits(msg[i+2:len(msg)-1]) {
		msg = msg[:i]
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

package sqlstate

import (
	"testing"

	sqlite3 "modernc.org/sqlite/lib"
)

// TestSQLiteCodes checks the result codes this package names against
// the driver's.
func TestSQLiteCodes(t *testing.T) {
	for _, c := range []struct {
		name      string
		ours, lib int
	}{
		{"ERROR", sqliteError, sqlite3.SQLITE_ERROR},
		{"BUSY", sqliteBusy, sqlite3.SQLITE_BUSY},
		{"LOCKED", sqliteLocked, sqlite3.SQLITE_LOCKED},
		{"NOMEM", sqliteNoMem, sqlite3.SQLITE_NOMEM},
		{"READONLY", sqliteReadOnly, sqlite3.SQLITE_READONLY},
		{"INTERRUPT", sqliteInterrupt, sqlite3.SQLITE_INTERRUPT},
		{"IOERR", sqliteIOErr, sqlite3.SQLITE_IOERR},
		{"CORRUPT", sqliteCorrupt, sqlite3.SQLITE_CORRUPT},
		{"FULL", sqliteFull, sqlite3.SQLITE_FULL},
		{"CANTOPEN", sqliteCantOpen, sqlite3.SQLITE_CANTOPEN},
		{"TOOBIG", sqliteTooBig, sqlite3.SQLITE_TOOBIG},
		{"CONSTRAINT", sqliteConstraint, sqlite3.SQLITE_CONSTRAINT},
		{"MISMATCH", sqliteMismatch, sqlite3.SQLITE_MISMATCH},
		{"AUTH", sqliteAuth, sqlite3.SQLITE_AUTH},
		{"RANGE", sqliteRange, sqlite3.SQLITE_RANGE},
		{"NOTADB", sqliteNotADB, sqlite3.SQLITE_NOTADB},
		{"CONSTRAINT_CHECK", sqliteConstraintCheck, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"CONSTRAINT_FOREIGNKEY", sqliteConstraintForeignKey, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY},
		{"CONSTRAINT_NOTNULL", sqliteConstraintNotNull, sqlite3.SQLITE_CONSTRAINT_NOTNULL},
		{"CONSTRAINT_PRIMARYKEY", sqliteConstraintPrimaryKey, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY},
		{"CONSTRAINT_UNIQUE", sqliteConstraintUnique, sqlite3.SQLITE_CONSTRAINT_UNIQUE},
	} {
		if c.ours != c.lib {
			t.Errorf("SQLITE_%s: %d here, %d in the driver", c.name, c.ours, c.lib)
		}
	}
}

func TestFromSQLite(t *testing.T) {
	tests := []struct {
		code int
		msg  string
		want string
	}{
		{sqlite3.SQLITE_ERROR, `near "SELEC": syntax error`, SyntaxError},
		{sqlite3.SQLITE_ERROR, "no such table: foo", UndefinedTable},
		{sqlite3.SQLITE_ERROR, "no such column: x", UndefinedColumn},
		{sqlite3.SQLITE_ERROR, "table t has no column named x", UndefinedColumn},
		{sqlite3.SQLITE_ERROR, "no such function: f", UndefinedFunction},
		{sqlite3.SQLITE_ERROR, "table t already exists", DuplicateTable},
		{sqlite3.SQLITE_ERROR, "index i already exists", DuplicateObject},
		{sqlite3.SQLITE_ERROR, "ambiguous column name: a", AmbiguousColumn},
		{sqlite3.SQLITE_ERROR, "not authorized", InsufficientPrivilege},
		{sqlite3.SQLITE_ERROR, "something new", SyntaxErrorOrAccessRuleViolation},
		{sqlite3.SQLITE_BUSY, "database is locked", SerializationFailure},
		{sqlite3.SQLITE_LOCKED, "database table is locked", SerializationFailure},
		{sqlite3.SQLITE_CONSTRAINT_UNIQUE, "UNIQUE constraint failed: t.a", UniqueViolation},
		{sqlite3.SQLITE_CONSTRAINT_NOTNULL, "NOT NULL constraint failed: t.a", NotNullViolation},
		{sqlite3.SQLITE_CONSTRAINT_TRIGGER, "raise", IntegrityViolation},
		{sqlite3.SQLITE_TOOBIG, "string or blob too big", ProgramLimitExceeded},
		{sqlite3.SQLITE_INTERRUPT, "interrupted", QueryCanceled},
		{sqlite3.SQLITE_AUTH, "authorization denied", InsufficientPrivilege},
		{sqlite3.SQLITE_IOERR_READ, "disk I/O error", IOError},
		{sqlite3.SQLITE_SCHEMA, "schema changed", InternalError},
	}
	for _, tt := range tests {
		if got := FromSQLite(tt.code, tt.msg); got != tt.want {
			t.Errorf("FromSQLite(%d, %q) = %s, want %s", tt.code, tt.msg, got, tt.want)
		}
	}
}

func TestMessage(t *testing.T) {
	for raw, want := range map[string]string{
		"SQL logic error: no such table: foo (1)":        "no such table: foo",
		"database is locked (5) (SQLITE_BUSY)":           "database is locked",
		"interrupted (9)":                                "interrupted",
		"string or blob too big: x (abc)":                "x (abc)",
		"plain":                                          "plain",
		"constraint failed: UNIQUE constraint failed: a": "UNIQUE constraint failed: a",
	} {
		if got := Message(raw); got != want {
			t.Errorf("Message(%q) = %q, want %q", raw, got, want)
		}
	}
}

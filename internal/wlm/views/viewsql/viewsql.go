package viewsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluicelab/sluice/internal/opt"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// DefaultMaxRows is the most rows a query may return when Options.MaxRows
// is 0.
const DefaultMaxRows = 100_000

// Bounds of a query's memory. DefaultMaxValueBytes and
// DefaultMaxResultBytes apply when Options leave them 0; the heap limits
// are SQLite's own and process-wide (sqlite3_soft_heap_limit64 and
// sqlite3_hard_heap_limit64, set by every Query): every SQLite database
// of the process shares them, the lab's embedded backend included.
const (
	// DefaultMaxValueBytes is the longest string or BLOB a query may make
	// (SQLITE_LIMIT_LENGTH): randomblob(1e9) or a 100 MB printf fails at
	// once with 54000 instead of allocating it.
	DefaultMaxValueBytes = 16 << 20
	// DefaultMaxResultBytes bounds the text of a result's values, summed.
	DefaultMaxResultBytes = 64 << 20
	// SoftHeapBytes is where SQLite starts to give memory back (caches).
	SoftHeapBytes = 128 << 20
	// HardHeapBytes is the most SQLite allocates; past it a query fails
	// with 54000 (out of memory).
	HardHeapBytes = 512 << 20
)

// freeAfterBytes is a result's size beyond which Query gives the Go
// heap's free memory back to the system when it returns.
const freeAfterBytes = 8 << 20

// dsn opens a private in-memory database; _dqs=0 makes a "double-quoted"
// word an identifier only, never a string as SQLite would otherwise
// fall back to.
const dsn = "file::memory:?cache=private&_dqs=0"

// Options bound a query.
type Options struct {
	// MaxRows is the most rows the query may return; more is an error
	// (sqlstate.ProgramLimitExceeded). 0 means DefaultMaxRows.
	MaxRows int
	// MaxValueBytes is the longest string or BLOB the query may make
	// (sqlstate.ProgramLimitExceeded beyond); 0 means DefaultMaxValueBytes.
	MaxValueBytes int
	// MaxResultBytes bounds the text of the result's values, summed
	// (sqlstate.ProgramLimitExceeded beyond); 0 means DefaultMaxResultBytes.
	MaxResultBytes int
}

// Result is what a query returned.
type Result struct {
	Columns []string
	// Types are the columns' types: the declared type of a column read
	// from a view, else the type of the values the column holds (Text
	// when it mixes text with numbers or holds only NULLs).
	Types []views.Type
	// Rows hold each value as text (Valid false for NULL): integers in
	// decimal, reals in the shortest form that reads back the same.
	Rows [][]sql.NullString

	bytes int // the values' text, summed, as read
}

// Query runs query, one SELECT statement (a ddl.Query's SQL), over
// tables (view name to its rows) in a new in-memory database that it
// closes before it returns. The query runs read-only until ctx ends; its
// errors are *ddl.Error with a SQLSTATE.
func Query(ctx context.Context, tables map[string]views.Table, query string, o Options) (*Result, error) {
	o.MaxRows = opt.Positive(o.MaxRows, DefaultMaxRows)
	o.MaxValueBytes = opt.Positive(o.MaxValueBytes, DefaultMaxValueBytes)
	o.MaxResultBytes = opt.Positive(o.MaxResultBytes, DefaultMaxResultBytes)
	res, err := runQuery(ctx, tables, query, o)
	if res != nil && res.bytes > freeAfterBytes {
		// The result's copies and SQLite's pages are garbage now: give
		// them back rather than keep the process at its peak.
		debug.FreeOSMemory()
	}
	return res, err
}

func runQuery(ctx context.Context, tables map[string]views.Table, query string, o Options) (*Result, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, internal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, convert(ctx, err)
	}
	defer conn.Close()
	if err := bound(ctx, conn, o.MaxValueBytes); err != nil {
		return nil, err
	}
	if err := load(ctx, conn, tables); err != nil {
		return nil, err
	}
	if err := lockDown(ctx, conn); err != nil {
		return nil, err
	}
	return run(ctx, conn, query, o)
}

// bound sets the connection's longest value and SQLite's process-wide
// heap limits.
func bound(ctx context.Context, conn *sql.Conn, maxValue int) error {
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, maxValue); err != nil {
		return internal(err)
	}
	for _, p := range []string{
		fmt.Sprintf("PRAGMA soft_heap_limit = %d", SoftHeapBytes),
		fmt.Sprintf("PRAGMA hard_heap_limit = %d", HardHeapBytes),
	} {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			return convert(ctx, err)
		}
	}
	return nil
}

// quoteIdent quotes a name for SQLite.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// load creates a table per view, in name order, and fills it in one
// transaction. An empty value of an Integer or Real column is NULL, and
// so is one that does not parse as its type.
func load(ctx context.Context, conn *sql.Conn, tables map[string]views.Table) error {
	names := slices.Sorted(maps.Keys(tables))
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return convert(ctx, err)
	}
	defer tx.Rollback()
	for _, n := range names {
		t := tables[n]
		defs := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			defs[i] = quoteIdent(c) + " " + t.TypeOf(i).String()
		}
		if _, err := tx.ExecContext(ctx, "CREATE TABLE "+quoteIdent(n)+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return convert(ctx, err)
		}
		if err := insert(ctx, tx, n, &t); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return convert(ctx, err)
	}
	return nil
}

// insertBatch is how many rows one INSERT writes: fewer statements load
// faster, within SQLite's limit of 32,766 bound values.
const insertBatch = 100

// insert writes the rows of t into table name.
func insert(ctx context.Context, tx *sql.Tx, name string, t *views.Table) error {
	ncol := len(t.Columns)
	if ncol == 0 || len(t.Rows) == 0 {
		return nil
	}
	batch := max(1, min(insertBatch, 32766/ncol))
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", ncol), ", ") + ")"
	var stmt *sql.Stmt
	stmtRows := 0
	defer func() {
		if stmt != nil {
			stmt.Close()
		}
	}()
	args := make([]any, 0, batch*ncol)
	for start := 0; start < len(t.Rows); start += batch {
		rows := t.Rows[start:min(start+batch, len(t.Rows))]
		if len(rows) != stmtRows {
			if stmt != nil {
				stmt.Close()
			}
			var err error
			stmt, err = tx.PrepareContext(ctx, "INSERT INTO "+quoteIdent(name)+" VALUES "+strings.TrimSuffix(strings.Repeat(tuple+", ", len(rows)), ", "))
			if err != nil {
				return convert(ctx, err)
			}
			stmtRows = len(rows)
		}
		args = args[:0]
		for _, row := range rows {
			for i, v := range row {
				args = append(args, value(t.TypeOf(i), v))
			}
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return convert(ctx, err)
		}
	}
	return nil
}

// value converts a view's text v of a column of type t for SQLite.
func value(t views.Type, v string) any {
	switch t {
	case views.Integer:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
		return nil
	case views.Real:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
		return nil
	}
	return v
}

// lockDown makes the connection read-only (query_only) and installs an
// authorizer that lets a statement read tables and call functions and
// nothing else: no PRAGMA, ATTACH, writes, schema changes or
// transactions; load_extension is refused by name as well.
func lockDown(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "PRAGMA query_only = ON"); err != nil {
		return convert(ctx, err)
	}
	err := conn.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the sqlite driver has no authorizer")
		}
		return r.RegisterAuthorizer(authorize)
	})
	if err != nil {
		return convert(ctx, err)
	}
	return nil
}

func authorize(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	}
	return sqlite.AuthorizerDeny
}

// run runs the query and reads at most o.MaxRows rows of at most
// o.MaxResultBytes.
func run(ctx context.Context, conn *sql.Conn, query string, o Options) (*Result, error) {
	maxRows := o.MaxRows
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, convert(ctx, err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, convert(ctx, err)
	}
	res := &Result{Columns: make([]string, len(cts)), Types: make([]views.Type, len(cts))}
	seen := make([]seenKinds, len(cts))
	for i, ct := range cts {
		res.Columns[i] = ct.Name()
	}
	dest := make([]any, len(cts))
	ptrs := make([]any, len(cts))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	var raw [][]any
	for rows.Next() {
		if len(raw) == maxRows {
			return nil, ddl.Errorf(sqlstate.ProgramLimitExceeded, 0, "query returned more than %d rows", maxRows)
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, convert(ctx, err)
		}
		row := make([]any, len(dest))
		for i, v := range dest {
			switch x := v.(type) {
			case []byte:
				res.bytes += len(x)
				v = string(x)
			case string:
				res.bytes += len(x)
			default:
				res.bytes += 8
			}
			if res.bytes > o.MaxResultBytes {
				return nil, ddl.Errorf(sqlstate.ProgramLimitExceeded, 0, "query result larger than %d bytes", o.MaxResultBytes)
			}
			row[i] = v
			seen[i].note(v)
		}
		raw = append(raw, row)
	}
	if err := rows.Err(); err != nil {
		return nil, convert(ctx, err)
	}
	for i, ct := range cts {
		res.Types[i] = seen[i].typ(ct.DatabaseTypeName())
	}
	res.Rows = make([][]sql.NullString, len(raw))
	for r, row := range raw {
		out := make([]sql.NullString, len(row))
		for i, v := range row {
			out[i] = format(res.Types[i], v)
		}
		res.Rows[r] = out
	}
	return res, nil
}

// seenKinds records the kinds of value a result column held.
type seenKinds struct{ ints, reals, texts bool }

func (s *seenKinds) note(v any) {
	switch v.(type) {
	case int64:
		s.ints = true
	case float64:
		s.reals = true
	case nil:
	default:
		s.texts = true
	}
}

// typ returns the column's type: its declared type when it has one, else
// the type of its values.
func (s *seenKinds) typ(declared string) views.Type {
	switch strings.ToUpper(declared) {
	case "INTEGER":
		if !s.reals && !s.texts {
			return views.Integer
		}
	case "REAL":
		if !s.texts {
			return views.Real
		}
	case "TEXT":
		return views.Text
	}
	switch {
	case s.texts:
		return views.Text
	case s.reals:
		return views.Real
	case s.ints:
		return views.Integer
	}
	return views.Text
}

// format writes v as text of a column of type t.
func format(t views.Type, v any) sql.NullString {
	switch x := v.(type) {
	case nil:
		return sql.NullString{}
	case int64:
		if t == views.Real {
			return sql.NullString{String: formatReal(float64(x)), Valid: true}
		}
		return sql.NullString{String: strconv.FormatInt(x, 10), Valid: true}
	case float64:
		return sql.NullString{String: formatReal(x), Valid: true}
	case string:
		return sql.NullString{String: x, Valid: true}
	}
	return sql.NullString{String: fmt.Sprint(v), Valid: true}
}

// formatReal writes f as PostgreSQL writes a float8: the shortest text
// that reads back as f, with an exponent for very large or small values.
func formatReal(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func internal(err error) *ddl.Error {
	return ddl.Errorf(sqlstate.InternalError, 0, "console query: %v", err)
}

// convert maps an SQLite error to an *ddl.Error with the SQLSTATE
// sqlstate.FromSQLite gives it (57014 when ctx ended), in the console's
// words where a query over the views reads better that way: a value or
// memory past the console's bounds (54000), a refused write or function
// (42501, 25006), an unknown view (with the list of views; 0A000 for a
// PostgreSQL or GaussDB catalog) or column.
func convert(ctx context.Context, err error) *ddl.Error {
	if ctx.Err() != nil {
		return ddl.Errorf(sqlstate.QueryCanceled, 0, "canceling statement: %v", context.Cause(ctx))
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return ddl.Errorf(sqlstate.InternalError, 0, "%s", err.Error())
	}
	msg := sqlstate.Message(err.Error())
	code := sqlstate.FromSQLite(se.Code(), msg)
	switch primary := se.Code() & 0xff; {
	case primary == sqlite3.SQLITE_TOOBIG:
		return ddl.Errorf(sqlstate.ProgramLimitExceeded, 0, "a value of the query is longer than the console allows (%s)", msg)
	case primary == sqlite3.SQLITE_NOMEM:
		return ddl.Errorf(sqlstate.ProgramLimitExceeded, 0, "the query needs more memory than the console allows (%s)", msg)
	case primary == sqlite3.SQLITE_INTERRUPT:
		return ddl.Errorf(sqlstate.QueryCanceled, 0, "canceling statement due to statement timeout")
	case code == sqlstate.InsufficientPrivilege:
		return ddl.Errorf(code, 0, "permission denied: console queries only read (%s)", msg)
	case code == sqlstate.ReadOnlySQLTransaction:
		return ddl.Errorf(code, 0, "cannot write in a read-only console query (%s)", msg)
	case code == sqlstate.UndefinedTable:
		_, name, _ := strings.Cut(msg, ": ")
		if strings.HasPrefix(name, "pg_") || strings.HasPrefix(name, "gs_") || strings.HasPrefix(name, "information_schema.") {
			code = sqlstate.FeatureNotSupported // a PostgreSQL or GaussDB catalog the console does not have
		}
		e := ddl.Errorf(code, 0, "relation %q does not exist in the sluice admin console", name)
		e.Hint = "Views: " + strings.Join(views.Names, ", ") + "."
		return e
	case code == sqlstate.UndefinedColumn && strings.HasPrefix(msg, "no such column: "):
		col, _, _ := strings.Cut(strings.TrimPrefix(msg, "no such column: "), " - ")
		return ddl.Errorf(code, 0, "column %q does not exist", strings.Trim(col, `"`))
	case code == sqlstate.SyntaxErrorOrAccessRuleViolation:
		code = sqlstate.InternalError
	}
	return ddl.Errorf(code, 0, "%s", msg)
}

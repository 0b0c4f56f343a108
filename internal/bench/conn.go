package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/threadconn"
)

// Counter is the class sysbench counts an executed statement in: a
// statement that returns a result set is a read, one that changes at least
// one row a write, anything else (BEGIN, COMMIT, a DELETE that found no
// row) other.
type Counter uint8

// The classes of Counter.
const (
	CountRead Counter = iota
	CountWrite
	CountOther
)

// Outcome is what one Conn.Exec did.
type Outcome struct {
	Counter Counter
	// RoundTrips is the number of request/response exchanges with the
	// server: 1 per statement execution, plus 1 for a ROLLBACK the driver
	// sent after an ignorable error.
	RoundTrips int
}

// Statement is one SQL statement of a workload. SQL uses '?' for
// parameters; a PostgreSQL connection renumbers them $1, $2, ... when it
// prepares. Statements are immutable and shared by all workers.
type Statement struct {
	// ID is the index in the workload's statement list and keys a
	// connection's prepared handles; -1 for a statement outside the list,
	// which always runs as text.
	ID      int
	Name    string // server-side prepared statement name, unique within a workload
	SQL     string
	Reads   bool // returns a result set
	Prepare bool // prepared on the server under --db-ps-mode=auto
}

// Arg is one statement parameter: an integer, or a string when Str is
// non-nil.
type Arg struct {
	Int int64
	Str []byte
}

// textStatement returns a statement outside any list: literal SQL run as
// a plain text query.
func textStatement(name, sql string, reads bool) *Statement {
	return &Statement{ID: -1, Name: name, SQL: sql, Reads: reads}
}

// prepared reports whether st may have a prepared handle among n.
func (st *Statement) prepared(n int) bool {
	return st.Prepare && st.ID >= 0 && st.ID < n
}

// IntArg returns an integer parameter.
func IntArg(v int64) Arg { return Arg{Int: v} }

// StrArg returns a string parameter. The connection reads b during Exec
// only.
func StrArg(b []byte) Arg {
	if b == nil {
		b = []byte{}
	}
	return Arg{Str: b}
}

// Conn is one connection to the server as a workload sees it. A Conn is
// used by one goroutine at a time.
type Conn interface {
	// Prepare readies stmts (those with Prepare set) as server-side
	// prepared statements when the connection runs in --db-ps-mode=auto;
	// otherwise it does nothing.
	Prepare(ctx context.Context, stmts []*Statement) error
	// Exec runs st with args, reads and discards any result set, and
	// classifies the result. Errors are *SQLError when the server or the
	// connection failed; an ignorable SQLError still fills Outcome's
	// RoundTrips.
	Exec(ctx context.Context, st *Statement, args []Arg) (Outcome, error)
	// Close ends the connection.
	Close() error
}

// dialFunc opens a socket, as net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// runDialFunc returns how the run workers' connections are opened:
// wrapped by rawconn under the poller model, by threadconn under the
// thread model. prepare and cleanup always use rawconn.Dial.
func runDialFunc(o *Options) dialFunc {
	if o.IOModel != IOThread {
		return rawconn.Dial
	}
	clk := o.clock()
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := threadconn.Dial(ctx, clk, network, addr)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Dialer opens the connections of a run. Dial is called concurrently.
type Dialer interface {
	// Dial opens the connection of worker n (0-based); drivers with
	// several hosts spread workers over them round-robin.
	Dial(ctx context.Context, n int) (Conn, error)
}

// SQLError is a statement the server or the connection failed.
type SQLError struct {
	// Code is the MySQL error number or the PostgreSQL SQLSTATE; a lost
	// MySQL connection reports 2013 (CR_SERVER_LOST), a lost PostgreSQL
	// connection "08006".
	Code    string
	Message string
	Query   string // the statement, with '?' placeholders
	// Ignorable means the workload restarts the transaction and counts an
	// ignored error (MySQL: Code is in --mysql-ignore-errors; PostgreSQL:
	// deadlock, serialization failure or unique violation, after which
	// the connection has rolled back).
	Ignorable bool
	// Reconnected means the connection was lost, the error was ignorable,
	// and the connection has been re-established with its statements
	// prepared again; it counts as a reconnect, not an ignored error.
	Reconnected bool
	// MissingTable names the table the server does not know, if that is
	// the error.
	MissingTable string
	Err          error
}

func (e *SQLError) Error() string {
	s := "error " + e.Code
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Query != "" {
		s += " (query: " + e.Query + ")"
	}
	return s
}

func (e *SQLError) Unwrap() error { return e.Err }

// errorKind classifies err for the event loop.
func errorKind(err error) (ignorable, reconnected bool) {
	var se *SQLError
	if errors.As(err, &se) {
		return se.Ignorable, se.Reconnected
	}
	return false, false
}

// render writes st's SQL with args in place of the '?' placeholders, the
// way sysbench emulates prepared statements: integers in decimal, strings
// between single quotes with single quotes doubled (workload strings are
// digits, letters and dashes). A '?' without a matching argument is kept.
func render(dst []byte, sql string, args []Arg) []byte {
	n := 0
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if c != '?' || n >= len(args) {
			dst = append(dst, c)
			continue
		}
		a := args[n]
		n++
		if a.Str == nil {
			dst = strconv.AppendInt(dst, a.Int, 10)
			continue
		}
		dst = append(dst, '\'')
		for _, b := range a.Str {
			if b == '\'' {
				dst = append(dst, b)
			}
			dst = append(dst, b)
		}
		dst = append(dst, '\'')
	}
	return dst
}

// dollarParams rewrites '?' placeholders as $1, $2, ... for PostgreSQL.
func dollarParams(sql string) string {
	out := make([]byte, 0, len(sql)+8)
	n := 0
	for i := 0; i < len(sql); i++ {
		if sql[i] == '?' {
			n++
			out = append(out, '$')
			out = strconv.AppendInt(out, int64(n), 10)
			continue
		}
		out = append(out, sql[i])
	}
	return string(out)
}

// missingTableError is the message for a run or cleanup against a table
// that prepare has not created.
func missingTableError(table, workload string) error {
	return fmt.Errorf("table %s does not exist (run `sluice bench %s prepare` first)", table, workload)
}

// tableError is a driver's reading of the server error behind a failed
// admin statement; its zero value is an error that is not the server's,
// or not about a table.
type tableError struct {
	code, message string // the server's error number or SQLSTATE, and message
	exists        bool   // the table to create exists
	missing       bool   // a table the statement names does not exist
	table         string // with missing, the table the message names
}

// adminError is what an admin statement query that failed with err (nil:
// did not fail) returns: ctx's error once ctx is done, a hint to clean up
// for a table that exists, an SQLError for a missing table, else err
// behind the statement's first line.
func adminError(ctx context.Context, query string, err error, te tableError) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	switch {
	case te.exists:
		return fmt.Errorf("%s (run cleanup first): %w", te.message, err)
	case te.missing:
		return &SQLError{Code: te.code, Message: te.message, Query: query, MissingTable: te.table, Err: err}
	}
	return fmt.Errorf("%s: %w", firstLine(query), err)
}

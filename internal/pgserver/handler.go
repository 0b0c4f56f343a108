package pgserver

import (
	"context"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Handler runs one session's statements. The server calls it from the
// connection's goroutine only, one method at a time; a method sends its
// results through the session's Conn.
//
// An error a method returns is the statement's: the server sends
// Error(err) and, in the extended protocol, discards messages until
// Sync. A *ConnError (from the Conn) ends the session instead.
type Handler interface {
	// Query runs the statements of a simple Query message in order,
	// stopping at the first error, which it returns. The server sends
	// ReadyForQuery after it.
	Query(ctx context.Context, sql string) error
	// Parse, Bind, Describe, Execute and Close serve the extended
	// protocol's messages, sending ParseComplete, BindComplete,
	// ParameterDescription / RowDescription / NoData, the rows and
	// CommandComplete or PortalSuspended, and CloseComplete.
	Parse(ctx context.Context, m *pgproto3.Parse) error
	Bind(ctx context.Context, m *pgproto3.Bind) error
	Describe(ctx context.Context, m *pgproto3.Describe) error
	Execute(ctx context.Context, m *pgproto3.Execute) error
	Close(ctx context.Context, m *pgproto3.Close) error
	// Sync ends an extended-protocol exchange, before ReadyForQuery:
	// the unnamed portal and, outside a transaction, every portal close.
	Sync()
	// TxStatus is the ReadyForQuery status: 'I' idle, 'T' in a
	// transaction block, 'E' in a failed one.
	TxStatus() byte
	// Error converts a statement error into its ErrorResponse and
	// records its effect on the session (a block that fails).
	Error(err error) *pgproto3.ErrorResponse
	// End releases the session once the connection is done.
	End()
}

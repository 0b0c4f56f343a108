// Package viewsql runs SQL over the admin console's views: it loads a
// snapshot of views (package views' tables, typed INTEGER, REAL or TEXT)
// into a new in-memory SQLite database (modernc.org/sqlite through
// database/sql, driver "sqlite", one private database per query) and
// runs one SELECT there, so WHERE, ORDER BY, GROUP BY, aggregates, joins
// and subqueries work without a query engine of sluice's own.
//
// Safety: the statement is one (package ddl's Query.SQL guarantees it:
// no semicolon outside a quoted token), the connection is query_only,
// and an authorizer allows reading tables, SELECT, recursive CTEs and
// function calls only (no PRAGMA, ATTACH, DETACH, writes, schema
// changes, transactions or load_extension). The caller bounds the time
// with ctx, which interrupts SQLite; Options.MaxRows bounds the rows
// (DefaultMaxRows, 100,000), beyond which the query fails with 54000.
// Memory is bounded as well, each limit failing with 54000 before the
// memory is taken: a string or BLOB at most Options.MaxValueBytes
// (SQLITE_LIMIT_LENGTH, 16 MiB by default), a result of at most
// Options.MaxResultBytes of values (64 MiB), and SQLite's soft and hard
// heap limits (SoftHeapBytes, HardHeapBytes; process-wide, so every
// SQLite database of the process shares them). After a result larger
// than 8 MiB the Go heap's free memory is given back to the system.
// Query runs on the caller's goroutine: the caller decides where it
// computes (the admin console runs it off the relays' CPUs, package
// offpath).
// No SQL function is registered (modernc's registration is
// process-wide).
//
// Errors are *ddl.Error with a SQLSTATE and SQLite's message: 42601
// syntax, 42P01 unknown table (0A000 for a catalog the console does not
// have: pg_..., gs_..., information_schema), 42703 unknown column, 42883 unknown
// function, 42501 refused by the authorizer, 25006 a write, 57014 ctx
// ended, 54000 too many rows or a size or memory limit, else XX000.
//
// The package keeps no state; Query is safe for concurrent use (each
// call has its own database).
package viewsql

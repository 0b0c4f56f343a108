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
// No SQL function is registered (modernc's registration is
// process-wide).
//
// Errors are *ddl.Error with a SQLSTATE and SQLite's message: 42601
// syntax, 42P01 unknown table (0A000 for a catalog the console does not
// have: pg_..., gs_..., information_schema), 42703 unknown column, 42883 unknown
// function, 42501 refused by the authorizer, 25006 a write, 57014 ctx
// ended, 54000 too many rows, else XX000.
//
// The package keeps no state; Query is safe for concurrent use (each
// call has its own database).
package viewsql

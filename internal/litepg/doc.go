// Package litepg is the lab's embedded database: an SQLite database
// (modernc.org/sqlite, pure Go) served over the PostgreSQL v3 wire
// protocol, so that benchmark and lab traffic is real PostgreSQL
// protocol through a real proxy route without a PostgreSQL installation.
//
// It is a lab backend, not a PostgreSQL replacement. It owns the
// protocol (startup, authentication, simple and extended query, COPY,
// cancellation), the translation of the PostgreSQL dialect that
// benchmark clients send into SQLite's, and the mapping of types and
// errors between the two.
//
// # What it serves
//
//   - Startup: SSLRequest and GSSENCRequest are refused with 'N'; trust,
//     cleartext or MD5 password authentication; the usual ParameterStatus
//     report (server_version "15.0 (litepg)", UTF8 encodings, DateStyle
//     ISO, TimeZone UTC, standard_conforming_strings on), BackendKeyData
//     and ReadyForQuery with the transaction status (I, T or E).
//   - Simple query (several statements per message) and the extended
//     protocol: Parse, Bind (text and binary parameters), Describe,
//     Execute (with a row limit, suspending the portal), Close, Sync,
//     Flush. After an error in the extended protocol messages are
//     discarded until Sync, as in PostgreSQL.
//   - CancelRequest: the session's running statement is interrupted and
//     fails with 57014; the session stays usable.
//   - SQL: SELECT, INSERT, UPDATE, DELETE (with RETURNING), VALUES, WITH,
//     TABLE, CREATE/DROP TABLE, INDEX and VIEW, ALTER TABLE, TRUNCATE,
//     transaction control and savepoints, SET/RESET/SHOW (settings are
//     recorded for SHOW and otherwise ignored), EXPLAIN (SQLite's query
//     plan), ANALYZE, VACUUM, DEALLOCATE, DISCARD ALL, and SQLite's PRAGMA.
//   - COPY table FROM STDIN in text, CSV and binary format and
//     COPY table|(query) TO STDOUT in the same formats; COPY TO streams
//     row by row.
//   - Translation: SERIAL, BIGSERIAL and identity columns become INTEGER
//     PRIMARY KEY AUTOINCREMENT (they must be the single-column primary
//     key); $n parameters; x::type and CAST to PostgreSQL types;
//     generate_series(start, stop[, step]) in FROM (rewritten to a
//     recursive common table expression); E'...' and dollar-quoted
//     strings; ILIKE; IS [NOT] DISTINCT FROM; the public schema prefix;
//     greatest/least. Functions SQLite lacks (repeat, pg_sleep, md5,
//     lpad, split_part, now, version, ...) are registered on the server's
//     own SQLite driver, never globally, so two Servers in one process are
//     independent.
//
// # What it does not serve
//
// Anything else gets an ErrorResponse: 0A000 (feature_not_supported) for
// statements and features it recognizes but does not implement (arrays,
// LISTEN/NOTIFY, cursors, SQL-level PREPARE, schemas other than public,
// the system catalogs, replication, two-phase commit, TLS), and 42601 for
// syntax errors, with SQLite's message. SQLite semantics show through:
// LIKE is case-insensitive for ASCII, CHAR(n) is not blank-padded, types
// are not enforced, NUMERIC and REAL are reported as float8 and integers
// as int8 (SMALLINT and INT4 columns as int2 and int4), SET inside a
// rolled-back transaction stays set, and several statements in one simple
// Query are not wrapped in one transaction.
//
// # Types
//
// Result column types come from SQLite's declared column types and,
// for expressions, from the statement's text (count and sum give int8,
// repeat gives text, casts give their type); what stays unknown is
// reported as text (in the simple protocol, as the type of the first
// row's value). Parameter types are inferred from the column a parameter
// is compared with, assigned to or inserted into: int8 for integer
// columns, the column's type otherwise, text when nothing is known.
// Every reported type (bool, bytea, int2, int4, int8, float4, float8,
// text, varchar, bpchar, date, timestamp, timestamptz, void) has text
// and binary encodings.
//
// # Limits
//
// A frontend message may be at most 64 MiB (PostgreSQL allows 1 GB); a
// longer one ends the session with FATAL 54000, after which the server
// discards what the client still sends for up to 5 s (package linger), so
// the client reads the error rather than a reset. A client that disconnects while a statement runs is noticed when the
// statement ends, as in PostgreSQL. Each Server registers its SQL
// functions on a SQLite driver of its own; the driver keeps such
// registrations for the life of the process, a few kilobytes per Server.
//
// # Concurrency
//
// Each session has its own SQLite connection to the shared database file
// in WAL mode. SQLite admits one writer at a time, so the server keeps a
// write lock: a statement that writes, or a transaction block that has
// written, holds it until it ends; waiting for it is bounded by
// Options.BusyTimeout and fails with 40001 (serialization_failure), as
// do SQLite's own busy errors, so clients retry. Readers never wait. See
// TxMode for when a transaction block takes the lock.
package litepg

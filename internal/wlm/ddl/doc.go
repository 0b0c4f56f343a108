// Package ddl parses the statements of the sluice admin console: the
// workload-management DDL of GaussDB(DWS), which no SQL library knows,
// plus the few PostgreSQL statements a console needs.
//
//	CREATE EXCEPT RULE name WITH (bandwidth=128, elapsedtime=60, action='penalty')
//	ALTER EXCEPT RULE name WITH (...)      DROP EXCEPT RULE [IF EXISTS] name [CASCADE]
//	CREATE RESOURCE POOL name [WITH (except_rule='r1,r2', weight=2, ...)]
//	ALTER RESOURCE POOL name WITH (...)    DROP RESOURCE POOL [IF EXISTS] name [CASCADE]
//	CREATE USER name RESOURCE POOL 'pool' [PASSWORD 'x']
//	ALTER USER name RESOURCE POOL 'pool'   DROP USER [IF EXISTS] name
//	CREATE LINK [IF NOT EXISTS] name [WITH (capacity='1Gbit', delay='10ms')]
//	ALTER LINK name WITH (...)             DROP LINK [IF EXISTS] name
//	ALTER ROUTE name WITH (link=wan, pool='p', delay='5ms', ...)
//	ALTER ROUTE name RESET (delay, ...)
//	SET name = value | SET name TO value | SET name TO DEFAULT
//	SHOW name | SHOW ALL | RESET name | RESET ALL
//	SHOW CLUSTER list                       (a list gathered over the fleet)
//	SELECT targets [FROM [schema.]table] [LIMIT n]
//	SELECT ... | WITH ... | VALUES ...      any other query (Query), for an SQL engine
//	CANCEL STATEMENT id                    SELECT pg_cancel_backend(id)
//	TERMINATE SESSION id                   SELECT pg_terminate_backend(id)
//	CANCEL STATEMENT id ON INSTANCE 'b'    SELECT pg_cancel_backend(id, 'b')
//	TERMINATE SESSION id ON INSTANCE 'b'   SELECT pg_terminate_backend(id, 'b')
//
// The parser is a hand-written lexer and recursive-descent parser. It
// checks syntax only: which option names exist and what their values
// mean is decided by the workload manager, which reports such errors
// against the positions recorded here (Option.NamePos, Value.Pos). One
// tokenizer, a byte-level scanner with the lexical rules of a dialect
// (scan.go), reads both the console's text and a statement bound for a
// database; it counts character positions as it goes.
//
// Lexical rules follow PostgreSQL: keywords and bare identifiers are
// case-insensitive and folded to lower case; "quoted identifiers" and
// 'strings' (a doubled quote stands for one) keep their case; -- and nested /* */
// comments are white space; statements are separated by semicolons and a
// trailing one is optional. A number may carry a unit without a space
// (10ms, 1.5GB, 256MB/s, 0.1%) and is then one token. IF EXISTS is
// accepted before or after the object kind of a DROP; CREATE takes IF
// NOT EXISTS after the object kind.
//
// SplitUserPool serves the other side of the proxy: it reads one
// statement bound for a database (PostgreSQL or MySQL dialect, each with
// its own quotes and comments) and, when it is CREATE USER or ALTER USER
// with a RESOURCE POOL clause, takes the clause out by token position,
// leaving the rest byte for byte for the database. Text it cannot read
// with certainty is reported as not a user statement, so it reaches the
// database unchanged; it never panics either, and has a fuzz target.
//
// Every error is an *Error carrying a SQLSTATE and the 1-based character
// position of the offending token, as PostgreSQL's ErrorResponse does:
// 42601 for syntax errors (including unknown statements, at their first
// token, and the end of input, at one past the last character) and 0A000
// for constructs the console recognises but does not support (role
// attributes such as LOGIN on CREATE USER). A Query is checked for
// balanced quotes and parentheses only: its SQL engine judges the rest. Parse
// never panics, whatever its input; a fuzz target checks this.
package ddl

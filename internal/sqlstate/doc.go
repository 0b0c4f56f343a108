// Package sqlstate is sluice's one table of SQLSTATE codes, the
// five-character condition codes both protocols carry in their errors
// (PostgreSQL's ErrorResponse field C, MySQL's ERR packet), named as
// PostgreSQL's Appendix A names them, and the one mapping of an SQLite
// error to the SQLSTATE a PostgreSQL client expects (FromSQLite), used
// by both places sluice runs SQLite: the console's views and its
// PostgreSQL-speaking engine.
//
// The package is constants and pure functions: no state, safe for
// concurrent use, and it imports nothing of sluice's.
package sqlstate

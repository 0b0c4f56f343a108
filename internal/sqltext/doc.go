// Package sqltext holds the lexical rules of PostgreSQL's and MySQL's
// SQL text, once, for every package that reads it: the console's DDL
// parser and the pool splitter (wlm/ddl), the secret redactor (redact)
// and the console's PostgreSQL-to-SQLite translator (litepg).
//
// It owns where things end, not what they mean: white space, the --,
// # and /* */ comments (nested in PostgreSQL, not in MySQL), MySQL's
// executable comments (/*! and /*M!), quoted strings and names with a
// doubled quote for one and, where the dialect or prefix says so,
// backslash escapes, $tag$ dollar quotes, bare words and numbers.
// Decoding a literal's value, folding a name's case and reporting an
// error in a caller's own terms stay with the caller.
//
// Every function takes the text and a byte offset and returns byte
// offsets within the text; none panics on any input, and an
// unterminated quote or comment is reported (closed false) with its end
// at the end of the text. Scanner reads whole tokens by these rules for
// callers that want them one at a time.
//
// The package keeps no state; a Scanner is not safe for concurrent use.
package sqltext

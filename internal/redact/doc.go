// Package redact hides the passwords in SQL text, so that sluice can keep,
// show and log the statements its clients send: SQL returns the text with
// every literal that holds a password replaced by '***', in PostgreSQL's
// or MySQL's (and MariaDB's) lexical rules, and every other byte as it
// was.
//
// A literal is a password when it follows, comments and white space
// aside:
//
//   - a word ending in PASSWORD, or such a word and "(" or "=":
//     [ENCRYPTED] PASSWORD 'x', IDENTIFIED BY PASSWORD 'hash',
//     PASSWORD('x'), OLD_PASSWORD('x'), MASTER_PASSWORD = 'x', and
//     user mapping OPTIONS (password 'x');
//   - BY, AS, USING, REPLACE or "=" in a statement after IDENTIFIED or
//     SET PASSWORD: IDENTIFIED BY 'x', IDENTIFIED WITH plugin BY | AS 'x',
//     IDENTIFIED VIA plugin USING 'x', SET PASSWORD FOR u = 'x', and the
//     REPLACE 'current' of MySQL 8;
//   - another password literal (MySQL joins adjacent strings: 'a' 'b').
//
// A literal is a string in any quoting the dialect knows: '...' with a
// quote doubled, PostgreSQL's E'...' (backslash escapes), U&'...' and
// $tag$...$tag$, MySQL's '...' and "..." (backslash escapes), N'...',
// X'...', B'...' and a _charset introducer before one; a quoted name
// ("..." in PostgreSQL, `...` in MySQL) or a number in such a place is
// hidden too, though no server takes it as a password. A MySQL
// executable comment (/*! ... */, /*M! ... */) is read as code; other
// comments are skipped.
//
// At the limits: a password literal that does not end (text cut short by
// a length limit, or malformed) is hidden through the end of the text;
// one holding a backslash is hidden to where it ends under either reading
// of backslashes (standard_conforming_strings, NO_BACKSLASH_ESCAPES), so
// a server setting that reads it differently shows nothing of it. Other
// literals are read by the dialect's defaults, so under such a setting a
// literal before a password could hide the PASSWORD keyword from the
// lexer.
//
// SQL inside a string is read as SQL too, up to four strings deep: a DO
// block's $$body$$, the string EXECUTE runs, MySQL's PREPARE s FROM
// '...'; its passwords are hidden in the string's own
// quoting ('...' with doubled quotes, or the dollar quote as it was),
// also when the text is cut short inside the string (it is read as far as
// it goes and written back still open). A format() string with a
// placeholder right after PASSWORD (%L, %s, %2$L; comments aside, or in
// quotes: PASSWORD '%s') makes the argument that fills it a password:
// format('ALTER ROLE %I PASSWORD %L VALID UNTIL %L', 'bob', 'x', 'y')
// hides 'x'; a string that ends in PASSWORD (comments aside, or with a
// quote after it that the string leaves open) makes the literal joined
// to it with || a password, also through a function's call: 'ALTER ROLE
// r PASSWORD ' || quote_literal('x') hides 'x'. Inside a string holding SQL that builds a
// password so (a DO body, a function's body), the password may come from
// a variable, however it got there (:=, =, DEFAULT, SELECT ... INTO,
// pieces joined with ||): conservatively, every literal there is hidden
// but the SQL strings that build the password or held one of their own,
// so a RAISE NOTICE 'text' or a role's name in such a body is hidden too.
// Text cut short before the body shows PASSWORD cannot be told from any
// other and is kept. An escape string (E'...')
// holding SQL is read as SQL too; when it holds a password it is written
// back as E'...' with its quotes and backslashes escaped and its control
// bytes as \xhh, the same string in another spelling. A password inside
// a string that is not SQL (a connection string passed to dblink, say),
// in a MySQL backslash-escaped string holding SQL, or in a column value
// (INSERT INTO users VALUES ('x')) is not recognised.
//
// SQL is a pure function, safe for concurrent use, and never panics. Text
// that holds neither PASSWORD nor IDENTIFIED (in any case) is returned as
// it is without allocating, after a scan of its bytes; other text is
// lexed once and copied only when it holds a password.
package redact

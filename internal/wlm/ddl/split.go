package ddl

import (
	"strings"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/enum"
	"github.com/sluicelab/sluice/internal/sqltext"
)

// Dialect is the SQL dialect of a statement on its way to a database,
// which decides how SplitUserPool reads quotes, comments and names.
type Dialect uint8

// Dialects.
const (
	// PostgreSQL reads 'strings' (standard_conforming_strings on: a
	// backslash is an ordinary character), E'strings' with backslash
	// escapes, $tag$dollar quotes$tag$, "identifiers", -- and nested /* */
	// comments. Bare names fold to lower case.
	PostgreSQL Dialect = iota + 1
	// MySQL reads 'strings' and "strings" with backslash escapes (the
	// default sql_mode), `identifiers`, #, "-- " and /* */ comments, and
	// names of the form user@host. Names keep their case.
	MySQL
)

// String returns the dialect's name.
func (d Dialect) String() string { return enum.Name(dialectNames, int(d), "dialect") }

// dialectNames leaves the zero Dialect, which is no dialect, unnamed.
var dialectNames = []string{PostgreSQL: "postgresql", MySQL: "mysql"}

// UserPool is a CREATE USER or ALTER USER statement carrying a RESOURCE
// POOL clause, split in two: the binding, which sluice keeps in its
// catalog, and the rest, which the database runs.
type UserPool struct {
	// Alter is true for ALTER USER, false for CREATE USER.
	Alter bool
	// User is the user as the database names it and as a session's
	// login reports it: PostgreSQL folds a bare name to lower case and
	// cuts names at 63 bytes; MySQL keeps the case and the binding
	// leaves out the host of user@host.
	User string
	// Pool is the pool as written: Kind String for a quoted name (kept
	// as written), Word for a bare one (the workload manager folds it),
	// Default for DEFAULT. Pos is its 1-based character position in the
	// statement.
	Pool Value
	// Rest is the statement without the clause, byte for byte otherwise.
	// For MySQL a PASSWORD 'x' clause (optionally ENCRYPTED or
	// UNENCRYPTED) becomes IDENTIFIED BY 'x', and a WITH that only
	// introduced the RESOURCE POOL clause goes with it.
	Rest string
}

// mysqlResourceOptions are the MySQL and MariaDB options a WITH
// introduces in CREATE/ALTER USER.
var mysqlResourceOptions = map[string]bool{
	"max_queries_per_hour": true, "max_updates_per_hour": true,
	"max_connections_per_hour": true, "max_user_connections": true,
	"max_statement_time": true,
}

// pgRoleWords are PostgreSQL role specifications that are not role
// names, and names PostgreSQL refuses to create.
var pgRoleWords = map[string]bool{
	"current_user": true, "session_user": true, "current_role": true,
	"user": true, "all": true, "public": true, "none": true,
}

// pgNameLen is the longest PostgreSQL identifier in bytes (NAMEDATALEN-1).
const pgNameLen = 63

// SplitUserPool splits one statement sent to a database of dialect d.
// When the statement is CREATE USER or ALTER USER naming one user and
// carrying exactly one RESOURCE POOL clause (with a quoted or bare pool
// name, or DEFAULT), it returns the user, the pool and the rest of the
// statement, and true. Any other text returns false and should be sent
// unchanged. Position in the text comes from the dialect's own lexical
// rules, so the clause is found only outside strings, quoted names and
// comments, and everything else is kept byte for byte.
//
// Anything SplitUserPool cannot read with certainty returns false: text
// that does not lex (an unterminated quote or comment), several
// statements, several users (MySQL), the words RESOURCE or POOL anywhere
// else, a pool written in a form that needs decoding (E'...', U&'...',
// a string holding a backslash), a pool followed by anything but a
// keyword or the end, ALTER USER ... SET/RESET/RENAME, a role
// specification such as CURRENT_USER, and MySQL executable comments
// (/*! ... */). The database then sees the statement as written and
// reports the RESOURCE POOL clause as its own syntax error. SplitUserPool
// never panics.
func SplitUserPool(sql string, d Dialect) (UserPool, bool) {
	if !containsPool(sql) {
		return UserPool{}, false // the common case, without lexing
	}
	toks, ok := scan(sql, d)
	if !ok {
		return UserPool{}, false
	}
	// toks ends with one tEOF token; drop a final semicolon.
	end := len(toks) - 1
	if end > 0 && toks[end-1].isOp(';') {
		end--
	}
	toks = toks[:end]

	i := 0
	word := func(w string) bool {
		if i < len(toks) && toks[i].isWord(w) {
			i++
			return true
		}
		return false
	}
	var out UserPool
	switch {
	case word("create"):
		if d == MySQL && word("or") && !word("replace") {
			return UserPool{}, false
		}
	case word("alter"):
		out.Alter = true
	default:
		return UserPool{}, false
	}
	if !word("user") {
		return UserPool{}, false
	}
	if d == MySQL && word("if") {
		if !out.Alter && !word("not") || !word("exists") {
			return UserPool{}, false
		}
	}
	name, next, ok := userName(sql, toks, i, d)
	if !ok {
		return UserPool{}, false
	}
	out.User, i = name, next
	if out.Alter && d == PostgreSQL && i < len(toks) {
		switch w := toks[i]; {
		case w.isWord("set"), w.isWord("reset"), w.isWord("rename"), w.isWord("in"):
			return UserPool{}, false
		}
	}

	// Find the clause among the options: exactly one RESOURCE POOL at
	// depth zero, no other RESOURCE or POOL, one statement, one user.
	clause := -1
	depth := 0
	for k := i; k < len(toks); k++ {
		t := toks[k]
		switch {
		case t.isOp('('):
			depth++
		case t.isOp(')'):
			depth--
		case t.isOp(';'):
			return UserPool{}, false
		case t.isOp(',') && depth == 0 && d == MySQL:
			return UserPool{}, false
		case t.isWord("resource"):
			if clause >= 0 || depth != 0 || k+1 >= len(toks) || !toks[k+1].isWord("pool") {
				return UserPool{}, false
			}
			clause = k
			k++ // the POOL
		case t.isWord("pool"):
			return UserPool{}, false
		}
	}
	if clause < 0 || clause+2 >= len(toks) {
		return UserPool{}, false
	}
	v := toks[clause+2]
	val := Value{Text: v.val, Pos: v.pos}
	switch {
	case v.kind == tString && !v.raw, v.kind == tQIdent && !v.raw:
		val.Kind = String
	case v.kind == tIdent && v.val == "default":
		val.Kind, val.Text = Default, "default"
	case v.kind == tIdent && v.val != "resource" && v.val != "pool":
		val.Kind, val.Text = Word, sql[v.start:v.end]
	default:
		return UserPool{}, false
	}
	if clause+3 < len(toks) && toks[clause+3].kind != tIdent {
		return UserPool{}, false
	}
	out.Pool = val

	// Edits, in text order, that make the rest: the clause goes and, for
	// MySQL, PASSWORD 'x' becomes IDENTIFIED BY 'x'. A PASSWORD right
	// after the clause does not look back into it: a pool named
	// ENCRYPTED or BY is no part of the password.
	s, e := toks[clause].start, v.end
	if d == MySQL && clause > i && toks[clause-1].isWord("with") &&
		(clause+3 >= len(toks) || !mysqlResourceOptions[toks[clause+3].val]) {
		s = toks[clause-1].start
	}
	edits := make([]edit, 0, 4) // the clause and a few passwords, without a heap allocation
	for k, first := i, i; k < len(toks); k++ {
		switch {
		case k == clause:
			edits = append(edits, removal(sql, s, e))
			k += 2 // POOL and the pool
			first = k + 1
		case d == MySQL:
			if pw, ok := mysqlPassword(toks, k, first); ok {
				edits = append(edits, pw)
			}
		}
	}
	var b strings.Builder
	b.Grow(len(sql) + 8)
	at := 0
	for _, ed := range edits {
		b.WriteString(sql[at:ed.start])
		b.WriteString(ed.with)
		at = ed.end
	}
	b.WriteString(sql[at:])
	out.Rest = b.String()
	return out, true
}

// containsPool reports whether s holds "pool" in any case, which every
// statement with a RESOURCE POOL clause does.
func containsPool(s string) bool {
	for i := 0; i+4 <= len(s); i++ {
		if s[i]|0x20 == 'p' && s[i+1]|0x20 == 'o' && s[i+2]|0x20 == 'o' && s[i+3]|0x20 == 'l' {
			return true
		}
	}
	return false
}

// edit replaces sql[start:end] with with.
type edit struct {
	start, end int
	with       string
}

// removal removes sql[s:e] and the white space after it (or, when none
// follows, the white space before it), keeping one space where two
// tokens would otherwise touch.
func removal(sql string, s, e int) edit {
	e2 := e
	for e2 < len(sql) && sqltext.IsSpace(sql[e2]) {
		e2++
	}
	if e2 > e {
		return edit{start: s, end: e2}
	}
	s2 := s
	for s2 > 0 && sqltext.IsSpace(sql[s2-1]) {
		s2--
	}
	if e == len(sql) || sql[e] == ';' {
		return edit{start: s2, end: e}
	}
	return edit{start: s2, end: e, with: " "}
}

// mysqlPassword turns the PASSWORD 'x' of a CREATE/ALTER USER at toks[k]
// into IDENTIFIED BY 'x', looking back no further than toks[first]. A
// PASSWORD after BY (IDENTIFIED BY PASSWORD 'hash'), before anything but
// a string (PASSWORD EXPIRE, PASSWORD('x')) or inside parentheses is
// left alone.
func mysqlPassword(toks []token, k, first int) (edit, bool) {
	t := toks[k]
	if !t.isWord("password") || k+1 >= len(toks) || toks[k+1].kind != tString {
		return edit{}, false
	}
	start := t.start
	if k > first {
		switch p := toks[k-1]; {
		case p.isWord("by"), p.isOp('('):
			return edit{}, false
		case p.isWord("encrypted"), p.isWord("unencrypted"):
			start = p.start
		}
	}
	return edit{start: start, end: t.end, with: "IDENTIFIED BY"}, true
}

// userName reads the user of CREATE/ALTER USER at toks[i] and returns it
// with the index of the token after it.
func userName(sql string, toks []token, i int, d Dialect) (string, int, bool) {
	if i >= len(toks) {
		return "", 0, false
	}
	t := toks[i]
	var name string
	switch {
	case t.kind == tIdent && (t.val == "resource" || t.val == "pool"):
		return "", 0, false
	case t.kind == tIdent && d == PostgreSQL:
		if pgRoleWords[t.val] {
			return "", 0, false
		}
		name = t.val
	case t.kind == tIdent:
		if t.val == "current_user" {
			return "", 0, false
		}
		name = sql[t.start:t.end]
	case t.kind == tQIdent && !t.raw:
		name = t.val
	case t.kind == tString && !t.raw && d == MySQL:
		name = t.val
	default:
		return "", 0, false
	}
	if name == "" {
		return "", 0, false
	}
	i++
	if d == PostgreSQL {
		// A name that clips to nothing (no character boundary within
		// pgNameLen bytes: invalid UTF-8) is not read with certainty.
		if name = clipName(name, pgNameLen); name == "" {
			return "", 0, false
		}
		return name, i, true
	}
	// MySQL: an optional @host, quoted or as a run of touching tokens.
	if i < len(toks) && toks[i].isOp('@') {
		i++
		if i >= len(toks) {
			return "", 0, false
		}
		if h := toks[i]; h.kind == tString || h.kind == tQIdent {
			i++
		} else {
			at := toks[i-1].end
			for i < len(toks) && toks[i].start == at && !toks[i].isOp(';') && !toks[i].isOp(',') &&
				toks[i].kind != tString && toks[i].kind != tQIdent {
				at = toks[i].end
				i++
			}
			if at == toks[i-1].end && toks[i-1].isOp('@') {
				return "", 0, false
			}
		}
	}
	return name, i, true
}

// clipName cuts s to at most n bytes at a UTF-8 boundary, as PostgreSQL
// truncates identifiers.
func clipName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// scan splits sql into tokens by the lexical rules of dialect d (for
// MySQL, those of MySQL and MariaDB under the default sql_mode); the last
// token is always tEOF. It returns false for text it cannot split with
// certainty: an unterminated quote or comment, an empty quoted name, a
// MySQL executable comment (/*! or /*M!), or an unknown dialect.
func scan(sql string, d Dialect) ([]token, bool) {
	if d != PostgreSQL && d != MySQL {
		return nil, false
	}
	s := scanner{src: sql, d: d}
	var toks []token
	for {
		t, f := s.next()
		if f != flawNone {
			return nil, false
		}
		toks = append(toks, t)
		if t.kind == tEOF {
			return toks, true
		}
	}
}

package redact

import "strings"

// Dialect selects the lexical rules of the SQL text. The zero value is
// PostgreSQL.
type Dialect uint8

// Dialects.
const (
	// PostgreSQL reads 'strings' with standard_conforming_strings on (a
	// backslash is an ordinary character), E'strings' with backslash
	// escapes, U&'strings', $tag$dollar quotes$tag$, "names", -- and
	// nested /* */ comments.
	PostgreSQL Dialect = iota
	// MySQL reads 'strings' and "strings" with backslash escapes (the
	// default sql_mode), `names`, #, "-- " and /* */ comments, and the
	// text of executable comments /*! */ as code. MariaDB reads the same.
	MySQL
)

// Mask is what a password literal becomes.
const Mask = "'***'"

// SQL returns sql with every password literal replaced by Mask (see the
// package documentation for which literals those are); the other bytes
// are kept as they are. It returns sql itself, without allocating, when
// there is nothing to hide.
func SQL(sql string, d Dialect) string { return redact(sql, d, 0) }

// maxNesting bounds how deep redact looks into SQL inside strings
// (an EXECUTE of a quoted CREATE ROLE inside a DO body is two deep).
const maxNesting = 4

// redact is SQL at nesting depth depth.
func redact(sql string, d Dialect, depth int) string {
	if !hasKeyword(sql) {
		return sql
	}
	l := lexer{sql: sql, my: d == MySQL}
	var b strings.Builder // empty until the first password
	last := 0             // sql[last:] is not yet copied to b
	prev := other         // what the previous token makes of a literal
	ctx := false          // IDENTIFIED or SET PASSWORD seen in this statement
	afterSet := false     // the previous token is the word SET
	fmtLeft := 0          // commas to the argument a format() string's PASSWORD %L takes
	for {
		t := l.next()
		set := false
		switch t.kind {
		case tEOF:
			if b.Len() == 0 {
				return sql
			}
			b.WriteString(sql[last:])
			return b.String()
		case tWord:
			w := sql[t.start:t.end]
			switch {
			case hasSuffixFold(w, "password"):
				ctx = ctx || afterSet
				prev = password
			case l.my && w[0] == '_':
				// A character set introducer (_utf8mb4'x'): the literal
				// after it stands where the introducer does.
			case equalFold(w, "identified"):
				ctx, prev = true, other
			case ctx && (equalFold(w, "by") || equalFold(w, "as") || equalFold(w, "using") || equalFold(w, "replace")):
				prev = lead
			default:
				set = equalFold(w, "set")
				prev = other
			}
		case tOp:
			switch c := sql[t.start]; {
			case c == ',' && fmtLeft > 0:
				// format('... PASSWORD %L', ...): the argument that
				// fills the password's placeholder is the password.
				if fmtLeft--; fmtLeft == 0 {
					prev = lead
				} else {
					prev = other
				}
			case c == ';':
				ctx, prev = false, other
			case (c == '(' || c == '=') && prev == password:
				prev = opened
			case c == '=' && ctx:
				prev = lead
			default:
				prev = other
			}
		case tString, tName, tNumber:
			if prev == other || prev == secret && t.kind != tString {
				prev = other
				if t.kind != tString || depth >= maxNesting {
					break
				}
				// SQL inside a string: a DO block's body, EXECUTE's
				// argument, PREPARE ... FROM '...'. Its passwords are
				// hidden as the string's own quoting writes them; a
				// format() string ending in PASSWORD %L makes the next
				// string its password.
				inner, ok := unquote(l.sql[t.start:t.end], l.my)
				if !ok || !hasKeyword(inner) {
					break
				}
				if red := redact(inner, d, depth+1); red != inner {
					if b.Len() == 0 {
						b.Grow(len(sql))
					}
					b.WriteString(sql[last:t.start])
					b.WriteString(requote(l.sql[t.start:t.end], red))
					last = t.end
				}
				fmtLeft = formatsPassword(inner)
				break
			}
			end := t.end
			if t.kind == tString {
				end = l.secretEnd(t)
			}
			if b.Len() == 0 {
				b.Grow(len(sql))
			}
			b.WriteString(sql[last:t.start])
			b.WriteString(Mask)
			last, l.pos = end, end
			prev = other
			if t.kind == tString {
				prev = secret
			}
		}
		afterSet = set
	}
}

// What the previous token makes of a literal that follows it.
const (
	other     = iota // nothing: the literal is kept
	password         // a word ending in PASSWORD
	opened           // "(" or "=" after such a word
	lead             // BY, AS, USING, REPLACE or "=" after IDENTIFIED or SET PASSWORD
	secret           // a password literal: a string after it is one too
	formatted        // a string ending in PASSWORD %L (format()): the string after the comma is one
)

// unquote returns the text of the string literal lit: a '...' literal
// with its doubled quotes (and, in MySQL, backslash-escaped quotes) read
// as one, or the body of a $tag$...$tag$ one. It reports false for a
// literal it does not read (a prefix such as E” or X”, unterminated).
func unquote(lit string, my bool) (string, bool) {
	if tag := dollarTag(lit, 0); tag != "" {
		if len(lit) < 2*len(tag) || !strings.HasSuffix(lit, tag) {
			return "", false
		}
		return lit[len(tag) : len(lit)-len(tag)], true
	}
	if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	if my {
		body = strings.ReplaceAll(body, `\'`, "''")
	}
	return strings.ReplaceAll(body, "''", "'"), true
}

// requote writes text in the quoting of the literal lit (which unquote
// read): a dollar quote as it was, else '...' with its quotes doubled.
func requote(lit, text string) string {
	if tag := dollarTag(lit, 0); tag != "" {
		return tag + text + tag
	}
	return "'" + strings.ReplaceAll(text, "'", "''") + "'"
}

// formatsPassword returns, for s a format() string that ends with a
// PASSWORD keyword and a placeholder (%L, %s), which argument fills that
// placeholder (1 for the first after s), so that argument is a password;
// 0 for any other string.
func formatsPassword(s string) int {
	f := strings.Fields(strings.ToLower(s))
	if len(f) < 2 {
		return 0
	}
	last := strings.Trim(f[len(f)-1], "';")
	if (last != "%l" && last != "%s") || !strings.HasSuffix(f[len(f)-2], "password") {
		return 0
	}
	n := 0
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		switch s[i+1] {
		case '%':
			i++
		case 's', 'I', 'L':
			n++
			i++
		}
	}
	return n
}

// hasKeyword reports whether s contains PASSWORD or IDENTIFIED, in any
// ASCII case, anywhere: one pass over its bytes.
func hasKeyword(s string) bool {
	for i := 0; i < len(s); i++ {
		switch toLower(s[i]) {
		case 'p':
			if i+8 <= len(s) && equalFold(s[i:i+8], "password") {
				return true
			}
		case 'i':
			if i+10 <= len(s) && equalFold(s[i:i+10], "identified") {
				return true
			}
		}
	}
	return false
}

// equalFold reports whether s is lower, a lower-case ASCII word, in any
// ASCII case. Unlike strings.EqualFold it folds no other character (no
// server reads the Kelvin sign as K in a keyword).
func equalFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if toLower(s[i]) != lower[i] {
			return false
		}
	}
	return true
}

func hasSuffixFold(s, lower string) bool {
	return len(s) >= len(lower) && equalFold(s[len(s)-len(lower):], lower)
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

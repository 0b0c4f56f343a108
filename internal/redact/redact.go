package redact

import (
	"strings"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/sqltext"
)

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
	l := newLexer(sql, d == MySQL)
	var b strings.Builder // empty until the first password
	last := 0             // sql[last:] is not yet copied to b
	prev := other         // what the previous token makes of a literal
	ctx := false          // IDENTIFIED or SET PASSWORD seen in this statement
	afterSet := false     // the previous token is the word SET
	fmtLeft := 0          // commas to the argument a format() string's PASSWORD %L takes
	// In a body that builds a password into dynamic SQL (a string ending
	// in PASSWORD, filled by format() or ||), the password may come from
	// a variable: every literal assigned (:=, DEFAULT) is hidden, and
	// every string literal but the SQL that builds the password.
	dyn := depth > 0 && dynamicPassword(sql, l.my())
	for {
		t := l.next()
		set := false
		switch t.Kind {
		case sqltext.EOF:
			if b.Len() == 0 {
				return sql
			}
			b.WriteString(sql[last:])
			return b.String()
		case sqltext.Word:
			w := sql[t.Start:t.End]
			switch {
			case hasSuffixFold(w, "password"):
				ctx = ctx || afterSet
				prev = password
			case l.my() && w[0] == '_':
				// A character set introducer (_utf8mb4'x'): the literal
				// after it stands where the introducer does.
			case equalFold(w, "identified"):
				ctx, prev = true, other
			case prev == concat:
				// 'ALTER ROLE r PASSWORD ' || quote_literal('x'): a
				// function's name between || and its argument.
			case dyn && equalFold(w, "default"):
				prev = lead
			case ctx && (equalFold(w, "by") || equalFold(w, "as") || equalFold(w, "using") || equalFold(w, "replace")):
				prev = lead
			default:
				set = equalFold(w, "set")
				prev = other
			}
		case sqltext.Op:
			switch c := sql[t.Start]; {
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
			case c == '|' && (prev == pwString || prev == concat) || c == '(' && prev == concat:
				// 'ALTER ROLE r PASSWORD ' || 'x', || quote_literal('x'):
				// the literal the string is joined with is the password.
				prev = concat
			case c == ':' && dyn:
				prev = assign
			case c == '=' && prev == assign:
				prev = lead
			case (c == '(' || c == '=') && prev == password:
				prev = opened
			case c == '=' && ctx:
				prev = lead
			default:
				prev = other
			}
		case sqltext.String, sqltext.Name, sqltext.Number:
			if prev == pwString || prev == assign {
				prev = other
			}
			if prev == other || prev == secret && t.Kind != sqltext.String {
				prev = other
				if t.Kind != sqltext.String {
					break
				}
				// SQL inside a string: a DO block's body, EXECUTE's
				// argument, PREPARE ... FROM '...', also when the text
				// is cut short inside it. Its passwords are hidden as the
				// string's own quoting writes them; a format() string
				// with PASSWORD %L makes an argument after it its
				// password.
				lit := l.Src[t.Start:t.End]
				inner, open, ok := l.text(t)
				sqlText := ok && hasKeyword(inner) && depth < maxNesting
				red := inner
				if sqlText {
					red = redact(inner, d, depth+1)
				}
				// In a body that builds a password, any literal may hold
				// it: every one but the SQL that builds it, or SQL that
				// held a password of its own, is hidden (below).
				if !dyn || sqlText && (red != inner || builds(inner, l.my(), true)) {
					if !sqlText {
						break
					}
					if endsInPassword(inner, l.my()) {
						prev = pwString
					}
					if red != inner {
						if b.Len() == 0 {
							b.Grow(len(sql))
						}
						b.WriteString(sql[last:t.Start])
						if open {
							b.WriteString(requoteOpen(lit, red))
						} else {
							b.WriteString(requote(lit, red))
						}
						last = t.End
					}
					fmtLeft = formatsPassword(inner)
					break
				}
			} else if prev == concat && t.Kind == sqltext.Name {
				prev = other
				break
			}
			end := t.End
			if t.Kind == sqltext.String {
				end = l.secretEnd(t)
			}
			if b.Len() == 0 {
				b.Grow(len(sql))
			}
			b.WriteString(sql[last:t.Start])
			b.WriteString(Mask)
			last, l.Pos = end, end
			prev = other
			if t.Kind == sqltext.String {
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
	pwString         // a string ending in PASSWORD: a literal joined to it with || is one
	concat           // || after such a string (and a function's name and "("): the literal is one
	assign           // ":" in a body that builds a password dynamically: ":=" makes the literal one
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
	if !my && len(lit) >= 3 && (lit[0] == 'e' || lit[0] == 'E') && lit[1] == '\'' {
		return unescapeE(lit[2 : len(lit)-1])
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
// read): a dollar quote as it was, an escape string as E'...' with
// backslash escapes (escapeE), else '...' with its quotes doubled.
func requote(lit, text string) string {
	if tag := dollarTag(lit, 0); tag != "" {
		return tag + text + tag
	}
	if lit[0] == 'e' || lit[0] == 'E' {
		return lit[:1] + "'" + escapeE(text) + "'"
	}
	return "'" + strings.ReplaceAll(text, "'", "''") + "'"
}

// unescapeE returns the text of the body of an E'...' string: its
// backslash escapes (\b \f \n \r \t, octal \ooo, \xhh, \uXXXX,
// \UXXXXXXXX, \c for any other c) and doubled quotes read as
// PostgreSQL reads them. It reports false for a body that ends inside an
// escape or a code point out of range.
func unescapeE(body string) (string, bool) {
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\'' {
			if i+1 >= len(body) || body[i+1] != '\'' {
				return "", false
			}
			b.WriteByte('\'')
			i++
			continue
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i++; i >= len(body) {
			return "", false
		}
		switch e := body[i]; e {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := 0, 0
			for ; n < 3 && i+n < len(body) && '0' <= body[i+n] && body[i+n] <= '7'; n++ {
				v = v*8 + int(body[i+n]-'0')
			}
			b.WriteByte(byte(v))
			i += n - 1
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			v, n := 0, 0
			for ; n < max && i+1+n < len(body) && hexVal(body[i+1+n]) >= 0; n++ {
				v = v*16 + hexVal(body[i+1+n])
			}
			switch {
			case n == 0 && e == 'x':
				b.WriteByte('x') // \x with no digit is x
			case e == 'x':
				b.WriteByte(byte(v))
			case n < max || v > utf8.MaxRune:
				return "", false
			default:
				b.WriteRune(rune(v))
			}
			i += n
		default:
			b.WriteByte(e)
		}
	}
	return b.String(), true
}

// escapeE writes text as the body of an E'...' string that unescapeE
// reads back as text: backslashes and quotes escaped, control bytes as
// \xhh, every other byte as it is.
func escapeE(text string) string {
	var b strings.Builder
	b.Grow(len(text) + 8)
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			const hex = "0123456789abcdef"
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// text returns the text of the string t, open when the text ends inside
// it (cut short): then the text up to the end, read as unquote reads a
// whole literal (openBody). It reports false for a literal it does not
// read.
func (l *lexer) text(t token) (text string, open, ok bool) {
	lit := l.Src[t.Start:t.End]
	if l.open(t) {
		text, ok = openBody(lit, l.my())
		return text, true, ok
	}
	text, ok = unquote(lit, l.my())
	return text, false, ok
}

// openBody is unquote for a literal the text ends inside: the text after
// its opening quote (or $tag$), read as far as it goes; an escape string
// cut inside an escape loses that escape's bytes. It reports false for a
// prefix unquote does not read.
func openBody(lit string, my bool) (string, bool) {
	if tag := dollarTag(lit, 0); tag != "" {
		return lit[len(tag):], true
	}
	if !my && len(lit) >= 2 && (lit[0] == 'e' || lit[0] == 'E') && lit[1] == '\'' {
		body := lit[2:]
		// At most \UXXXXXXXX, ten bytes, is cut.
		for cut := 0; cut <= 10 && cut <= len(body); cut++ {
			if text, ok := unescapeE(body[:len(body)-cut]); ok {
				return text, true
			}
		}
		return "", false
	}
	if len(lit) < 1 || lit[0] != '\'' {
		return "", false
	}
	body := lit[1:]
	if my {
		body = strings.ReplaceAll(body, `\'`, "''")
	}
	return strings.ReplaceAll(body, "''", "'"), true
}

// requoteOpen is requote for a literal the text ends inside (openBody):
// the same quoting, still open.
func requoteOpen(lit, text string) string {
	q := requote(lit, text)
	if tag := dollarTag(lit, 0); tag != "" {
		return q[:len(q)-len(tag)]
	}
	return q[:len(q)-1]
}

// endsInPassword reports whether s, SQL built in a string, ends so that
// what is joined to it is a password: with a word ending in PASSWORD (and
// "(" or "=" after it), or such a word and a quote s leaves open
// (PASSWORD '), comments and white space aside.
func endsInPassword(s string, my bool) bool { return builds(s, my, false) }

// builds reports whether s, SQL built in a string, leaves a password for
// what is joined to it or, with placeholder, for a format() placeholder
// in it: a word ending in PASSWORD, perhaps with "(" or "=" after it,
// followed (comments and white space aside) by the end of s, by a quote
// that s leaves open, or, with placeholder, by a % (PASSWORD %L).
func builds(s string, my, placeholder bool) bool {
	l := newLexer(s, my)
	pw := false // the tokens since the last one are PASSWORD and ( or =
	for {
		t := l.next()
		switch {
		case t.Kind == sqltext.EOF:
			return pw
		case !pw:
		case t.Kind == sqltext.String && l.open(t):
			return true
		case t.Kind == sqltext.Op && s[t.Start] == '%':
			if placeholder {
				return true
			}
		case t.Kind == sqltext.Op && (s[t.Start] == '(' || s[t.Start] == '='):
			continue
		}
		pw = t.Kind == sqltext.Word && hasSuffixFold(s[t.Start:t.End], "password")
	}
}

// dynamicPassword reports whether sql holds a string that builds a
// password into dynamic SQL (builds, with format() placeholders), also
// a string the text ends inside.
func dynamicPassword(sql string, my bool) bool {
	l := newLexer(sql, my)
	for t := l.next(); t.Kind != sqltext.EOF; t = l.next() {
		if t.Kind != sqltext.String {
			continue
		}
		if inner, _, ok := l.text(t); ok && hasKeyword(inner) && builds(inner, my, true) {
			return true
		}
	}
	return false
}

// formatsPassword returns, for s a format() string with a placeholder
// (%L, %s, %I in either case, or %n$L naming argument n) right after a PASSWORD keyword
// (comments and white space aside, or in quotes: PASSWORD '%s'), which
// argument fills that placeholder (1 for the first after s), so that
// argument is a password; 0 for any other string.
func formatsPassword(s string) int {
	if !hasKeyword(s) {
		return 0
	}
	next := 1 // the argument the next placeholder without n$ takes
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		j := i + 1
		if s[j] == '%' {
			i = j
			continue
		}
		// %[n$][flags][width]type: the argument is n, else the next.
		arg := next
		k := j
		n := 0
		for k < len(s) && isDigit(s[k]) && n < 1000 {
			n = n*10 + int(s[k]-'0')
			k++
		}
		if k < len(s) && s[k] == '$' && n > 0 {
			arg, j = n, k+1
		}
		for j < len(s) && (s[j] == '-' || s[j] == '*' || isDigit(s[j])) {
			j++
		}
		// PostgreSQL takes s, I and L; a statement that spells one in
		// the other case fails, but is still logged.
		if j >= len(s) || toLower(s[j]) != 's' && toLower(s[j]) != 'i' && toLower(s[j]) != 'l' {
			continue
		}
		next = arg + 1
		if endsInPassword(s[:i], false) {
			return arg
		}
		i = j
	}
	return 0
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

package redact

import "strings"

// kind is a token's kind.
type kind uint8

const (
	tEOF    kind = iota
	tWord        // a bare word: keyword or name
	tString      // a string literal, with its prefix (E, N, X, B, U&, or the $tag$)
	tName        // a quoted name: "..." in PostgreSQL, `...` in MySQL
	tNumber      // digits, with letters, dots and underscores
	tOp          // one byte of anything else, or a $1 parameter
)

// token is sql[start:end]. For a string or quoted name, quote is the
// index of its opening quote character, -1 for a dollar quote.
type token struct {
	kind       kind
	start, end int
	quote      int
}

// lexer splits SQL text into tokens, skipping white space and comments.
// Every index it returns is within the text; unterminated quotes and
// comments run to its end.
type lexer struct {
	sql  string
	my   bool // MySQL's rules, else PostgreSQL's
	pos  int  // the next byte to read
	exec int  // MySQL: executable comments open, whose text is code
}

// next returns the token at or after l.pos and moves past it.
func (l *lexer) next() token {
	l.skipBlank()
	s, i := l.sql, l.pos
	if i >= len(s) {
		return token{kind: tEOF, start: len(s), end: len(s)}
	}
	t := l.scan(i)
	l.pos = t.end
	return t
}

// scan reads the token that starts at sql[i], which is neither white
// space nor a comment.
func (l *lexer) scan(i int) token {
	s := l.sql
	c := s[i]
	quoteAt := func(k int) bool { return k < len(s) && s[k] == '\'' }
	switch lc := toLower(c); {
	case c == '\'' || c == '"' && l.my:
		return l.quoted(tString, i, i, l.my)
	case c == '"' || c == '`' && l.my:
		return l.quoted(tName, i, i, false)
	case lc == 'e' && !l.my && quoteAt(i+1):
		return l.quoted(tString, i, i+1, true)
	case (lc == 'n' || lc == 'x' || lc == 'b') && quoteAt(i+1):
		return l.quoted(tString, i, i+1, l.my)
	case lc == 'u' && !l.my && i+2 < len(s) && s[i+1] == '&' && (s[i+2] == '\'' || s[i+2] == '"'):
		k := tString
		if s[i+2] == '"' {
			k = tName
		}
		return l.quoted(k, i, i+2, false)
	case c == '$' && !l.my:
		if tag := dollarTag(s, i); tag != "" {
			end := len(s)
			if j := strings.Index(s[i+len(tag):], tag); j >= 0 {
				end = i + len(tag) + j + len(tag)
			}
			return token{kind: tString, start: i, end: end, quote: -1}
		}
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		return token{kind: tOp, start: i, end: j}
	case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
		return token{kind: tNumber, start: i, end: numberEnd(s, i)}
	case isWordStart(c) || c == '$':
		j := i + 1
		for j < len(s) && isWordPart(s[j]) {
			j++
		}
		return token{kind: tWord, start: i, end: j}
	}
	return token{kind: tOp, start: i, end: i + 1}
}

// quoted returns the string or name written from sql[start] whose
// opening quote is at sql[q].
func (l *lexer) quoted(k kind, start, q int, backslash bool) token {
	return token{kind: k, start: start, end: quoteEnd(l.sql, q, backslash), quote: q}
}

// secretEnd returns where the password literal t ends under either
// reading of backslashes, so that no part of it is left out whatever
// the server's setting.
func (l *lexer) secretEnd(t token) int {
	if t.quote < 0 {
		return t.end
	}
	return max(quoteEnd(l.sql, t.quote, false), quoteEnd(l.sql, t.quote, true))
}

// quoteEnd returns the index after the quote that closes the one at
// sql[q], or len(sql) when none does. A doubled quote stands for one;
// with backslash, a backslash escapes the next byte.
func quoteEnd(sql string, q int, backslash bool) int {
	end, _ := quoteScan(sql, q, backslash)
	return end
}

// quoteScan is quoteEnd, and reports whether a quote closes the one at
// sql[q] (false: the literal runs to the end of sql).
func quoteScan(sql string, q int, backslash bool) (end int, closed bool) {
	quote := sql[q]
	for j := q + 1; j < len(sql); j++ {
		switch c := sql[j]; {
		case c == '\\' && backslash:
			j++
		case c == quote:
			if j+1 < len(sql) && sql[j+1] == quote {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return len(sql), false
}

// open reports whether the string t runs to the end of the text without
// its closing quote (text cut short, or malformed), as the lexer read it.
func (l *lexer) open(t token) bool {
	if t.kind != tString || t.end < len(l.sql) {
		return false
	}
	lit := l.sql[t.start:t.end]
	if t.quote < 0 {
		tag := dollarTag(lit, 0)
		return len(lit) < 2*len(tag) || !strings.HasSuffix(lit, tag)
	}
	backslash := l.my || t.quote == t.start+1 && toLower(l.sql[t.start]) == 'e'
	_, closed := quoteScan(l.sql, t.quote, backslash)
	return !closed
}

// dollarTag returns the opening $tag$ or $$ of a dollar-quoted string at
// sql[i] == '$', or "" if none starts there.
func dollarTag(sql string, i int) string {
	j := i + 1
	if j < len(sql) && sql[j] == '$' {
		return "$$"
	}
	if j >= len(sql) || !isWordStart(sql[j]) {
		return ""
	}
	for j < len(sql) && isWordPart(sql[j]) && sql[j] != '$' {
		j++
	}
	if j < len(sql) && sql[j] == '$' {
		return sql[i : j+1]
	}
	return ""
}

// skipBlank moves l.pos past white space and comments. In MySQL the
// opening of an executable comment (/*!, /*M!, and the version digits)
// and its closing */ are skipped, and the text between them read as code.
func (l *lexer) skipBlank() {
	s := l.sql
	for l.pos < len(s) {
		i := l.pos
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '#' && l.my || c == '-' && i+1 < len(s) && s[i+1] == '-' && (!l.my || i+2 == len(s) || s[i+2] <= ' '):
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				l.pos = i + j + 1
			} else {
				l.pos = len(s)
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if j, ok := l.executable(i); ok {
				l.exec++
				l.pos = j
			} else {
				l.pos = l.commentEnd(i)
			}
		case c == '*' && l.exec > 0 && i+1 < len(s) && s[i+1] == '/':
			l.exec--
			l.pos = i + 2
		default:
			return
		}
	}
}

// executable returns the index after the opening of a MySQL executable
// comment at sql[i:] ("/*!" or "/*M!" and version digits), and false if
// none starts there.
func (l *lexer) executable(i int) (int, bool) {
	s := l.sql
	if !l.my {
		return 0, false
	}
	j := i + 2
	if j < len(s) && s[j] == 'M' {
		j++
	}
	if j >= len(s) || s[j] != '!' {
		return 0, false
	}
	j++
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	return j, true
}

// commentEnd returns the index after the /* comment at sql[i], or
// len(sql) when it is unterminated. PostgreSQL's comments nest, MySQL's
// end at the first */.
func (l *lexer) commentEnd(i int) int {
	s := l.sql
	if l.my {
		if j := strings.Index(s[i+2:], "*/"); j >= 0 {
			return i + 2 + j + 2
		}
		return len(s)
	}
	depth := 0
	for i+1 < len(s) {
		switch {
		case s[i] == '/' && s[i+1] == '*':
			depth++
			i += 2
		case s[i] == '*' && s[i+1] == '/':
			depth--
			i += 2
		default:
			i++
		}
		if depth == 0 {
			return i
		}
	}
	return len(s)
}

// numberEnd returns the index after a number at sql[i]: digits, letters,
// dots and underscores (0x1F, 1.5e3, 1_000), with a sign after an
// exponent.
func numberEnd(sql string, i int) int {
	for i < len(sql) {
		c := sql[i]
		if !isDigit(c) && c != '.' && !isWordStart(c) {
			return i
		}
		i++
		if (c == 'e' || c == 'E') && i+1 < len(sql) && (sql[i] == '+' || sql[i] == '-') && isDigit(sql[i+1]) {
			i++
		}
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isWordStart reports whether a bare word can start with c: a letter, an
// underscore or a byte of a multi-byte character.
func isWordStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c >= 0x80
}

// isWordPart reports whether c can continue a bare word.
func isWordPart(c byte) bool { return isWordStart(c) || isDigit(c) || c == '$' }

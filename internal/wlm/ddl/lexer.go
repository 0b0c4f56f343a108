package ddl

import (
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// describe returns the token as PostgreSQL quotes it in "at or near".
func (t token) describe(src string) string {
	if t.kind == tEOF {
		return "end of input"
	}
	return `"` + src[t.start:t.end] + `"`
}

// lex splits the console's text src, which must be valid UTF-8, into
// tokens by the console's rules, dropping white space and comments. The
// last token is always tEOF. An error is an *Error at the 1-based
// character position of what could not be read.
func lex(src string) ([]token, error) {
	s := scanner{src: src, d: PostgreSQL, console: true}
	var toks []token
	for {
		t, f := s.next()
		rest := src[t.start:]
		switch f {
		case flawNone:
			toks = append(toks, t)
			if t.kind == tEOF {
				return toks, nil
			}
			continue
		case flawEmptyName:
			return nil, Errorf(sqlstate.SyntaxError, t.pos, "zero-length delimited identifier at or near \"\"\"\"")
		case flawChar:
			c, _ := utf8.DecodeRuneInString(rest)
			return nil, Errorf(sqlstate.SyntaxError, t.pos, "syntax error at or near \"%c\"", c)
		}
		switch rest[0] {
		case '\'':
			return nil, Errorf(sqlstate.SyntaxError, t.pos, "unterminated quoted string at or near \"%s\"", clip(rest))
		case '"':
			return nil, Errorf(sqlstate.SyntaxError, t.pos, "unterminated quoted identifier at or near \"%s\"", clip(rest))
		}
		return nil, Errorf(sqlstate.SyntaxError, t.pos, "unterminated /* comment at or near \"%s\"", clip(rest))
	}
}

// clip returns up to 20 characters of s for messages.
func clip(s string) string {
	n := 0
	for i := range s {
		if n == 20 {
			return s[:i] + "..."
		}
		n++
	}
	return s
}

package ddl

import (
	"strings"
	"unicode"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // bare identifier or keyword; val is lower case
	tQIdent         // "quoted identifier"; val is unquoted
	tString         // 'string'; val is unquoted
	tNumber         // 12, 1.5, 1e3, 10ms, 256MB/s, 0.1%; val as written
	tOp             // one punctuation character; val is that character
)

type token struct {
	kind tokKind
	val  string
	pos  int // 1-based character position of the first character
	end  int // 0-based character index just past the token
}

// describe returns the token as PostgreSQL quotes it in "at or near".
func (t token) describe(src []rune) string {
	if t.kind == tEOF {
		return "end of input"
	}
	return `"` + string(src[t.pos-1:t.end]) + `"`
}

// lex splits src into tokens, dropping white space and comments. The last
// token is always tEOF.
func lex(src []rune) ([]token, error) {
	var toks []token
	i := 0
	n := len(src)
	for {
		var err error
		if i, err = skipSpace(src, i); err != nil {
			return nil, err
		}
		if i >= n {
			toks = append(toks, token{kind: tEOF, pos: n + 1, end: n})
			return toks, nil
		}
		start := i
		c := src[i]
		switch {
		case c == '\'':
			s, next, ok := quoted(src, i, '\'')
			if !ok {
				return nil, Errorf(CodeSyntax, start+1, "unterminated quoted string at or near \"%s\"", clip(src[start:]))
			}
			toks = append(toks, token{kind: tString, val: s, pos: start + 1, end: next})
			i = next
		case c == '"':
			s, next, ok := quoted(src, i, '"')
			if !ok {
				return nil, Errorf(CodeSyntax, start+1, "unterminated quoted identifier at or near \"%s\"", clip(src[start:]))
			}
			if s == "" {
				return nil, Errorf(CodeSyntax, start+1, "zero-length delimited identifier at or near \"\"\"\"")
			}
			toks = append(toks, token{kind: tQIdent, val: s, pos: start + 1, end: next})
			i = next
		case isDigit(c) || c == '.' && i+1 < n && isDigit(src[i+1]):
			i = scanNumber(src, i)
			toks = append(toks, token{kind: tNumber, val: string(src[start:i]), pos: start + 1, end: i})
		case isIdentStart(c):
			for i < n && isIdentPart(src[i]) {
				i++
			}
			toks = append(toks, token{kind: tIdent, val: strings.ToLower(string(src[start:i])), pos: start + 1, end: i})
		case strings.ContainsRune("(),=;*.-+<>!~|&^#@?:%/[]{}$", c):
			i++
			toks = append(toks, token{kind: tOp, val: string(c), pos: start + 1, end: i})
		default:
			return nil, Errorf(CodeSyntax, start+1, "syntax error at or near \"%c\"", c)
		}
	}
}

// skipSpace returns the index of the first character at or after i that
// is neither white space nor inside a comment. Block comments nest, as in
// PostgreSQL.
func skipSpace(src []rune, i int) (int, error) {
	n := len(src)
	for i < n {
		c := src[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '-' && i+1 < n && src[i+1] == '-':
			for i < n && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < n && src[i+1] == '*':
			start := i
			depth := 0
			for depth > 0 || i == start {
				switch {
				case i+1 >= n:
					return i, Errorf(CodeSyntax, start+1, "unterminated /* comment at or near \"%s\"", clip(src[start:]))
				case src[i] == '/' && src[i+1] == '*':
					depth++
					i += 2
				case src[i] == '*' && src[i+1] == '/':
					depth--
					i += 2
				default:
					i++
				}
			}
		default:
			return i, nil
		}
	}
	return i, nil
}

// quoted reads a string delimited by q starting at src[i] == q, where a
// doubled q stands for one. It returns the contents and the index after
// the closing quote.
func quoted(src []rune, i int, q rune) (string, int, bool) {
	var b strings.Builder
	i++
	for i < len(src) {
		if src[i] == q {
			if i+1 < len(src) && src[i+1] == q {
				b.WriteRune(q)
				i += 2
				continue
			}
			return b.String(), i + 1, true
		}
		b.WriteRune(src[i])
		i++
	}
	return "", i, false
}

// scanNumber reads digits, an optional fraction and exponent, then an
// optional unit made of letters and %, optionally followed by "/s" style
// "/letters". It returns the index after the number.
func scanNumber(src []rune, i int) int {
	n := len(src)
	for i < n && isDigit(src[i]) {
		i++
	}
	if i < n && src[i] == '.' {
		i++
		for i < n && isDigit(src[i]) {
			i++
		}
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < n && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < n && isDigit(src[j]) {
			i = j
			for i < n && isDigit(src[i]) {
				i++
			}
		}
	}
	for i < n && (isLetter(src[i]) || src[i] == '%') {
		i++
	}
	if i+1 < n && src[i] == '/' && isLetter(src[i+1]) {
		i++
		for i < n && isLetter(src[i]) {
			i++
		}
	}
	return i
}

func isDigit(c rune) bool  { return c >= '0' && c <= '9' }
func isLetter(c rune) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isIdentStart(c rune) bool {
	return isLetter(c) || c == '_' || c >= 0x80 && unicode.IsLetter(c)
}

func isIdentPart(c rune) bool {
	return isIdentStart(c) || isDigit(c) || c == '$' || c >= 0x80 && unicode.IsDigit(c)
}

// clip returns up to 20 characters of s for messages.
func clip(s []rune) string {
	if len(s) > 20 {
		return string(s[:20]) + "..."
	}
	return string(s)
}

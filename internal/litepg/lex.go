package litepg

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/sqltext"
)

// tokKind classifies a lexical token of PostgreSQL SQL text.
type tokKind uint8

const (
	tkIdent  tokKind = iota + 1 // unquoted identifier or keyword
	tkQIdent                    // "quoted" identifier
	tkString                    // string constant of any quoting style
	tkNumber                    // numeric constant
	tkParam                     // positional parameter $n
	tkOp                        // operator such as = or <=
	tkPunct                     // one of ( ) [ ] , ; . :
	tkCast                      // ::
	tkRaw                       // text produced by a rewrite, emitted verbatim
)

// token is one lexical token. Tokens of the source keep their byte span;
// tokens made by a rewrite have pos = -1.
type token struct {
	kind tokKind
	// space reports that the source had white space or a comment before
	// the token; the emitter keeps the tokens apart with one space.
	space bool
	pos   int    // byte offset in the source, -1 for a synthetic token
	text  string // the token as written (tkString: see val)
	// val is the meaning of the token: the lower-cased name of an
	// identifier, the name of a quoted identifier, the decoded value of
	// a string constant.
	val string
	n   int // tkParam: the parameter number, 1 or more
	// plain reports a string constant written in standard form '...',
	// which SQLite reads the same way.
	plain bool
}

// is reports whether t is the keyword or identifier kw (lower case).
func (t token) is(kw string) bool { return t.kind == tkIdent && t.val == kw }

// isPunct reports whether t is the punctuation or operator p.
func (t token) isPunct(p string) bool {
	return (t.kind == tkPunct || t.kind == tkOp || t.kind == tkCast) && t.text == p
}

// maxParam is the highest parameter number accepted, as in PostgreSQL,
// whose Bind message counts parameters in 16 bits.
const maxParam = 65535

// lex splits src into tokens, following PostgreSQL's lexical rules:
// nested /* */ comments, -- comments, standard, escape (E'...') and
// dollar-quoted strings, quoted identifiers, $n parameters and the rule
// that a multi-character operator ends in + or - only if it also holds
// one of ~ ! @ # % ^ & | ` ?. It never panics; malformed text gives a
// *pgError with SQLSTATE 42601 (or 42P02 for a bad parameter number).
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	space := false
	for i < len(src) {
		c := src[i]
		switch {
		case sqltext.IsSpace(c):
			i++
			space = true
			continue
		case sqltext.LineComment(sqltext.PostgreSQL, src, i):
			i = sqltext.LineEnd(src, i)
			space = true
			continue
		case sqltext.BlockComment(src, i):
			end, closed := sqltext.BlockCommentEnd(sqltext.PostgreSQL, src, i)
			if !closed {
				return nil, syntaxErrorf("unterminated /* comment at or near %q", clip(src[i:]))
			}
			i = end
			space = true
			continue
		}

		start := i
		tok := token{space: space, pos: start}
		space = false
		switch {
		case (c == 'E' || c == 'e' || c == 'N' || c == 'n') && i+1 < len(src) && src[i+1] == '\'':
			// E'...' decodes backslash escapes; N'...' (national
			// character) is a standard string.
			read := lexStandardString
			if c == 'E' || c == 'e' {
				read = lexEscapeString
			}
			v, n, err := read(src[i+1:])
			if err != nil {
				return nil, err
			}
			i += 1 + n
			tok.kind, tok.val = tkString, v
		case (c == 'U' || c == 'u') && i+2 < len(src) && src[i+1] == '&' && (src[i+2] == '\'' || src[i+2] == '"'):
			return nil, unsupportedf("Unicode escape strings (U&'...') are not supported")
		case (c == 'B' || c == 'b') && i+1 < len(src) && src[i+1] == '\'':
			return nil, unsupportedf("bit-string constants (B'...') are not supported")
		case (c == 'X' || c == 'x') && i+1 < len(src) && src[i+1] == '\'':
			// A hexadecimal bit string in PostgreSQL, a blob in SQLite;
			// passed through as written.
			_, n, err := lexStandardString(src[i+1:])
			if err != nil {
				return nil, err
			}
			i += 1 + n
			tok.kind = tkRaw
		case sqltext.IsWordStart(c):
			i = sqltext.WordEnd(src, i+1)
			tok.kind = tkIdent
			tok.val = strings.ToLower(src[start:i])
		case c == '"':
			v, n, err := lexQuoted(src[i:], '"')
			if err != nil {
				return nil, err
			}
			if v == "" {
				return nil, syntaxErrorf("zero-length delimited identifier at or near %q", clip(src[i:]))
			}
			i += n
			tok.kind, tok.val = tkQIdent, v
		case c == '\'':
			v, n, err := lexStandardString(src[i:])
			if err != nil {
				return nil, err
			}
			i += n
			tok.kind, tok.val, tok.plain = tkString, v, true
		case c == '$':
			if i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9' {
				j := i + 1
				for j < len(src) && src[j] >= '0' && src[j] <= '9' {
					j++
				}
				n, err := strconv.Atoi(src[i+1 : j])
				if err != nil || n < 1 || n > maxParam {
					return nil, &pgError{code: sqlstate.UndefinedParameter, msg: "there is no parameter " + clip(src[i:j])}
				}
				i = j
				tok.kind, tok.n = tkParam, n
				break
			}
			// Dollar quote: $tag$ ... $tag$, tag empty or an identifier
			// without $.
			tag := sqltext.DollarTag(src, i)
			if tag == "" {
				return nil, syntaxErrorf("syntax error at or near \"$\"")
			}
			end, closed := sqltext.DollarEnd(src, i, tag)
			if !closed {
				return nil, syntaxErrorf("unterminated dollar-quoted string at or near %q", clip(src[i:]))
			}
			tok.kind, tok.val = tkString, src[i+len(tag):end-len(tag)]
			i = end
		case sqltext.NumberStart(src, i):
			i = sqltext.NumberEnd(src, i)
			tok.kind = tkNumber
		case c == ':' && i+1 < len(src) && src[i+1] == ':':
			i += 2
			tok.kind = tkCast
		case strings.IndexByte("()[],;.:", c) >= 0:
			i++
			tok.kind = tkPunct
		case isOpChar(c):
			i = lexOperator(src, i)
			tok.kind = tkOp
		default:
			r, size := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, syntaxErrorf("invalid byte sequence at offset %d", i)
			}
			return nil, syntaxErrorf("syntax error at or near %q", string(r))
		}
		tok.text = src[start:i]
		if tok.kind == tkRaw {
			tok.val = tok.text
		}
		toks = append(toks, tok)
	}
	return toks, nil
}

func isOpChar(c byte) bool { return strings.IndexByte("+-*/<>=~!@#%^&|`?", c) >= 0 }

// lexOperator returns the end of the operator starting at i, applying
// PostgreSQL's rules: an operator stops before -- or /*, and a
// multi-character operator may end in + or - only if it contains one of
// ~ ! @ # % ^ & | ` ?.
func lexOperator(src string, i int) int {
	start := i
	for i < len(src) && isOpChar(src[i]) {
		if i > start && (src[i] == '-' && i+1 < len(src) && src[i+1] == '-' || src[i] == '/' && i+1 < len(src) && src[i+1] == '*') {
			break
		}
		i++
	}
	if i-start > 1 && !strings.ContainsAny(src[start:i], "~!@#%^&|`?") {
		for i-start > 1 && (src[i-1] == '+' || src[i-1] == '-') {
			i--
		}
	}
	return i
}

// lexQuoted reads a string delimited by q (either ' or ") with doubled
// delimiters as escapes. It returns the value and the bytes consumed.
func lexQuoted(s string, q byte) (string, int, error) {
	end, closed := sqltext.QuoteEnd(s, 0, false)
	if !closed {
		if q == '"' {
			return "", 0, syntaxErrorf("unterminated quoted identifier at or near %q", clip(s))
		}
		return "", 0, syntaxErrorf("unterminated quoted string at or near %q", clip(s))
	}
	return strings.ReplaceAll(s[1:end-1], string([]byte{q, q}), string(q)), end, nil
}

func lexStandardString(s string) (string, int, error) { return lexQuoted(s, '\'') }

// lexEscapeString reads an escape string body starting at its opening
// quote, decoding the backslash escapes of PostgreSQL's E'...' syntax.
func lexEscapeString(s string) (string, int, error) {
	var b strings.Builder
	i := 1
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i += 2
				continue
			}
			v := b.String()
			if strings.IndexByte(v, 0) >= 0 {
				return "", 0, &pgError{code: sqlstate.CharacterNotInRepertoire, msg: "invalid byte sequence for encoding \"UTF8\": 0x00"}
			}
			if !utf8.ValidString(v) {
				return "", 0, &pgError{code: sqlstate.CharacterNotInRepertoire, msg: "invalid byte sequence for encoding \"UTF8\""}
			}
			return v, i + 1, nil
		case c == '\\' && i+1 < len(s):
			i++
			e := s[i]
			switch e {
			case 'b':
				b.WriteByte('\b')
				i++
			case 'f':
				b.WriteByte('\f')
				i++
			case 'n':
				b.WriteByte('\n')
				i++
			case 'r':
				b.WriteByte('\r')
				i++
			case 't':
				b.WriteByte('\t')
				i++
			case 'x':
				j := i + 1
				for j < len(s) && j < i+3 && sqltext.IsHexDigit(s[j]) {
					j++
				}
				if j == i+1 {
					b.WriteByte('x')
					i++
					break
				}
				v, _ := strconv.ParseUint(s[i+1:j], 16, 8)
				b.WriteByte(byte(v))
				i = j
			case 'u', 'U':
				width := 4
				if e == 'U' {
					width = 8
				}
				if i+1+width > len(s) {
					return "", 0, syntaxErrorf("invalid Unicode escape")
				}
				v, err := strconv.ParseUint(s[i+1:i+1+width], 16, 32)
				if err != nil || v == 0 || v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
					return "", 0, syntaxErrorf("invalid Unicode escape value")
				}
				b.WriteRune(rune(v))
				i += 1 + width
			default:
				if e >= '0' && e <= '7' {
					j := i
					for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
						j++
					}
					v, _ := strconv.ParseUint(s[i:j], 8, 16)
					b.WriteByte(byte(v))
					i = j
					break
				}
				b.WriteByte(e)
				i++
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", 0, syntaxErrorf("unterminated quoted string at or near %q", clip(s))
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 32
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// quoteString renders v as an SQL string constant in standard form.
func quoteString(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// quoteIdent renders v as a quoted identifier.
func quoteIdent(v string) string {
	return `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
}

// emit renders toks as SQLite text. Tokens are separated by one space
// where the source had white space or a comment, or where two word-like
// tokens would otherwise run together.
func emit(toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && (t.space || wordy(toks[i-1]) && wordy(t)) {
			b.WriteByte(' ')
		}
		b.WriteString(tokenSQL(t))
	}
	return b.String()
}

// wordy reports whether t could merge with an adjacent word-like token.
func wordy(t token) bool {
	switch t.kind {
	case tkIdent, tkNumber, tkParam, tkRaw, tkQIdent, tkString:
		return true
	case tkOp:
		return true // keeps "- -1" from becoming a comment
	}
	return false
}

// tokenSQL renders one token as SQLite text.
func tokenSQL(t token) string {
	switch t.kind {
	case tkString:
		if t.plain {
			return t.text
		}
		return quoteString(t.val)
	case tkParam:
		return "?" + strconv.Itoa(t.n)
	}
	return t.text
}

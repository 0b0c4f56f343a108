package ddl

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/sqltext"
)

// This file holds the one tokenizer of the package. A scanner reads a
// text byte by byte by the lexical rules of a dialect: the console's
// (lex, for Parse) or a database's (scan, for SplitUserPool). It reports
// what it cannot read as a flaw at the byte where the trouble starts;
// each caller turns a flaw into its own answer (an *Error with a
// position, or "not mine").

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // bare identifier or keyword; val is lower case
	tQIdent         // "quoted identifier"; val is unquoted
	tString         // 'string'; val is unquoted
	tNumber         // 12, 1.5, 1e3, 10ms, 256MB/s, 0.1%; val as written
	tOp             // punctuation; val as written (one character, or a parameter such as $1)
)

// token is one token of a text.
type token struct {
	kind tokKind
	// val is, for tIdent, the name folded to lower case (by Unicode on
	// the console, ASCII only for a database); for tString and tQIdent
	// the contents (a doubled quote read as one); for tNumber and tOp the
	// token as written.
	val        string
	start, end int  // byte offsets of the token in the text: src[start:end]
	pos        int  // 1-based character position of the first character
	raw        bool // tString, tQIdent: written in a form whose contents val does not decode (E'', U&, a backslash escape)
}

func (t token) isWord(w string) bool { return t.kind == tIdent && t.val == w }
func (t token) isOp(c byte) bool     { return t.kind == tOp && len(t.val) == 1 && t.val[0] == c }

// flaw is why a scanner could not read the token at its position.
type flaw uint8

const (
	flawNone         flaw = iota
	flawUnterminated      // a quote or a /* comment without its end
	flawEmptyName         // "" (or `` in MySQL): a quoted name with nothing in it
	flawExecutable        // a MySQL executable comment, /*! or /*M!
	flawChar              // console: a character that starts no token
)

// consoleOps are the punctuation characters the console reads as tOp;
// any other character that starts no token is a flawChar there. A
// database dialect reads any such byte as a one-byte tOp.
const consoleOps = "(),=;*.-+<>!~|&^#@?:%/[]{}$"

// scanner reads the tokens of src one at a time. The zero value is not
// usable: d must be PostgreSQL or MySQL. A scanner is not safe for
// concurrent use.
type scanner struct {
	src string
	d   Dialect
	// console selects the admin console's reading of PostgreSQL (d is
	// then PostgreSQL): by character (Unicode white space, letters and
	// digits; names fold to lower case by Unicode), numbers with units
	// (10ms, 256MB/s, 0.1%), no E'', U& or dollar quotes, and a character
	// outside consoleOps that starts no token is a flaw. src must then be
	// valid UTF-8.
	console bool

	i int // byte offset of the next byte to read

	// mark is a byte offset at or before every token still to come, and
	// markChars the characters before it; charPos moves them forward, so
	// positions cost one pass over the text in all.
	mark, markChars int
}

// charPos returns the 1-based character position of the byte at offset
// b, which must not lie before an offset it was last asked for.
func (s *scanner) charPos(b int) int {
	s.markChars += utf8.RuneCountInString(s.src[s.mark:b])
	s.mark = b
	return s.markChars + 1
}

// next returns the next token, tEOF at the end of the text (and every
// time after). With a flaw, the token's start and pos are where the
// unreadable text begins, and the scanner does not move.
func (s *scanner) next() (token, flaw) {
	if f := s.skipBlank(); f != flawNone {
		return token{start: s.i, end: s.i, pos: s.charPos(s.i)}, f
	}
	if s.i >= len(s.src) {
		return token{kind: tEOF, start: s.i, end: s.i, pos: s.charPos(s.i)}, flawNone
	}
	t, f := s.token()
	if f != flawNone {
		t = token{start: s.i, end: s.i}
	}
	t.pos = s.charPos(t.start)
	if f == flawNone {
		s.i = t.end
	}
	return t, f
}

// skipBlank moves past white space and comments. On a flaw it stops at
// the start of the comment it cannot read.
func (s *scanner) skipBlank() flaw {
	src, n := s.src, len(s.src)
	for s.i < n {
		c := src[s.i]
		switch {
		case sqltext.IsSpace(c):
			s.i++
		case s.console && c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(src[s.i:])
			if !unicode.IsSpace(r) {
				return flawNone
			}
			s.i += size
		case s.lineComment():
			for s.i < n && src[s.i] != '\n' {
				s.i++
			}
		case c == '/' && s.i+1 < n && src[s.i+1] == '*':
			end, f := s.commentEnd()
			if f != flawNone {
				return f
			}
			s.i = end
		default:
			return flawNone
		}
	}
	return flawNone
}

// lineComment reports whether a comment that runs to the end of the
// line starts at src[i].
func (s *scanner) lineComment() bool { return sqltext.LineComment(s.d.lexical(), s.src, s.i) }

// commentEnd returns the offset after the /* comment that starts at
// src[i]. PostgreSQL comments nest; in MySQL the first */ ends the
// comment, and an executable comment (/*! or /*M!) is a flaw.
func (s *scanner) commentEnd() (int, flaw) {
	if _, ok := sqltext.Executable(s.d.lexical(), s.src, s.i); ok {
		return 0, flawExecutable
	}
	end, closed := sqltext.BlockCommentEnd(s.d.lexical(), s.src, s.i)
	if !closed {
		return 0, flawUnterminated
	}
	return end, flawNone
}

// token reads the token that starts at src[i], which is neither white
// space nor a comment; its pos is left for next to fill in.
func (s *scanner) token() (token, flaw) {
	src, i := s.src, s.i
	n := len(src)
	c := src[i]
	pg := s.d == PostgreSQL
	ext := pg && !s.console // PostgreSQL's own forms the console does not take: E'', U&, $
	switch {
	case c == '\'' || !pg && c == '"':
		return quotedToken(src, i, i, tString, !pg) // MySQL: backslash escapes in both quotes
	case ext && (c == 'e' || c == 'E') && i+1 < n && src[i+1] == '\'':
		return quotedToken(src, i, i+1, tString, true)
	case ext && (c == 'u' || c == 'U') && i+2 < n && src[i+1] == '&' && (src[i+2] == '\'' || src[i+2] == '"'):
		k := tString
		if src[i+2] == '"' {
			k = tQIdent
		}
		return quotedToken(src, i, i+2, k, false)
	case pg && c == '"', !pg && c == '`':
		t, f := quotedToken(src, i, i, tQIdent, false)
		if f == flawNone && t.val == "" {
			f = flawEmptyName
		}
		return t, f
	case ext && c == '$':
		return dollarToken(src, i)
	case s.wordStart():
		j := s.wordEnd()
		val := lowerASCII(src[i:j])
		if s.console {
			val = strings.ToLower(src[i:j])
		}
		return token{kind: tIdent, start: i, end: j, val: val}, flawNone
	case c >= '0' && c <= '9' || c == '.' && i+1 < n && src[i+1] >= '0' && src[i+1] <= '9':
		j := sqltext.LooseNumberEnd(src, i)
		if s.console {
			j = unitNumberEnd(src, i)
		}
		return token{kind: tNumber, start: i, end: j, val: src[i:j]}, flawNone
	case s.console && (c >= utf8.RuneSelf || strings.IndexByte(consoleOps, c) < 0):
		return token{}, flawChar
	}
	return token{kind: tOp, start: i, end: i + 1, val: src[i : i+1]}, flawNone
}

// wordStart reports whether a bare name starts at src[i]: a letter or
// _ (console: a Unicode letter; database: any byte of a multi-byte
// character), or $ in MySQL.
func (s *scanner) wordStart() bool {
	c := s.src[s.i]
	switch {
	case !s.console:
		return isWordStart(c) || s.d == MySQL && c == '$'
	case c < utf8.RuneSelf:
		return isLetter(c) || c == '_'
	}
	r, _ := utf8.DecodeRuneInString(s.src[s.i:])
	return unicode.IsLetter(r)
}

// wordEnd returns the offset after the bare name that starts at src[i]:
// its start, then letters, digits, _ and $ (console: by Unicode).
func (s *scanner) wordEnd() int {
	src, i := s.src, s.i
	for i < len(src) {
		c := src[i]
		switch {
		case !s.console || c < utf8.RuneSelf:
			if !isWordPart(c) {
				return i
			}
			i++
		default:
			r, size := utf8.DecodeRuneInString(src[i:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return i
			}
			i += size
		}
	}
	return i
}

// quotedToken reads a string or quoted name whose opening quote is at
// src[q], written from src[start] (start < q after a prefix such as E or
// U&). A doubled quote stands for one; with backslash, a backslash
// escapes the next byte and val keeps the escape as written. The token
// is raw, its val not the decoded contents, when it has a prefix or
// holds a backslash escape.
func quotedToken(src string, start, q int, kind tokKind, backslash bool) (token, flaw) {
	end, closed := sqltext.QuoteEnd(src, q, backslash)
	if !closed {
		return token{}, flawUnterminated
	}
	quote := src[q]
	raw := start < q
	var b strings.Builder
	for j := q + 1; j < end-1; j++ {
		c := src[j]
		switch {
		case c == '\\' && backslash:
			raw = true
			b.WriteByte(c)
			j++
		case c == quote:
			j++ // the first of a doubled quote
		}
		b.WriteByte(src[j])
	}
	return token{kind: kind, start: start, end: end, val: b.String(), raw: raw}, flawNone
}

// dollarToken reads the PostgreSQL token at src[i] == '$': a
// $tag$dollar-quoted string$tag$, or else a parameter such as $1, read
// as an operator token.
func dollarToken(src string, i int) (token, flaw) {
	if tag := sqltext.DollarTag(src, i); tag != "" {
		end, closed := sqltext.DollarEnd(src, i, tag)
		if !closed {
			return token{}, flawUnterminated
		}
		return token{kind: tString, start: i, end: end, val: src[i+len(tag) : end-len(tag)]}, flawNone
	}
	j := sqltext.ParamEnd(src, i)
	return token{kind: tOp, start: i, end: j, val: src[i:j]}, flawNone
}

// unitNumberEnd returns the offset after a console number at src[i]:
// digits, an optional fraction and exponent, then an optional unit made
// of letters and %, optionally followed by "/s" style "/letters".
func unitNumberEnd(src string, i int) int {
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

var (
	isDigit     = sqltext.IsDigit
	isLetter    = sqltext.IsLetter
	isWordStart = sqltext.IsWordStart
	isWordPart  = sqltext.IsWordPart
)

// lowerASCII folds ASCII letters only, as PostgreSQL folds identifiers
// in a multi-byte encoding.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// lexical returns the sqltext dialect whose rules d reads by.
func (d Dialect) lexical() sqltext.Dialect {
	if d == MySQL {
		return sqltext.MySQL
	}
	return sqltext.PostgreSQL
}

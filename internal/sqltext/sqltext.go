package sqltext

import "strings"

// Dialect is a database's lexical rules.
type Dialect uint8

const (
	// PostgreSQL: -- comments, nested /* */ comments, E'' strings with
	// backslash escapes, U&'' and U&"", $tag$ dollar quotes, $n
	// parameters, "quoted names".
	PostgreSQL Dialect = iota + 1
	// MySQL: # and "-- " comments, /* */ comments that do not nest,
	// executable comments, backslash escapes in '' and "" strings,
	// `quoted names`.
	MySQL
)

// IsSpace reports whether c is ASCII white space as both servers read
// it between tokens.
func IsSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v':
		return true
	}
	return false
}

// IsDigit reports whether c is an ASCII digit.
func IsDigit(c byte) bool { return '0' <= c && c <= '9' }

// IsLetter reports whether c is an ASCII letter.
func IsLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// IsWordStart reports whether a bare word can start with c: a letter, an
// underscore or a byte of a multi-byte character.
func IsWordStart(c byte) bool { return IsLetter(c) || c == '_' || c >= 0x80 }

// IsWordPart reports whether c can continue a bare word.
func IsWordPart(c byte) bool { return IsWordStart(c) || IsDigit(c) || c == '$' }

// WordEnd returns the offset after the bare word that starts at src[i].
func WordEnd(src string, i int) int {
	for i < len(src) && IsWordPart(src[i]) {
		i++
	}
	return i
}

// LineComment reports whether a comment that runs to the end of the
// line starts at src[i]: -- in PostgreSQL; # or -- followed by white
// space, a control character or the end of the text in MySQL.
func LineComment(d Dialect, src string, i int) bool {
	switch {
	case i >= len(src):
		return false
	case src[i] == '#':
		return d == MySQL
	case src[i] != '-' || i+1 >= len(src) || src[i+1] != '-':
		return false
	}
	return d != MySQL || i+2 == len(src) || src[i+2] <= ' '
}

// LineEnd returns the offset after the newline that ends the line
// src[i] is on, or len(src) on the last line.
func LineEnd(src string, i int) int {
	if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(src)
}

// BlockComment reports whether a /* comment starts at src[i].
func BlockComment(src string, i int) bool {
	return i+1 < len(src) && src[i] == '/' && src[i+1] == '*'
}

// BlockCommentEnd returns the offset after the /* comment that starts
// at src[i], and whether it is closed (false: it runs to the end of the
// text, and end is len(src)). PostgreSQL's comments nest; MySQL's end
// at the first */.
func BlockCommentEnd(d Dialect, src string, i int) (end int, closed bool) {
	if d == MySQL {
		if j := strings.Index(src[min(i+2, len(src)):], "*/"); j >= 0 {
			return i + 2 + j + 2, true
		}
		return len(src), false
	}
	depth := 0
	for i+1 < len(src) {
		switch {
		case src[i] == '/' && src[i+1] == '*':
			depth++
			i += 2
		case src[i] == '*' && src[i+1] == '/':
			depth--
			i += 2
		default:
			i++
		}
		if depth == 0 {
			return i, true
		}
	}
	return len(src), false
}

// Executable returns the offset after the opening of a MySQL executable
// comment at src[i] ("/*!" or "/*M!", then the version digits), whose
// text MySQL reads as code, and false where none starts (always false in
// PostgreSQL).
func Executable(d Dialect, src string, i int) (int, bool) {
	if d != MySQL || !BlockComment(src, i) {
		return 0, false
	}
	j := i + 2
	if j < len(src) && src[j] == 'M' {
		j++
	}
	if j >= len(src) || src[j] != '!' {
		return 0, false
	}
	j++
	for j < len(src) && IsDigit(src[j]) {
		j++
	}
	return j, true
}

// QuoteEnd returns the offset after the quote that closes the one at
// src[q], and whether one does (false: the literal runs to the end of
// the text, and end is len(src)). A doubled quote stands for one; with
// backslash, a backslash escapes the next byte.
func QuoteEnd(src string, q int, backslash bool) (end int, closed bool) {
	quote := src[q]
	for j := q + 1; j < len(src); j++ {
		switch c := src[j]; {
		case c == '\\' && backslash:
			j++
		case c == quote:
			if j+1 < len(src) && src[j+1] == quote {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return len(src), false
}

// DollarTag returns the opening $tag$ or $$ of a PostgreSQL
// dollar-quoted string at src[i] == '$', or "" if none starts there.
func DollarTag(src string, i int) string {
	j := i + 1
	if j < len(src) && src[j] == '$' {
		return "$$"
	}
	if j >= len(src) || !IsWordStart(src[j]) {
		return ""
	}
	for j < len(src) && IsWordPart(src[j]) && src[j] != '$' {
		j++
	}
	if j < len(src) && src[j] == '$' {
		return src[i : j+1]
	}
	return ""
}

// DollarEnd returns the offset after the dollar-quoted string whose
// opening tag starts at src[i], and whether the tag closes it (false:
// it runs to the end of the text, and end is len(src)).
func DollarEnd(src string, i int, tag string) (end int, closed bool) {
	body := i + len(tag)
	if j := strings.Index(src[body:], tag); j >= 0 {
		return body + j + len(tag), true
	}
	return len(src), false
}

// ParamEnd returns the offset after the digits of a PostgreSQL
// parameter ($1) at src[i] == '$'; i+1 when no digit follows.
func ParamEnd(src string, i int) int {
	j := i + 1
	for j < len(src) && IsDigit(src[j]) {
		j++
	}
	return j
}

// NumberStart reports whether a number starts at src[i]: a digit, or a
// dot before a digit.
func NumberStart(src string, i int) bool {
	return i < len(src) && (IsDigit(src[i]) || src[i] == '.' && i+1 < len(src) && IsDigit(src[i+1]))
}

// LooseNumberEnd returns the offset after a number at src[i] read as
// loosely as either server could: digits, letters, dots and underscores
// (0x1F, 1.5e3, 1_000), with a sign after an exponent. It never stops
// inside what a server would read as one number.
func LooseNumberEnd(src string, i int) int {
	for i < len(src) {
		c := src[i]
		if !IsDigit(c) && c != '.' && !IsWordStart(c) {
			return i
		}
		i++
		if (c == 'e' || c == 'E') && i+1 < len(src) && (src[i] == '+' || src[i] == '-') && IsDigit(src[i+1]) {
			i++
		}
	}
	return i
}

// NumberEnd returns the offset after PostgreSQL's numeric constant at
// src[i]: digits (with _ separators), a fraction, an exponent, or a
// 0x, 0o or 0b prefixed integer.
func NumberEnd(src string, i int) int {
	if src[i] == '0' && i+2 < len(src) && strings.IndexByte("xXoObB", src[i+1]) >= 0 && IsHexDigit(src[i+2]) {
		i += 2
		for i < len(src) && (IsHexDigit(src[i]) || src[i] == '_') {
			i++
		}
		return i
	}
	for i < len(src) && (IsDigit(src[i]) || src[i] == '_') {
		i++
	}
	if i < len(src) && src[i] == '.' && !(i+1 < len(src) && src[i+1] == '.') {
		i++
		for i < len(src) && (IsDigit(src[i]) || src[i] == '_') {
			i++
		}
	}
	return ExponentEnd(src, i)
}

// ExponentEnd returns the offset after an exponent (e, an optional
// sign, digits) at src[i], or i when none is written there.
func ExponentEnd(src string, i int) int {
	if i >= len(src) || src[i] != 'e' && src[i] != 'E' {
		return i
	}
	j := i + 1
	if j < len(src) && (src[j] == '+' || src[j] == '-') {
		j++
	}
	if j >= len(src) || !IsDigit(src[j]) {
		return i
	}
	for j < len(src) && IsDigit(src[j]) {
		j++
	}
	return j
}

// IsHexDigit reports whether c is a hexadecimal digit.
func IsHexDigit(c byte) bool {
	return IsDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

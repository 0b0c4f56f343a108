package sqltext

// Kind is a token's kind.
type Kind uint8

const (
	EOF    Kind = iota
	Word        // a bare word: keyword or name
	String      // a string literal with its prefix (E, N, X, B, U&) or $tag$
	Name        // a quoted name: "..." (U&"...") in PostgreSQL, `...` in MySQL
	Number      // a number, read loosely (LooseNumberEnd)
	Op          // one byte of anything else, or a PostgreSQL $1 parameter
)

// Token is Src[Start:End] of the Scanner that read it.
type Token struct {
	Kind       Kind
	Start, End int
	// Quote is, for a String or Name, the offset of its opening quote
	// (after any prefix), or -1 for a dollar quote.
	Quote int
	// Backslash reports that the String was read with backslash
	// escapes (MySQL, or PostgreSQL's E'').
	Backslash bool
	// Closed reports, for a String or Name, that its closing quote or
	// tag is in the text; when false End is len(Src).
	Closed bool
}

// Scanner reads the tokens of Src by Dialect's rules, skipping white
// space and comments. Unterminated quotes and comments run to the end
// of the text; every offset is within it. In MySQL the opening of an
// executable comment and its closing */ are skipped and the text
// between them read as code, as the server does.
//
// Set Src and Dialect (zero: PostgreSQL); Pos is the offset of the next
// byte to read and may be moved between calls.
type Scanner struct {
	Src     string
	Dialect Dialect
	Pos     int

	exec int // MySQL: executable comments open
}

// Next returns the token at or after Pos and moves Pos past it; at the
// end of the text it returns EOF (and every time after).
func (s *Scanner) Next() Token {
	s.SkipBlank()
	if s.Pos >= len(s.Src) {
		return Token{Kind: EOF, Start: len(s.Src), End: len(s.Src)}
	}
	t := s.scan(s.Pos)
	s.Pos = t.End
	return t
}

// SkipBlank moves Pos past white space and comments.
func (s *Scanner) SkipBlank() {
	src := s.Src
	for s.Pos < len(src) {
		i := s.Pos
		switch c := src[i]; {
		case IsSpace(c):
			s.Pos++
		case LineComment(s.Dialect, src, i):
			s.Pos = LineEnd(src, i)
		case BlockComment(src, i):
			if j, ok := Executable(s.Dialect, src, i); ok {
				s.exec++
				s.Pos = j
			} else {
				s.Pos, _ = BlockCommentEnd(s.Dialect, src, i)
			}
		case c == '*' && s.exec > 0 && i+1 < len(src) && src[i+1] == '/':
			s.exec--
			s.Pos = i + 2
		default:
			return
		}
	}
}

// scan reads the token that starts at Src[i], which is neither white
// space nor a comment.
func (s *Scanner) scan(i int) Token {
	src := s.Src
	my := s.Dialect == MySQL
	c := src[i]
	quoteAt := func(k int) bool { return k < len(src) && src[k] == '\'' }
	switch lc := c | 0x20; {
	case c == '\'' || c == '"' && my:
		return s.quoted(String, i, i, my)
	case c == '"' || c == '`' && my:
		return s.quoted(Name, i, i, false)
	case lc == 'e' && !my && quoteAt(i+1):
		return s.quoted(String, i, i+1, true)
	case (lc == 'n' || lc == 'x' || lc == 'b') && quoteAt(i+1):
		return s.quoted(String, i, i+1, my)
	case lc == 'u' && !my && i+2 < len(src) && src[i+1] == '&' && (src[i+2] == '\'' || src[i+2] == '"'):
		k := String
		if src[i+2] == '"' {
			k = Name
		}
		return s.quoted(k, i, i+2, false)
	case c == '$' && !my:
		if tag := DollarTag(src, i); tag != "" {
			end, closed := DollarEnd(src, i, tag)
			return Token{Kind: String, Start: i, End: end, Quote: -1, Closed: closed}
		}
		return Token{Kind: Op, Start: i, End: ParamEnd(src, i)}
	case NumberStart(src, i):
		return Token{Kind: Number, Start: i, End: LooseNumberEnd(src, i)}
	case IsWordStart(c) || c == '$':
		return Token{Kind: Word, Start: i, End: WordEnd(src, i+1)}
	}
	return Token{Kind: Op, Start: i, End: i + 1}
}

// quoted returns the String or Name written from Src[start] whose
// opening quote is at Src[q].
func (s *Scanner) quoted(k Kind, start, q int, backslash bool) Token {
	end, closed := QuoteEnd(s.Src, q, backslash)
	return Token{Kind: k, Start: start, End: end, Quote: q, Backslash: backslash, Closed: closed}
}

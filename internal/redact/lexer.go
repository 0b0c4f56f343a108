package redact

import "github.com/sluicelab/sluice/internal/sqltext"

// token is a token of the text; see sqltext.Token.
type token = sqltext.Token

// lexer splits SQL text into tokens by sqltext's rules, skipping white
// space and comments. Every index it returns is within the text;
// unterminated quotes and comments run to its end.
type lexer struct{ sqltext.Scanner }

func newLexer(sql string, my bool) *lexer {
	d := sqltext.PostgreSQL
	if my {
		d = sqltext.MySQL
	}
	return &lexer{sqltext.Scanner{Src: sql, Dialect: d}}
}

// my reports whether the text is read by MySQL's rules.
func (l *lexer) my() bool { return l.Dialect == sqltext.MySQL }

// next returns the token at or after the lexer's position and moves
// past it.
func (l *lexer) next() token { return l.Next() }

// secretEnd returns where the password literal t ends under either
// reading of backslashes, so that no part of it is left out whatever
// the server's setting.
func (l *lexer) secretEnd(t token) int {
	if t.Quote < 0 {
		return t.End
	}
	a, _ := sqltext.QuoteEnd(l.Src, t.Quote, false)
	b, _ := sqltext.QuoteEnd(l.Src, t.Quote, true)
	return max(a, b)
}

// open reports whether the string t runs to the end of the text without
// its closing quote (text cut short, or malformed), as the lexer read it.
func (l *lexer) open(t token) bool { return t.Kind == sqltext.String && !t.Closed }

// dollarTag returns the opening $tag$ or $$ of a dollar-quoted string at
// sql[i] == '$', or "" if none starts there.
func dollarTag(sql string, i int) string { return sqltext.DollarTag(sql, i) }

func isDigit(c byte) bool { return sqltext.IsDigit(c) }

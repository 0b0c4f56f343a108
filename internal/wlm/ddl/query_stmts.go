package ddl

// This file holds the SELECT statements the console hands to an SQL
// engine (Query) and the entry point of every SELECT, which also
// recognises the session functions of session_stmts.go.

import (
	"strings"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// Query is a SELECT (or WITH ... SELECT, or VALUES) that the small
// Select does not cover (WHERE, ORDER BY, GROUP BY, joins, subqueries,
// expressions) and that the console runs with an SQL engine over its
// views. The parser checks only that quotes and parentheses are
// balanced.
type Query struct {
	base
	// SQL is the text for the engine: the tokens as written, strings
	// and quoted identifiers in their plain form ('it''s', "a""b"; a
	// $$dollar-quoted$$ string becomes a plain one), a space where
	// the text had white space or a comment. It is one statement under
	// any SQL lexer that reads plain strings and quoted identifiers as
	// PostgreSQL does: a semicolon can only be inside one.
	SQL string
	// Names are the identifiers of the text, each once in order of first
	// appearance: bare ones folded to lower case, quoted ones as
	// written. The views a query reads are among them.
	Names []string
	// NamePos are the 1-based character positions of the first
	// appearance of each of Names.
	NamePos []int
	// Qualified are the qualified names of the text (a schema's table,
	// pg_catalog.pg_class, or a table's column, s.id).
	Qualified []QualifiedName
}

// QualifiedName is a name and the one before it: Qualifier.Name.
type QualifiedName struct {
	Qualifier, Name Name
}

// implicitSchemas are the schemas a query may name its views in,
// dropped from Query.SQL: GaussDB keeps its views in pg_catalog.
var implicitSchemas = map[string]bool{"pg_catalog": true, "public": true}

// selectOrQuery parses a statement beginning with SELECT: a session
// function call (SELECT pg_cancel_backend(7)), the small Select when
// that covers it (literals, version(), current_setting(), columns of one
// view with LIMIT), else a Query.
func (p *parser) selectOrQuery() (node, error) {
	start := p.i - 1
	if n, ok := p.sessionFunc(); ok {
		return n, nil
	}
	p.i = start + 1
	if n, ok := p.sessionQuery(); ok {
		return n, nil
	}
	p.i = start + 1
	n, err := p.selectStmt()
	if err == nil && simpleSelect(n.(*Select)) {
		return n, nil
	}
	p.i = start
	return p.query()
}

// simpleSelect reports whether s is answered without an SQL engine: a
// SELECT of a view, or of literals, version() and current_setting().
func simpleSelect(s *Select) bool {
	if s.From != "" {
		return true
	}
	for _, tg := range s.Targets {
		if tg.Func && tg.Name != "version" && tg.Name != "current_setting" {
			return false
		}
	}
	return true
}

// query reads a Query from the current token (SELECT, WITH or VALUES)
// to the semicolon that ends it, outside parentheses, or the end of
// input.
func (p *parser) query() (node, error) {
	q := &Query{}
	seen := map[string]bool{}
	depth := 0
	var b strings.Builder
	prevEnd := -1
	for {
		t := p.peek()
		if t.kind == tIdent && implicitSchemas[t.val] && p.peekAt(1).kind == tOp && p.peekAt(1).val == "." && isName(p.peekAt(2)) {
			// pg_catalog.x is x: write neither the schema nor its dot.
			q.Qualified = append(q.Qualified, QualifiedName{Qualifier: Name{Name: t.val, Pos: t.pos}, Name: Name{Name: qualifiedName(p.peekAt(2)), Pos: p.peekAt(2).pos}})
			if prevEnd >= 0 && t.start > prevEnd {
				b.WriteByte(' ')
			}
			p.next()
			p.next()
			prevEnd = -1
			continue
		}
		if t.kind != tEOF && !(t.kind == tOp && t.val == ";" && depth == 0) {
			if t.raw {
				return nil, Errorf(sqlstate.FeatureNotSupported, t.pos, "escape and Unicode string syntax is not supported in console queries; write a plain 'string'")
			}
			if name, ok := p.parameterAt(t); ok {
				return nil, Errorf(sqlstate.UndefinedParameter, t.pos, "there is no parameter %s: console queries take no parameters; write the value in the query", name)
			}
			if prevEnd >= 0 && t.start > prevEnd {
				b.WriteByte(' ')
			}
			prevEnd = t.end
			switch t.kind {
			case tString:
				b.WriteString("'" + strings.ReplaceAll(t.val, "'", "''") + "'")
			case tQIdent:
				b.WriteString(`"` + strings.ReplaceAll(t.val, `"`, `""`) + `"`)
			default:
				b.WriteString(p.src[t.start:t.end])
			}
		}
		switch {
		case t.kind == tEOF:
			if depth > 0 {
				return nil, p.syntaxError()
			}
			q.SQL = b.String()
			return q, nil
		case t.kind == tOp && t.val == ";" && depth == 0:
			q.SQL = b.String()
			return q, nil
		case t.kind == tOp && t.val == "(":
			depth++
		case t.kind == tOp && t.val == ")":
			if depth == 0 {
				return nil, p.syntaxError()
			}
			depth--
		case isName(t):
			name := t.val
			if t.kind == tIdent {
				name = strings.ToLower(name)
			}
			if !seen[name] {
				seen[name] = true
				q.Names = append(q.Names, name)
				q.NamePos = append(q.NamePos, t.pos)
			}
			if n := p.peekAt(1); n.kind == tOp && n.val == "." && isName(p.peekAt(2)) {
				next := p.peekAt(2)
				q.Qualified = append(q.Qualified, QualifiedName{Qualifier: Name{Name: name, Pos: t.pos}, Name: Name{Name: qualifiedName(next), Pos: next.pos}})
			}
		}
		p.next()
	}
}

// PosOf returns the position of the first appearance of name in the
// query, 0 if it does not appear.
func (q *Query) PosOf(name string) int {
	for i, n := range q.Names {
		if n == name {
			return q.NamePos[i]
		}
	}
	return 0
}

// QueryOf parses st, a SELECT (a Select, say), as a Query; positions
// count in the text st was parsed from.
func QueryOf(st Statement) (*Query, error) {
	if q, ok := st.(*Query); ok {
		return q, nil
	}
	text := st.Text()
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	shift := st.Position() - 1
	for i := range toks {
		toks[i].pos += shift
	}
	p := &parser{src: text, toks: toks}
	first := p.peek()
	if !first.isWord("select") && !first.isWord("with") && !first.isWord("values") {
		return nil, p.syntaxError()
	}
	n, err := p.query()
	if err != nil {
		return nil, err
	}
	if !p.isOp(";") && p.peek().kind != tEOF {
		return nil, p.syntaxError()
	}
	q := n.(*Query)
	q.setBase(base{pos: first.pos, text: p.text(0)})
	return q, nil
}

// qualifiedName is the name t stands for: folded if bare.
func qualifiedName(t token) string {
	if t.kind == tIdent {
		return strings.ToLower(t.val)
	}
	return t.val
}

// withQuery parses a statement beginning with WITH or VALUES as a
// Query.
func (p *parser) withQuery() (node, error) {
	p.i--
	return p.query()
}

// parameterAt reports whether a statement parameter starts at t, the
// current token, and returns it as written: $1 (PostgreSQL), or one of
// the forms the engine would otherwise bind silently to NULL (?, ?1,
// :name, @name, $name). A colon that follows a colon (a :: cast) is
// not one.
func (p *parser) parameterAt(t token) (string, bool) {
	if t.kind != tOp {
		return "", false
	}
	next := p.peekAt(1)
	adjacent := next.start == t.end && (next.kind == tNumber || next.kind == tIdent)
	switch {
	case t.val == "?" && adjacent && next.kind == tNumber:
		return p.src[t.start:next.end], true
	case t.val == "?":
		return "?", true
	case t.val == "$" || t.val == "@", t.val == ":" && (t.start == 0 || p.src[t.start-1] != ':'):
		if adjacent {
			return p.src[t.start:next.end], true
		}
	}
	return "", false
}

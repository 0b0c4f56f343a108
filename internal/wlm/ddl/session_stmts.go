package ddl

// This file holds the statements that act on a sluice session: cancel
// its running statement or end it.

import (
	"strconv"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// SessionCommand is CANCEL STATEMENT id or TERMINATE SESSION id, or
// their PostgreSQL spellings SELECT pg_cancel_backend(id) and SELECT
// pg_terminate_backend(id), which answer one row of one boolean column.
// id is a sluice session id (SHOW SESSIONS). In a fleet, CANCEL
// STATEMENT id ON INSTANCE 'name', TERMINATE SESSION id ON INSTANCE
// 'name' and the functions' second argument, pg_cancel_backend(id,
// 'name'), name the instance that holds the session.
type SessionCommand struct {
	base
	Terminate  bool   // end the session; else cancel its running statement
	Session    uint64 // the session's id
	SessionPos int
	// Instance names the instance that holds the session; "" for this
	// one.
	Instance    string
	InstancePos int
	// Column is the name of the boolean column the SELECT form answers
	// (the function's name or the alias), "" for CANCEL and TERMINATE.
	Column string
}

// cancelStmt parses CANCEL STATEMENT id.
func (p *parser) cancelStmt() (node, error) {
	if err := p.expectKeyword("statement"); err != nil {
		return nil, err
	}
	c, err := p.sessionID(&SessionCommand{})
	if err != nil {
		return nil, err
	}
	return c, p.onInstance(c)
}

// terminateStmt parses TERMINATE SESSION id.
func (p *parser) terminateStmt() (node, error) {
	if err := p.expectKeyword("session"); err != nil {
		return nil, err
	}
	c, err := p.sessionID(&SessionCommand{Terminate: true})
	if err != nil {
		return nil, err
	}
	return c, p.onInstance(c)
}

// onInstance reads an optional ON INSTANCE name: a 'string' or a name.
func (p *parser) onInstance(c *SessionCommand) error {
	if !p.accept("on") {
		return nil
	}
	if err := p.expectKeyword("instance"); err != nil {
		return err
	}
	return p.instanceName(c)
}

// instanceName reads the instance of c: a 'string' or a name.
func (p *parser) instanceName(c *SessionCommand) error {
	t := p.peek()
	if t.kind != tString && !isName(t) || t.val == "" {
		return Errorf(sqlstate.SyntaxError, t.pos, "instance name must be a string or a name, not %s", t.describe(p.src))
	}
	p.next()
	c.Instance, c.InstancePos = t.val, t.pos
	return nil
}

// sessionID reads the session id of c.
func (p *parser) sessionID(c *SessionCommand) (*SessionCommand, error) {
	t := p.peek()
	id, err := strconv.ParseUint(t.val, 10, 64)
	if t.kind != tNumber || err != nil {
		return nil, Errorf(sqlstate.SyntaxError, t.pos, "session id must be a non-negative integer, not %s", t.describe(p.src))
	}
	p.next()
	c.Session, c.SessionPos = id, t.pos
	return c, nil
}

// sessionFunc reads, after SELECT, pg_cancel_backend(id) or
// pg_terminate_backend(id) with an optional alias and nothing else; it
// reports false, having consumed some tokens, for anything else.
func (p *parser) sessionFunc() (node, bool) {
	t := p.peek()
	if t.kind != tIdent || t.val != "pg_cancel_backend" && t.val != "pg_terminate_backend" {
		return nil, false
	}
	p.next()
	c := &SessionCommand{Terminate: t.val == "pg_terminate_backend", Column: t.val}
	if !p.acceptOp("(") {
		return nil, false
	}
	if _, err := p.sessionID(c); err != nil {
		return nil, false
	}
	if p.acceptOp(",") {
		if p.peek().kind != tString || p.instanceName(c) != nil {
			return nil, false
		}
	}
	if !p.acceptOp(")") {
		return nil, false
	}
	alias, err := p.alias("")
	if err != nil {
		return nil, false
	}
	if alias != "" {
		c.Column = alias
	}
	if !p.isOp(";") && p.peek().kind != tEOF {
		return nil, false
	}
	return c, true
}

// SessionQuery is SELECT pg_cancel_backend(expr) or
// pg_terminate_backend(expr) [[AS] name] FROM ...: the session function
// applied to the session id expr gives on each row of a query over the
// views (SELECT pg_terminate_backend(id) FROM sessions WHERE user =
// 'etl'), answering one boolean column, a row per row of the query.
type SessionQuery struct {
	base
	Terminate bool // end the sessions; else cancel their running statements
	// Column is the name of the boolean column: the function's name or
	// the alias.
	Column string
	// Ids is the same SELECT with the call replaced by its argument: its
	// first column is the session ids (a *Query or a *Select).
	Ids Statement
}

// sessionQuery parses, after SELECT, a session function whose argument
// is not a literal, followed by FROM: a SessionQuery. It reports false,
// consuming what it read, for anything else.
func (p *parser) sessionQuery() (node, bool) {
	fn := p.peek()
	if fn.kind != tIdent || fn.val != "pg_cancel_backend" && fn.val != "pg_terminate_backend" {
		return nil, false
	}
	p.next()
	if !p.acceptOp("(") {
		return nil, false
	}
	argStart, depth := p.peek().start, 1
	for depth > 0 {
		t := p.peek()
		switch {
		case t.kind == tEOF || p.isOp(";"):
			return nil, false
		case p.isOp("("):
			depth++
		case p.isOp(")"):
			depth--
		}
		if depth > 0 {
			p.next()
		}
	}
	argEnd := p.peek().start
	p.next() // the closing parenthesis
	if argEnd <= argStart {
		return nil, false
	}
	alias, err := p.alias("from")
	if err != nil || !p.isKeyword("from") {
		return nil, false
	}
	fromStart := p.peek().start
	for depth = 0; p.peek().kind != tEOF && (depth > 0 || !p.isOp(";")); p.next() {
		switch {
		case p.isOp("("):
			depth++
		case p.isOp(")"):
			depth--
		}
	}
	ids, ok := parseIds("SELECT " + p.src[argStart:argEnd] + " " + p.src[fromStart:p.peek().start])
	if !ok {
		return nil, false
	}
	q := &SessionQuery{Terminate: fn.val == "pg_terminate_backend", Column: fn.val, Ids: ids}
	if alias != "" {
		q.Column = alias
	}
	return q, true
}

// parseIds parses text, a SELECT, as a query over the views (a *Query or
// a *Select); false for anything else.
func parseIds(text string) (Statement, bool) {
	toks, err := lex(text)
	if err != nil {
		return nil, false
	}
	ip := &parser{src: text, toks: toks}
	first := ip.peek()
	if !ip.accept("select") {
		return nil, false
	}
	n, err := ip.selectOrQuery()
	if err != nil || ip.peek().kind != tEOF {
		return nil, false
	}
	switch n.(type) {
	case *Query, *Select:
	default:
		return nil, false
	}
	n.setBase(base{pos: first.pos, text: text})
	return n, true
}

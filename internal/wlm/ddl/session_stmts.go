package ddl

// This file holds the statements that act on a sluice session: cancel
// its running statement or end it.

import "strconv"

// SessionCommand is CANCEL STATEMENT id or TERMINATE SESSION id, or
// their PostgreSQL spellings SELECT pg_cancel_backend(id) and SELECT
// pg_terminate_backend(id), which answer one row of one boolean column.
// id is a sluice session id (SHOW SESSIONS).
type SessionCommand struct {
	base
	Terminate  bool   // end the session; else cancel its running statement
	Session    uint64 // the session's id
	SessionPos int
	// Column is the name of the boolean column the SELECT form answers
	// (the function's name or the alias), "" for CANCEL and TERMINATE.
	Column string
}

// cancelStmt parses CANCEL STATEMENT id.
func (p *parser) cancelStmt() (node, error) {
	if err := p.expectKeyword("statement"); err != nil {
		return nil, err
	}
	return p.sessionID(&SessionCommand{})
}

// terminateStmt parses TERMINATE SESSION id.
func (p *parser) terminateStmt() (node, error) {
	if err := p.expectKeyword("session"); err != nil {
		return nil, err
	}
	return p.sessionID(&SessionCommand{Terminate: true})
}

// sessionID reads the session id of c.
func (p *parser) sessionID(c *SessionCommand) (*SessionCommand, error) {
	t := p.peek()
	id, err := strconv.ParseUint(t.val, 10, 64)
	if t.kind != tNumber || err != nil {
		return nil, Errorf(CodeSyntax, t.pos, "session id must be a non-negative integer, not %s", t.describe(p.src))
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

package ddl

// This file holds the statements that act on a sluice session: cancel
// its running statement or end it.

import "strconv"

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
		return Errorf(CodeSyntax, t.pos, "instance name must be a string or a name, not %s", t.describe(p.src))
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

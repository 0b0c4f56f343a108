package ddl

import (
	"strconv"
	"strings"
)

// MaxLength is the longest statement text Parse accepts, in characters.
const MaxLength = 1 << 20

// Parse parses every statement of sql, separated by semicolons. Empty
// statements (only white space, comments or semicolons) are skipped, so
// an empty text returns no statements and no error. Keywords and bare
// names are case-insensitive (folded to lower case); "quoted identifiers"
// and 'strings' keep their case.
//
// Errors are *Error with SQLSTATE 42601 (syntax) or 0A000 (a construct
// the console does not support) and the position of the offending token.
// Parse never panics.
func Parse(sql string) ([]Statement, error) {
	src := []rune(sql)
	if len(src) > MaxLength {
		return nil, Errorf(CodeSyntax, 0, "statement too long (%d characters; at most %d)", len(src), MaxLength)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	var out []Statement
	for {
		for p.isOp(";") {
			p.next()
		}
		if p.peek().kind == tEOF {
			return out, nil
		}
		st, err := p.statement()
		if err != nil {
			return nil, err
		}
		out = append(out, st)
		if !p.isOp(";") && p.peek().kind != tEOF {
			return nil, p.syntaxError()
		}
	}
}

// ParseOne parses sql, which must hold exactly one statement.
func ParseOne(sql string) (Statement, error) {
	sts, err := Parse(sql)
	if err != nil {
		return nil, err
	}
	switch len(sts) {
	case 0:
		return nil, Errorf(CodeSyntax, 0, "empty statement")
	case 1:
		return sts[0], nil
	}
	return nil, Errorf(CodeSyntax, sts[1].Position(), "expected one statement, got %d", len(sts))
}

type parser struct {
	src  []rune
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.val == op
}

func (p *parser) isKeyword(kw string) bool {
	t := p.peek()
	return t.kind == tIdent && t.val == kw
}

// accept consumes the keyword kw if it is next.
func (p *parser) accept(kw string) bool {
	if p.isKeyword(kw) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectKeyword(kw string) error {
	if !p.accept(kw) {
		return p.syntaxError()
	}
	return nil
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.syntaxError()
	}
	p.next()
	return nil
}

// syntaxError reports the next token as unexpected.
func (p *parser) syntaxError() *Error {
	t := p.peek()
	if t.kind == tEOF {
		return Errorf(CodeSyntax, t.pos, "syntax error at end of input")
	}
	return Errorf(CodeSyntax, t.pos, "syntax error at or near %s", t.describe(p.src))
}

// text returns the source from the token at index from up to the current
// token.
func (p *parser) text(from int) string {
	start := p.toks[from].pos - 1
	end := start
	if p.i > from {
		end = p.toks[p.i-1].end
	}
	return string(p.src[start:end])
}

func (p *parser) statement() (Statement, error) {
	first := p.i
	t := p.peek()
	var st Statement
	var err error
	if t.kind == tIdent {
		switch t.val {
		case "create":
			p.next()
			st, err = p.create()
		case "alter":
			p.next()
			st, err = p.alter()
		case "drop":
			p.next()
			st, err = p.drop()
		case "set":
			p.next()
			st, err = p.set()
		case "reset":
			p.next()
			st, err = p.reset()
		case "show":
			p.next()
			st, err = p.show()
		case "select":
			p.next()
			st, err = p.selectStmt()
		default:
			return nil, p.syntaxError()
		}
	} else {
		return nil, p.syntaxError()
	}
	if err != nil {
		return nil, err
	}
	b := base{pos: t.pos, text: p.text(first)}
	switch s := st.(type) {
	case *Create:
		s.base = b
	case *Alter:
		s.base = b
	case *Drop:
		s.base = b
	case *Set:
		s.base = b
	case *Reset:
		s.base = b
	case *Show:
		s.base = b
	case *Select:
		s.base = b
	}
	return st, nil
}

// kind reads EXCEPT RULE, RESOURCE POOL, LINK or USER.
func (p *parser) kind() (Kind, error) {
	switch {
	case p.accept("except"):
		return Rule, p.expectKeyword("rule")
	case p.accept("resource"):
		return Pool, p.expectKeyword("pool")
	case p.accept("link"):
		return Link, nil
	case p.accept("user"):
		return User, nil
	}
	return 0, p.syntaxError()
}

// name reads an object name: an identifier or a "quoted identifier".
func (p *parser) name() (Name, error) {
	t := p.peek()
	if t.kind == tIdent || t.kind == tQIdent {
		p.next()
		return Name{Name: t.val, Pos: t.pos}, nil
	}
	return Name{}, p.syntaxError()
}

func (p *parser) create() (Statement, error) {
	k, err := p.kind()
	if err != nil {
		return nil, err
	}
	ifNot := false
	if p.isKeyword("if") && p.peekAt(1).kind == tIdent && p.peekAt(1).val == "not" &&
		p.peekAt(2).kind == tIdent && p.peekAt(2).val == "exists" {
		p.next()
		p.next()
		p.next()
		ifNot = true
	}
	n, err := p.name()
	if err != nil {
		return nil, err
	}
	var opts []Option
	if k == User {
		opts, err = p.userOptions()
	} else {
		opts, err = p.withOptions()
	}
	if err != nil {
		return nil, err
	}
	return &Create{Kind: k, IfNotExists: ifNot, Name: n, Options: opts}, nil
}

func (p *parser) alter() (Statement, error) {
	k, err := p.kind()
	if err != nil {
		return nil, err
	}
	n, err := p.name()
	if err != nil {
		return nil, err
	}
	var opts []Option
	if k == User {
		opts, err = p.userOptions()
	} else {
		opts, err = p.withOptions()
	}
	if err != nil {
		return nil, err
	}
	if len(opts) == 0 {
		return nil, p.syntaxError()
	}
	return &Alter{Kind: k, Name: n, Options: opts}, nil
}

func (p *parser) drop() (Statement, error) {
	d := &Drop{}
	d.IfExists = p.ifExists()
	k, err := p.kind()
	if err != nil {
		return nil, err
	}
	d.Kind = k
	if p.ifExists() {
		d.IfExists = true
	}
	for {
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		d.Names = append(d.Names, n)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	switch {
	case p.accept("cascade"):
		d.Cascade = true
	case p.accept("restrict"):
	}
	return d, nil
}

// ifExists consumes IF EXISTS if it is next.
func (p *parser) ifExists() bool {
	if p.isKeyword("if") && p.peekAt(1).kind == tIdent && p.peekAt(1).val == "exists" {
		p.next()
		p.next()
		return true
	}
	return false
}

// withOptions reads an optional [WITH] ( name = value [, ...] ).
func (p *parser) withOptions() ([]Option, error) {
	with := p.accept("with")
	if !p.isOp("(") {
		if with {
			return nil, p.syntaxError()
		}
		return nil, nil
	}
	p.next()
	var opts []Option
	for {
		t := p.peek()
		if t.kind != tIdent && t.kind != tQIdent {
			return nil, p.syntaxError()
		}
		p.next()
		name := strings.ToLower(t.val)
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		for _, o := range opts {
			if o.Name == name {
				return nil, Errorf(CodeSyntax, t.pos, "conflicting or redundant options: %s is given twice", name)
			}
		}
		opts = append(opts, Option{Name: name, NamePos: t.pos, Value: v})
		if p.isOp(")") {
			p.next()
			return opts, nil
		}
		if err := p.expectOp(","); err != nil {
			return nil, err
		}
	}
}

// userOptions reads the clauses of CREATE/ALTER USER in any order:
// RESOURCE POOL 'pool', [ENCRYPTED | UNENCRYPTED] PASSWORD 'x' | DISABLE,
// IDENTIFIED BY 'x', with an optional leading WITH. They are returned as
// options resource_pool and password.
func (p *parser) userOptions() ([]Option, error) {
	p.accept("with")
	var opts []Option
	add := func(name string, pos int, v Value) error {
		for _, o := range opts {
			if o.Name == name {
				return Errorf(CodeSyntax, pos, "conflicting or redundant options: %s is given twice", strings.ReplaceAll(name, "_", " "))
			}
		}
		opts = append(opts, Option{Name: name, NamePos: pos, Value: v})
		return nil
	}
	for {
		t := p.peek()
		if t.kind != tIdent {
			return opts, nil
		}
		switch t.val {
		case "resource":
			p.next()
			if err := p.expectKeyword("pool"); err != nil {
				return nil, err
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			if err := add("resource_pool", t.pos, v); err != nil {
				return nil, err
			}
		case "encrypted", "unencrypted", "password":
			p.next()
			if t.val != "password" {
				if err := p.expectKeyword("password"); err != nil {
					return nil, err
				}
			}
			v, err := p.password()
			if err != nil {
				return nil, err
			}
			if err := add("password", t.pos, v); err != nil {
				return nil, err
			}
		case "identified":
			p.next()
			if err := p.expectKeyword("by"); err != nil {
				return nil, err
			}
			v, err := p.password()
			if err != nil {
				return nil, err
			}
			if err := add("password", t.pos, v); err != nil {
				return nil, err
			}
		case "cascade", "restrict":
			return nil, p.syntaxError()
		default:
			// Role attributes (LOGIN, SYSADMIN, ...) belong to the
			// database, not to the proxy.
			return nil, Errorf(CodeNotSupported, t.pos, "user option %s is not supported: sluice records only a user's RESOURCE POOL (and accepts and ignores PASSWORD)", strings.ToUpper(t.val))
		}
	}
}

// password reads 'secret' or DISABLE.
func (p *parser) password() (Value, error) {
	t := p.peek()
	switch {
	case t.kind == tString:
		p.next()
		return Value{Kind: String, Text: t.val, Pos: t.pos}, nil
	case t.kind == tIdent && t.val == "disable":
		p.next()
		return Value{Kind: Word, Text: "disable", Pos: t.pos}, nil
	}
	return Value{}, p.syntaxError()
}

// value reads a number (with optional sign and unit), a 'string', a bare
// word or DEFAULT.
func (p *parser) value() (Value, error) {
	t := p.peek()
	switch t.kind {
	case tOp:
		if t.val == "-" || t.val == "+" {
			n := p.peekAt(1)
			if n.kind == tNumber {
				p.next()
				p.next()
				text := n.val
				if t.val == "-" {
					text = "-" + text
				}
				return Value{Kind: Number, Text: text, Pos: t.pos}, nil
			}
		}
	case tNumber:
		p.next()
		return Value{Kind: Number, Text: t.val, Pos: t.pos}, nil
	case tString:
		p.next()
		return Value{Kind: String, Text: t.val, Pos: t.pos}, nil
	case tIdent:
		p.next()
		if t.val == "default" {
			return Value{Kind: Default, Text: "default", Pos: t.pos}, nil
		}
		return Value{Kind: Word, Text: string(p.src[t.pos-1 : t.end]), Pos: t.pos}, nil
	case tQIdent:
		p.next()
		return Value{Kind: Word, Text: t.val, Pos: t.pos}, nil
	}
	return Value{}, p.syntaxError()
}

// settingName reads a possibly dotted setting name.
func (p *parser) settingName() (string, int, error) {
	t := p.peek()
	if t.kind != tIdent && t.kind != tQIdent {
		return "", 0, p.syntaxError()
	}
	p.next()
	name := strings.ToLower(t.val)
	for p.isOp(".") {
		p.next()
		n := p.peek()
		if n.kind != tIdent && n.kind != tQIdent {
			return "", 0, p.syntaxError()
		}
		p.next()
		name += "." + strings.ToLower(n.val)
	}
	return name, t.pos, nil
}

func (p *parser) set() (Statement, error) {
	if p.isKeyword("session") || p.isKeyword("local") {
		// SET SESSION name / SET LOCAL name; "session" alone is a name.
		if n := p.peekAt(1); n.kind == tIdent || n.kind == tQIdent {
			p.next()
		}
	}
	name, pos, err := p.settingName()
	if err != nil {
		return nil, err
	}
	if !p.accept("to") {
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
	}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	return &Set{Name: name, NamePos: pos, Value: v}, nil
}

func (p *parser) reset() (Statement, error) {
	name, pos, err := p.settingName()
	if err != nil {
		return nil, err
	}
	return &Reset{Name: name, NamePos: pos}, nil
}

func (p *parser) show() (Statement, error) {
	name, pos, err := p.settingName()
	if err != nil {
		return nil, err
	}
	return &Show{Name: name, NamePos: pos}, nil
}

// unsupported reports the next token as a construct the console's SELECT
// does not support.
func (p *parser) unsupported() *Error {
	t := p.peek()
	if t.kind == tEOF {
		return Errorf(CodeSyntax, t.pos, "syntax error at end of input")
	}
	e := Errorf(CodeNotSupported, t.pos, "unsupported SELECT at or near %s", t.describe(p.src))
	e.Hint = "The console answers SELECT * FROM pg_session_wlmstat or gs_wlm_session_statistics (with an optional column list and LIMIT), SELECT version() and SELECT of literals."
	return e
}

func (p *parser) selectStmt() (Statement, error) {
	s := &Select{Limit: -1}
	for {
		tg, err := p.target()
		if err != nil {
			return nil, err
		}
		s.Targets = append(s.Targets, tg)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if p.accept("from") {
		t := p.peek()
		if t.kind != tIdent && t.kind != tQIdent {
			return nil, p.unsupported()
		}
		p.next()
		s.From, s.FromPos = strings.ToLower(t.val), t.pos
		if p.isOp(".") {
			p.next()
			n := p.peek()
			if n.kind != tIdent && n.kind != tQIdent {
				return nil, p.unsupported()
			}
			p.next()
			s.Schema, s.From = s.From, strings.ToLower(n.val)
		}
		// An optional alias.
		if p.accept("as") {
			if _, err := p.name(); err != nil {
				return nil, p.unsupported()
			}
		} else if t := p.peek(); t.kind == tQIdent || t.kind == tIdent && !reservedAfterFrom[t.val] {
			p.next()
		}
	}
	if p.accept("limit") {
		t := p.peek()
		if t.kind != tNumber {
			if t.kind == tIdent && t.val == "all" {
				p.next()
				return s, nil
			}
			return nil, p.syntaxError()
		}
		n, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil || n < 0 {
			return nil, Errorf(CodeSyntax, t.pos, "LIMIT must be a non-negative integer, not %s", t.describe(p.src))
		}
		p.next()
		s.Limit = n
	}
	if !p.isOp(";") && p.peek().kind != tEOF {
		return nil, p.unsupported()
	}
	return s, nil
}

var reservedAfterFrom = map[string]bool{
	"where": true, "limit": true, "order": true, "group": true, "having": true,
	"join": true, "left": true, "right": true, "inner": true, "outer": true,
	"cross": true, "full": true, "natural": true, "offset": true, "union": true,
	"except": true, "intersect": true, "on": true, "using": true, "window": true,
	"fetch": true, "for": true, "when": true, "then": true, "else": true, "end": true,
	"and": true, "or": true, "not": true, "is": true, "in": true, "like": true, "between": true,
}

func (p *parser) target() (Target, error) {
	t := p.peek()
	tg := Target{Pos: t.pos}
	switch {
	case t.kind == tOp && t.val == "*":
		p.next()
		tg.Star = true
		return tg, nil
	case t.kind == tNumber || t.kind == tString || t.kind == tOp && (t.val == "-" || t.val == "+"):
		v, err := p.value()
		if err != nil {
			return tg, p.unsupported()
		}
		tg.Value = &v
	case t.kind == tIdent || t.kind == tQIdent:
		if t.kind == tIdent && reservedAfterFrom[t.val] || t.kind == tIdent && t.val == "from" {
			return tg, p.unsupported()
		}
		p.next()
		tg.Name = strings.ToLower(t.val)
		if t.kind == tQIdent {
			tg.Name = t.val
		}
		// Qualified names: keep the last part.
		for p.isOp(".") {
			p.next()
			n := p.peek()
			if n.kind == tOp && n.val == "*" {
				p.next()
				tg.Star, tg.Name = true, ""
				return tg, nil
			}
			if n.kind != tIdent && n.kind != tQIdent {
				return tg, p.unsupported()
			}
			p.next()
			tg.Name = strings.ToLower(n.val)
		}
		if p.isOp("(") {
			p.next()
			tg.Func = true
			for !p.isOp(")") {
				v, err := p.value()
				if err != nil {
					return tg, p.unsupported()
				}
				tg.Args = append(tg.Args, v)
				if p.isOp(",") {
					p.next()
					continue
				}
				if !p.isOp(")") {
					return tg, p.unsupported()
				}
			}
			p.next()
		}
	default:
		return tg, p.unsupported()
	}
	switch t := p.peek(); {
	case t.kind == tIdent && t.val == "as":
		p.next()
		a := p.peek()
		if a.kind != tIdent && a.kind != tQIdent {
			return tg, p.unsupported()
		}
		p.next()
		tg.Alias = a.val
	case t.kind == tQIdent || t.kind == tIdent && t.val != "from" && !reservedAfterFrom[t.val]:
		p.next()
		tg.Alias = t.val
	}
	return tg, nil
}

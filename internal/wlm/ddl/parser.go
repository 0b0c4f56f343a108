package ddl

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/sqlstate"
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
	if n := utf8.RuneCountInString(sql); n > MaxLength {
		return nil, Errorf(sqlstate.SyntaxError, 0, "statement too long (%d characters; at most %d)", n, MaxLength)
	}
	src := sql
	if !utf8.ValidString(src) {
		src = string([]rune(src)) // each invalid byte becomes U+FFFD, as in a []rune
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
		return nil, Errorf(sqlstate.SyntaxError, 0, "empty statement")
	case 1:
		return sts[0], nil
	}
	return nil, Errorf(sqlstate.SyntaxError, sts[1].Position(), "expected one statement, got %d", len(sts))
}

type parser struct {
	src  string // valid UTF-8
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

// acceptAll consumes the keywords kws if they are all next, in order;
// otherwise it consumes nothing.
func (p *parser) acceptAll(kws ...string) bool {
	for k, kw := range kws {
		if t := p.peekAt(k); t.kind != tIdent || t.val != kw {
			return false
		}
	}
	for range kws {
		p.next()
	}
	return true
}

// acceptOp consumes the operator op if it is next.
func (p *parser) acceptOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

// acceptName consumes an identifier or a "quoted identifier" if one is
// next.
func (p *parser) acceptName() (token, bool) {
	t := p.peek()
	if !isName(t) {
		return t, false
	}
	p.next()
	return t, true
}

// isName reports whether t is an identifier or a "quoted identifier".
func isName(t token) bool { return t.kind == tIdent || t.kind == tQIdent }

func (p *parser) expectKeyword(kw string) error {
	if !p.accept(kw) {
		return p.syntaxError()
	}
	return nil
}

func (p *parser) expectOp(op string) error {
	if !p.acceptOp(op) {
		return p.syntaxError()
	}
	return nil
}

// syntaxError reports the next token as unexpected.
func (p *parser) syntaxError() *Error {
	t := p.peek()
	if t.kind == tEOF {
		return Errorf(sqlstate.SyntaxError, t.pos, "syntax error at end of input")
	}
	return Errorf(sqlstate.SyntaxError, t.pos, "syntax error at or near %s", t.describe(p.src))
}

// text returns the source from the token at index from up to the current
// token.
func (p *parser) text(from int) string {
	start := p.toks[from].start
	end := start
	if p.i > from {
		end = p.toks[p.i-1].end
	}
	return p.src[start:end]
}

// node is a statement being parsed. Every statement type embeds base,
// which (*parser).statement fills in once the last token is read.
type node interface {
	Statement
	setBase(base)
}

func (b *base) setBase(v base) { *b = v }

// statements are the parsers of the statements, by their first keyword,
// which each is called after.
var statements = map[string]func(*parser) (node, error){
	"create": (*parser).create,
	"alter":  (*parser).alter,
	"drop":   (*parser).drop,
	"set":    (*parser).set,
	"reset":  (*parser).reset,
	"show":   (*parser).show,
	"select": (*parser).selectOrQuery,
	"reload": (*parser).reload,

	"with":      (*parser).withQuery,
	"values":    (*parser).withQuery,
	"cancel":    (*parser).cancelStmt,
	"terminate": (*parser).terminateStmt,
}

func (p *parser) statement() (Statement, error) {
	first := p.i
	t := p.peek()
	parse := statements[t.val]
	if t.kind == tIdent && parse == nil && writeCommands[t.val] {
		return nil, readOnly(t.pos, strings.ToUpper(t.val))
	}
	if t.kind != tIdent || parse == nil {
		return nil, p.syntaxError()
	}
	p.next()
	st, err := parse(p)
	if err != nil {
		return nil, err
	}
	st.setBase(base{pos: t.pos, text: p.text(first)})
	return st, nil
}

// writeCommands are the SQL commands that would write, change a schema
// or reach outside the views: the console refuses them with 42501, as
// its query engine's authorizer does, not as syntax errors.
var writeCommands = map[string]bool{
	"pragma": true, "attach": true, "detach": true, "insert": true, "update": true, "delete": true,
	"replace": true, "upsert": true, "merge": true, "truncate": true, "vacuum": true, "reindex": true,
	"analyze": true, "copy": true, "grant": true, "revoke": true, "begin": true, "commit": true,
	"rollback": true, "savepoint": true, "release": true,
}

// schemaObjects are what CREATE, ALTER and DROP would change in a
// database's schema: the console has none to change (42501).
var schemaObjects = map[string]bool{
	"table": true, "index": true, "view": true, "trigger": true, "schema": true, "database": true,
	"temp": true, "temporary": true, "unique": true, "virtual": true, "sequence": true, "function": true,
}

// readOnly is the error of a command the console does not run because
// it would write.
func readOnly(pos int, what string) *Error {
	e := Errorf(sqlstate.InsufficientPrivilege, pos, "permission denied: the sluice admin console's views only read (%s)", what)
	e.Hint = "The console changes its catalog with CREATE, ALTER and DROP of EXCEPT RULE, RESOURCE POOL, LINK, USER and ALTER ROUTE."
	return e
}

// kind reads EXCEPT RULE, RESOURCE POOL, LINK or USER.
func (p *parser) kind() (Kind, error) {
	if t := p.peek(); t.kind == tIdent && schemaObjects[t.val] {
		return 0, readOnly(t.pos, strings.ToUpper(t.val))
	}
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
	t, ok := p.acceptName()
	if !ok {
		return Name{}, p.syntaxError()
	}
	return Name{Name: t.val, Pos: t.pos}, nil
}

func (p *parser) create() (node, error) {
	k, err := p.kind()
	if err != nil {
		return nil, err
	}
	ifNot := p.acceptAll("if", "not", "exists")
	n, opts, err := p.nameAndOptions(k)
	if err != nil {
		return nil, err
	}
	return &Create{Kind: k, IfNotExists: ifNot, Name: n, Options: opts}, nil
}

func (p *parser) alter() (node, error) {
	if p.accept("route") {
		return p.alterRoute()
	}
	k, err := p.kind()
	if err != nil {
		return nil, err
	}
	n, opts, err := p.nameAndOptions(k)
	if err != nil {
		return nil, err
	}
	if len(opts) == 0 {
		return nil, p.syntaxError()
	}
	return &Alter{Kind: k, Name: n, Options: opts}, nil
}

// nameAndOptions reads the name and options of CREATE or ALTER of kind
// k: the clauses of a user, a WITH list for the other kinds.
func (p *parser) nameAndOptions(k Kind) (Name, []Option, error) {
	n, err := p.name()
	if err != nil {
		return Name{}, nil, err
	}
	var opts []Option
	if k == User {
		opts, err = p.userOptions()
	} else {
		opts, err = p.withOptions()
	}
	return n, opts, err
}

// commaList parses one or more items with item, separated by commas,
// and returns them in order; the first error ends the list.
func commaList[T any](p *parser, item func() (T, error)) ([]T, error) {
	var out []T
	for {
		v, err := item()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if !p.acceptOp(",") {
			return out, nil
		}
	}
}

func (p *parser) drop() (node, error) {
	d := &Drop{IfExists: p.acceptAll("if", "exists")}
	k, err := p.kind()
	if err != nil {
		return nil, err
	}
	d.Kind = k
	if p.acceptAll("if", "exists") {
		d.IfExists = true
	}
	if d.Names, err = commaList(p, p.name); err != nil {
		return nil, err
	}
	switch {
	case p.accept("cascade"):
		d.Cascade = true
	case p.accept("restrict"):
	}
	return d, nil
}

// withOptions reads an optional [WITH] ( name = value [, ...] ).
func (p *parser) withOptions() ([]Option, error) {
	with := p.accept("with")
	if !p.acceptOp("(") {
		if with {
			return nil, p.syntaxError()
		}
		return nil, nil
	}
	return p.optionList(func(token) (Value, error) {
		if err := p.expectOp("="); err != nil {
			return Value{}, err
		}
		return p.value()
	})
}

// optionList reads the options of a list whose "(" has been read, up to
// and including its ")": a name, then what value reads after it, each
// option separated by commas. An option given twice is an error.
func (p *parser) optionList(value func(name token) (Value, error)) ([]Option, error) {
	var opts []Option
	for {
		t, ok := p.acceptName()
		if !ok {
			return nil, p.syntaxError()
		}
		v, err := value(t)
		if err != nil {
			return nil, err
		}
		name := strings.ToLower(t.val)
		if opts, err = addOption(opts, Option{Name: name, NamePos: t.pos, Value: v}, name); err != nil {
			return nil, err
		}
		if p.acceptOp(")") {
			return opts, nil
		}
		if err := p.expectOp(","); err != nil {
			return nil, err
		}
	}
}

// addOption appends o to opts. An option of the same name already there
// is an error at o's name, which the message spells as shown.
func addOption(opts []Option, o Option, shown string) ([]Option, error) {
	for _, prev := range opts {
		if prev.Name == o.Name {
			return nil, Errorf(sqlstate.SyntaxError, o.NamePos, "conflicting or redundant options: %s is given twice", shown)
		}
	}
	return append(opts, o), nil
}

// userOptions reads the clauses of CREATE/ALTER USER in any order:
// RESOURCE POOL 'pool', [ENCRYPTED | UNENCRYPTED] PASSWORD 'x' | DISABLE,
// IDENTIFIED BY 'x', with an optional leading WITH. They are returned as
// options resource_pool and password.
func (p *parser) userOptions() ([]Option, error) {
	p.accept("with")
	var opts []Option
	for {
		t := p.peek()
		if t.kind != tIdent {
			return opts, nil
		}
		// A clause is its first word, a keyword that must follow (then,
		// if any) and a value.
		var name, then string
		read := p.password
		switch t.val {
		case "resource":
			name, then, read = "resource_pool", "pool", p.value
		case "password":
			name = "password"
		case "encrypted", "unencrypted":
			name, then = "password", "password"
		case "identified":
			name, then = "password", "by"
		case "cascade", "restrict":
			return nil, p.syntaxError()
		default:
			// Role attributes (LOGIN, SYSADMIN, ...) belong to the
			// database, not to the proxy.
			return nil, Errorf(sqlstate.FeatureNotSupported, t.pos, "user option %s is not supported: sluice records only a user's RESOURCE POOL (and accepts and ignores PASSWORD)", strings.ToUpper(t.val))
		}
		p.next()
		if then != "" {
			if err := p.expectKeyword(then); err != nil {
				return nil, err
			}
		}
		v, err := read()
		if err != nil {
			return nil, err
		}
		if opts, err = addOption(opts, Option{Name: name, NamePos: t.pos, Value: v}, strings.ReplaceAll(name, "_", " ")); err != nil {
			return nil, err
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
		return Value{Kind: Word, Text: p.src[t.start:t.end], Pos: t.pos}, nil
	case tQIdent:
		p.next()
		return Value{Kind: Word, Text: t.val, Pos: t.pos}, nil
	}
	return Value{}, p.syntaxError()
}

// settingName reads a possibly dotted setting name.
func (p *parser) settingName() (string, int, error) {
	t, ok := p.acceptName()
	if !ok {
		return "", 0, p.syntaxError()
	}
	name := strings.ToLower(t.val)
	for p.acceptOp(".") {
		n, ok := p.acceptName()
		if !ok {
			return "", 0, p.syntaxError()
		}
		name += "." + strings.ToLower(n.val)
	}
	return name, t.pos, nil
}

func (p *parser) set() (node, error) {
	if p.isKeyword("session") || p.isKeyword("local") {
		// SET SESSION name / SET LOCAL name; "session" alone is a name.
		if isName(p.peekAt(1)) {
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

func (p *parser) reset() (node, error) {
	name, pos, err := p.settingName()
	if err != nil {
		return nil, err
	}
	return &Reset{Name: name, NamePos: pos}, nil
}

func (p *parser) show() (node, error) {
	// SHOW CLUSTER name; "cluster" alone is a setting's name.
	cluster := p.isKeyword("cluster") && isName(p.peekAt(1))
	if cluster {
		p.next()
	}
	name, pos, err := p.settingName()
	if err != nil {
		return nil, err
	}
	sh := &Show{Name: name, NamePos: pos, Cluster: cluster}
	if name == "whatif" && !cluster && p.isKeyword("rtt") {
		// SHOW WHATIF RTT '10ms'
		p.next()
		if t := p.peek(); t.kind != tString && t.kind != tNumber {
			return nil, p.syntaxError()
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		sh.RTT, sh.RTTPos = v.Text, v.Pos
	}
	return sh, nil
}

// unsupported reports the next token as a construct the console's SELECT
// does not support; the end of input is a syntax error.
func (p *parser) unsupported() *Error {
	t := p.peek()
	if t.kind == tEOF {
		return p.syntaxError()
	}
	e := Errorf(sqlstate.FeatureNotSupported, t.pos, "unsupported SELECT at or near %s", t.describe(p.src))
	e.Hint = "The console answers SELECT * FROM pg_session_wlmstat or gs_wlm_session_statistics (with an optional column list and LIMIT), SELECT version() and SELECT of literals."
	return e
}

func (p *parser) selectStmt() (node, error) {
	s := &Select{Limit: -1}
	var err error
	if s.Targets, err = commaList(p, p.target); err != nil {
		return nil, err
	}
	if p.accept("from") {
		t, ok := p.acceptName()
		if !ok {
			return nil, p.unsupported()
		}
		s.From, s.FromPos = strings.ToLower(t.val), t.pos
		if p.acceptOp(".") {
			n, ok := p.acceptName()
			if !ok {
				return nil, p.unsupported()
			}
			s.Schema, s.From = s.From, strings.ToLower(n.val)
		}
		if _, err := p.alias(""); err != nil {
			return nil, err
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
			return nil, Errorf(sqlstate.SyntaxError, t.pos, "LIMIT must be a non-negative integer, not %s", t.describe(p.src))
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

// alias reads an optional [AS] alias and returns it, or "" for none.
// Without AS, an identifier is an alias unless it is a word of
// reservedAfterFrom or the keyword stop ("" for none), which start the
// next clause instead.
func (p *parser) alias(stop string) (string, error) {
	if p.accept("as") {
		t, ok := p.acceptName()
		if !ok {
			return "", p.unsupported()
		}
		return t.val, nil
	}
	if t := p.peek(); t.kind == tQIdent || t.kind == tIdent && t.val != stop && !reservedAfterFrom[t.val] {
		p.next()
		return t.val, nil
	}
	return "", nil
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
	case isName(t):
		if t.kind == tIdent && (t.val == "from" || reservedAfterFrom[t.val]) {
			return tg, p.unsupported()
		}
		p.next()
		tg.Name = strings.ToLower(t.val)
		if t.kind == tQIdent {
			tg.Name = t.val
		}
		// Qualified names: keep the last part.
		for p.acceptOp(".") {
			if p.acceptOp("*") {
				tg.Star, tg.Name = true, ""
				return tg, nil
			}
			n, ok := p.acceptName()
			if !ok {
				return tg, p.unsupported()
			}
			tg.Name = strings.ToLower(n.val)
		}
		if p.acceptOp("(") {
			tg.Func = true
			for !p.acceptOp(")") {
				v, err := p.value()
				if err != nil {
					return tg, p.unsupported()
				}
				tg.Args = append(tg.Args, v)
				if !p.acceptOp(",") && !p.isOp(")") {
					return tg, p.unsupported()
				}
			}
		}
	default:
		return tg, p.unsupported()
	}
	var err error
	tg.Alias, err = p.alias("from")
	return tg, err
}

package litepg

import (
	"strconv"
	"strings"
)

// stmtKind says how a session runs a statement.
type stmtKind uint8

const (
	skEmpty      stmtKind = iota + 1 // nothing but white space and comments
	skQuery                          // SQLite statement that returns rows
	skExec                           // SQLite statement without rows
	skExplain                        // EXPLAIN: SQLite's query plan as text rows
	skBegin                          // BEGIN / START TRANSACTION
	skCommit                         // COMMIT / END
	skRollback                       // ROLLBACK / ABORT
	skSet                            // SET name = value
	skReset                          // RESET name / RESET ALL
	skShow                           // SHOW name / SHOW ALL
	skCopy                           // COPY ... FROM STDIN / TO STDOUT
	skDeallocate                     // DEALLOCATE name / ALL
	skDiscard                        // DISCARD ALL
	skNoop                           // accepted and ignored (SET TRANSACTION ...)
)

// env is what a translation may depend on besides the SQL text: the
// identity of the session the statement runs in.
type env struct {
	pid      uint32 // session's process ID (pg_backend_pid, pg_sleep)
	user     string // session user (current_user)
	database string // database named at startup (current_database)
}

// stmt is one translated statement.
type stmt struct {
	kind stmtKind
	// tag is the command tag's verb: "SELECT", "INSERT", "CREATE TABLE".
	tag string
	// sql is the SQLite text (skQuery, skExec, skExplain).
	sql string
	// write reports that the statement may modify the database, so it
	// runs holding the server's write lock.
	write bool
	// ddl reports a schema change, which invalidates cached schema.
	ddl bool
	// savepoint marks SAVEPOINT, RELEASE and ROLLBACK TO, which need a
	// transaction block.
	savepoint bool
	// noTx marks statements that cannot run inside a transaction block.
	noTx bool
	// readOnly marks BEGIN READ ONLY; immediate marks BEGIN IMMEDIATE.
	readOnly, immediate bool
	// nparams is the highest $n the statement uses.
	nparams int
	// params hints at the type of each parameter, indexed n-1.
	params []typeHint
	// cols are the result columns of the select list or RETURNING clause,
	// nil when they could not be listed (SELECT *).
	cols []colHint
	// tables maps each table name and alias the statement names to the
	// table's name.
	tables map[string]string
	// target is the table an INSERT writes and insertCols its column
	// list (nil: all columns in order).
	target     string
	insertCols []string
	// setName and setValue are the SET/RESET/SHOW name (lower case) and
	// the SET value; setName "all" with RESET or SHOW means all.
	setName, setValue string
	// name is the DEALLOCATE target, "" for ALL.
	name string
	// copy describes a COPY statement.
	copy *copySpec
}

// copyFormat is the data format of a COPY.
type copyFormat uint8

const (
	copyText copyFormat = iota
	copyCSV
	copyBinary
)

// copySpec is a parsed COPY statement.
type copySpec struct {
	from    bool     // FROM STDIN (else TO STDOUT)
	table   string   // table name, "" for COPY (query) TO
	columns []string // column list, nil for all
	query   *stmt    // COPY (query) TO: the translated query
	format  copyFormat
	delim   byte
	null    string
	nullSet bool
	header  bool
	quote   byte
	escape  byte
}

// translate splits src into statements and translates each from
// PostgreSQL to SQLite. A statement list is returned only if every
// statement translates; an empty src gives one skEmpty statement. It never
// panics.
func translate(src string, e env) ([]*stmt, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	var out []*stmt
	start := 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) && !toks[i].isPunct(";") {
			continue
		}
		if i > start {
			st, err := translateOne(toks[start:i], e)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
		start = i + 1
	}
	if len(out) == 0 {
		out = append(out, &stmt{kind: skEmpty})
	}
	return out, nil
}

// translateOne translates one statement without its semicolon.
func translateOne(toks []token, e env) (*stmt, error) {
	if len(toks) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	if toks[0].isPunct("(") {
		return translateQuery(toks, e)
	}
	first := toks[0]
	if first.kind != tkIdent {
		return nil, syntaxErrorf("syntax error at or near %q", clip(first.text))
	}
	switch first.val {
	case "select", "values", "with", "table":
		return translateQuery(toks, e)
	case "insert", "update", "delete":
		return translateQuery(toks, e)
	case "create":
		return translateCreate(toks, e)
	case "drop":
		return translateDrop(toks)
	case "alter":
		return translateAlter(toks, e)
	case "begin", "start":
		return translateBegin(toks)
	case "commit", "end":
		rest := skipWords(toks[1:], "work", "transaction")
		if len(rest) > 0 && rest[0].is("prepared") {
			return nil, unsupportedf("two-phase commit is not supported")
		}
		if len(rest) > 0 && rest[0].is("and") {
			if len(rest) > 1 && rest[1].is("no") {
				return &stmt{kind: skCommit, tag: "COMMIT"}, nil
			}
			return nil, unsupportedf("COMMIT AND CHAIN is not supported")
		}
		if len(rest) > 0 {
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
		}
		return &stmt{kind: skCommit, tag: "COMMIT"}, nil
	case "rollback", "abort":
		rest := skipWords(toks[1:], "work", "transaction")
		if len(rest) > 0 && rest[0].is("prepared") {
			return nil, unsupportedf("two-phase commit is not supported")
		}
		if len(rest) > 0 && rest[0].is("to") && first.val == "rollback" {
			rest = skipWords(rest[1:], "savepoint")
			name, err := singleName(rest)
			if err != nil {
				return nil, err
			}
			return &stmt{kind: skExec, tag: "ROLLBACK", sql: "ROLLBACK TO " + name, savepoint: true}, nil
		}
		if len(rest) > 0 && rest[0].is("and") {
			if len(rest) > 1 && rest[1].is("no") {
				return &stmt{kind: skRollback, tag: "ROLLBACK"}, nil
			}
			return nil, unsupportedf("ROLLBACK AND CHAIN is not supported")
		}
		if len(rest) > 0 {
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
		}
		return &stmt{kind: skRollback, tag: "ROLLBACK"}, nil
	case "savepoint":
		name, err := singleName(toks[1:])
		if err != nil {
			return nil, err
		}
		return &stmt{kind: skExec, tag: "SAVEPOINT", sql: "SAVEPOINT " + name, savepoint: true}, nil
	case "release":
		name, err := singleName(skipWords(toks[1:], "savepoint"))
		if err != nil {
			return nil, err
		}
		return &stmt{kind: skExec, tag: "RELEASE", sql: "RELEASE " + name, savepoint: true}, nil
	case "set":
		return translateSet(toks)
	case "reset":
		rest := toks[1:]
		if len(rest) == 0 {
			return nil, syntaxErrorf("syntax error at end of input")
		}
		name := settingName(rest)
		if name == "" {
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
		}
		return &stmt{kind: skReset, tag: "RESET", setName: name}, nil
	case "show":
		rest := toks[1:]
		if len(rest) == 0 {
			return nil, syntaxErrorf("syntax error at end of input")
		}
		name := settingName(rest)
		if name == "" {
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
		}
		return &stmt{kind: skShow, tag: "SHOW", setName: name}, nil
	case "copy":
		return translateCopy(toks, e)
	case "deallocate":
		rest := skipWords(toks[1:], "prepare")
		if len(rest) == 1 && rest[0].is("all") {
			return &stmt{kind: skDeallocate, tag: "DEALLOCATE ALL"}, nil
		}
		if len(rest) != 1 || rest[0].kind != tkIdent && rest[0].kind != tkQIdent {
			return nil, syntaxErrorf("syntax error in DEALLOCATE")
		}
		return &stmt{kind: skDeallocate, tag: "DEALLOCATE", name: identName(rest[0])}, nil
	case "discard":
		if len(toks) == 2 && toks[1].kind == tkIdent {
			switch toks[1].val {
			case "all":
				return &stmt{kind: skDiscard, tag: "DISCARD ALL"}, nil
			case "plans", "sequences", "temp", "temporary":
				return &stmt{kind: skNoop, tag: "DISCARD " + strings.ToUpper(toks[1].val)}, nil
			}
		}
		return nil, syntaxErrorf("syntax error in DISCARD")
	case "truncate":
		return translateTruncate(toks)
	case "explain":
		return translateExplain(toks, e)
	case "analyze", "analyse":
		rest := skipWords(toks[1:], "verbose")
		sql := "ANALYZE"
		if len(rest) > 0 {
			name, err := tableName(rest)
			if err != nil {
				return nil, err
			}
			sql += " " + quoteIdent(name)
		}
		return &stmt{kind: skExec, tag: "ANALYZE", sql: sql, write: true}, nil
	case "vacuum":
		return &stmt{kind: skExec, tag: "VACUUM", sql: "VACUUM", write: true, noTx: true}, nil
	case "checkpoint":
		if len(toks) != 1 {
			return nil, syntaxErrorf("syntax error at or near %q", clip(toks[1].text))
		}
		return &stmt{kind: skExec, tag: "CHECKPOINT", sql: "PRAGMA wal_checkpoint(PASSIVE)"}, nil
	case "pragma":
		// SQLite's own statement, kept for inspecting the lab database.
		return &stmt{kind: skQuery, tag: "PRAGMA", sql: emit(toks)}, nil
	case "listen", "notify", "unlisten", "prepare", "execute", "declare", "fetch", "move",
		"close", "lock", "grant", "revoke", "comment", "cluster", "reindex", "refresh",
		"security", "reassign", "import", "load", "call", "do", "merge":
		return nil, unsupportedf("%s is not supported by litepg", strings.ToUpper(first.val))
	}
	return nil, syntaxErrorf("syntax error at or near %q", clip(first.text))
}

// skipWords drops leading keywords of the set from toks.
func skipWords(toks []token, words ...string) []token {
	for len(toks) > 0 {
		found := false
		for _, w := range words {
			if toks[0].is(w) {
				found = true
				break
			}
		}
		if !found {
			return toks
		}
		toks = toks[1:]
	}
	return toks
}

// identName returns the name an identifier token denotes.
func identName(t token) string {
	if t.kind == tkQIdent || t.kind == tkIdent {
		return t.val
	}
	return t.text
}

// singleName checks that toks is exactly one identifier and returns it
// quoted for SQLite.
func singleName(toks []token) (string, error) {
	if len(toks) == 0 {
		return "", syntaxErrorf("syntax error at end of input")
	}
	if len(toks) != 1 || toks[0].kind != tkIdent && toks[0].kind != tkQIdent {
		return "", syntaxErrorf("syntax error at or near %q", clip(toks[0].text))
	}
	return quoteIdent(identName(toks[0])), nil
}

// tableName reads a possibly schema-qualified table name that makes up
// all of toks; the schema must be public or pg_temp.
func tableName(toks []token) (string, error) {
	name, n, err := readTableName(toks)
	if err != nil {
		return "", err
	}
	if n != len(toks) {
		return "", syntaxErrorf("syntax error at or near %q", clip(toks[n].text))
	}
	return name, nil
}

// readTableName reads a possibly qualified table name at the start of
// toks and returns it with the number of tokens used.
func readTableName(toks []token) (string, int, error) {
	if len(toks) == 0 {
		return "", 0, syntaxErrorf("syntax error at end of input")
	}
	if toks[0].kind != tkIdent && toks[0].kind != tkQIdent {
		return "", 0, syntaxErrorf("syntax error at or near %q", clip(toks[0].text))
	}
	if len(toks) >= 3 && toks[1].isPunct(".") && (toks[2].kind == tkIdent || toks[2].kind == tkQIdent) {
		switch identName(toks[0]) {
		case "public", "main", "pg_temp", "temp":
		default:
			return "", 0, unsupportedf("schema %q is not supported; litepg has one schema, public", identName(toks[0]))
		}
		return identName(toks[2]), 3, nil
	}
	return identName(toks[0]), 1, nil
}

// settingName reads a configuration parameter name for SET, RESET, SHOW:
// an identifier, a dotted name, or one of the multi-word forms.
func settingName(toks []token) string {
	switch {
	case len(toks) >= 2 && toks[0].is("time") && toks[1].is("zone"):
		return "timezone"
	case len(toks) >= 3 && toks[0].is("transaction") && toks[1].is("isolation") && toks[2].is("level"):
		return "transaction_isolation"
	case len(toks) >= 2 && toks[0].is("session") && toks[1].is("authorization"):
		return "session_authorization"
	}
	if len(toks) == 0 || toks[0].kind != tkIdent && toks[0].kind != tkQIdent {
		return ""
	}
	name := identName(toks[0])
	for i := 1; i+1 < len(toks) && toks[i].isPunct(".") && (toks[i+1].kind == tkIdent || toks[i+1].kind == tkQIdent); i += 2 {
		name += "." + identName(toks[i+1])
	}
	return strings.ToLower(name)
}

// translateSet parses SET. Values are kept as text for SHOW.
func translateSet(toks []token) (*stmt, error) {
	rest := skipWords(toks[1:], "session", "local")
	if len(rest) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	switch {
	case rest[0].is("transaction"), rest[0].is("constraints"), rest[0].is("role"),
		rest[0].is("characteristics"):
		return &stmt{kind: skNoop, tag: "SET"}, nil
	case len(rest) >= 2 && rest[0].is("session") && rest[1].is("authorization"):
		return &stmt{kind: skNoop, tag: "SET"}, nil
	}
	name := settingName(rest)
	if name == "" {
		return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
	}
	// Skip the name tokens.
	i := 0
	switch name {
	case "timezone":
		if rest[0].is("time") {
			i = 2
		} else {
			i = 1
		}
	default:
		i = 1
		for i+1 < len(rest) && rest[i].isPunct(".") {
			i += 2
		}
	}
	if i < len(rest) && (rest[i].is("to") || rest[i].isPunct("=")) {
		i++
	} else if name != "timezone" {
		if i < len(rest) {
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[i].text))
		}
		return nil, syntaxErrorf("syntax error at end of input")
	}
	if i >= len(rest) {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	var vals []string
	for _, part := range splitTop(rest[i:]) {
		if len(part) == 0 {
			return nil, syntaxErrorf("syntax error in SET")
		}
		var v strings.Builder
		for j, t := range part {
			switch t.kind {
			case tkString, tkQIdent:
				v.WriteString(t.val)
			case tkIdent, tkNumber, tkOp:
				if j > 0 && t.space {
					v.WriteByte(' ')
				}
				v.WriteString(t.text)
			default:
				return nil, syntaxErrorf("syntax error at or near %q", clip(t.text))
			}
		}
		vals = append(vals, v.String())
	}
	value := strings.Join(vals, ", ")
	if len(vals) == 1 && (strings.EqualFold(value, "default") || name == "timezone" && strings.EqualFold(value, "local")) && rest[i].kind == tkIdent {
		return &stmt{kind: skReset, tag: "SET", setName: name}, nil
	}
	return &stmt{kind: skSet, tag: "SET", setName: name, setValue: value}, nil
}

// translateBegin parses BEGIN / START TRANSACTION and their modes.
func translateBegin(toks []token) (*stmt, error) {
	st := &stmt{kind: skBegin, tag: "BEGIN"}
	rest := toks[1:]
	if toks[0].is("start") {
		if len(rest) == 0 || !rest[0].is("transaction") {
			return nil, syntaxErrorf("syntax error at or near %q", clip(toks[0].text))
		}
		st.tag = "START TRANSACTION"
		rest = rest[1:]
	} else {
		rest = skipWords(rest, "work", "transaction")
	}
	for len(rest) > 0 {
		switch {
		case rest[0].isPunct(","):
			rest = rest[1:]
		case rest[0].is("deferred"):
			rest = rest[1:]
		case rest[0].is("immediate"), rest[0].is("exclusive"):
			st.immediate = true
			rest = rest[1:]
		case rest[0].is("isolation") && len(rest) >= 3 && rest[1].is("level"):
			rest = rest[3:]
			if len(rest) > 0 && (rest[0].is("read") || rest[0].is("committed") || rest[0].is("uncommitted")) {
				rest = skipWords(rest, "committed", "uncommitted", "read")
			}
		case rest[0].is("read") && len(rest) >= 2 && rest[1].is("only"):
			st.readOnly = true
			rest = rest[2:]
		case rest[0].is("read") && len(rest) >= 2 && rest[1].is("write"):
			rest = rest[2:]
		case rest[0].is("not") && len(rest) >= 2 && rest[1].is("deferrable"):
			rest = rest[2:]
		case rest[0].is("deferrable"):
			rest = rest[1:]
		default:
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
		}
	}
	return st, nil
}

// translateTruncate turns TRUNCATE into DELETE statements.
func translateTruncate(toks []token) (*stmt, error) {
	rest := skipWords(toks[1:], "table", "only")
	var sqls []string
	for _, part := range splitTop(rest) {
		part = trimTrailingWords(part, "cascade", "restrict", "restart", "continue", "identity")
		if len(part) > 0 && part[len(part)-1].isPunct("*") {
			part = part[:len(part)-1]
		}
		part = skipWords(part, "only")
		name, err := tableName(part)
		if err != nil {
			return nil, err
		}
		sqls = append(sqls, "DELETE FROM "+quoteIdent(name))
	}
	if len(sqls) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	return &stmt{kind: skExec, tag: "TRUNCATE TABLE", sql: strings.Join(sqls, "; "), write: true}, nil
}

// trimTrailingWords drops trailing keywords of the set from toks.
func trimTrailingWords(toks []token, words ...string) []token {
	for len(toks) > 0 {
		last := toks[len(toks)-1]
		found := false
		for _, w := range words {
			if last.is(w) {
				found = true
				break
			}
		}
		if !found {
			return toks
		}
		toks = toks[:len(toks)-1]
	}
	return toks
}

// translateExplain turns EXPLAIN into SQLite's EXPLAIN QUERY PLAN.
func translateExplain(toks []token, e env) (*stmt, error) {
	rest := toks[1:]
	if len(rest) > 0 && rest[0].isPunct("(") {
		end := matchParen(rest, 0)
		if end < 0 {
			return nil, syntaxErrorf("syntax error at end of input")
		}
		rest = rest[end+1:]
	}
	rest = skipWords(rest, "analyze", "analyse", "verbose")
	if len(rest) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	inner, err := translateOne(rest, e)
	if err != nil {
		return nil, err
	}
	if inner.kind != skQuery && inner.kind != skExec || inner.tag == "PRAGMA" {
		return nil, unsupportedf("EXPLAIN of %s is not supported", inner.tag)
	}
	return &stmt{kind: skExplain, tag: "EXPLAIN", sql: "EXPLAIN QUERY PLAN " + inner.sql,
		nparams: inner.nparams, params: inner.params, tables: inner.tables}, nil
}

// translateDrop handles DROP TABLE / INDEX / VIEW.
func translateDrop(toks []token) (*stmt, error) {
	if len(toks) < 2 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	kind := toks[1].val
	switch kind {
	case "table", "index", "view":
	default:
		if toks[1].kind == tkIdent {
			return nil, unsupportedf("DROP %s is not supported by litepg", strings.ToUpper(toks[1].val))
		}
		return nil, syntaxErrorf("syntax error at or near %q", clip(toks[1].text))
	}
	rest := skipWords(toks[2:], "concurrently")
	ifExists := false
	if len(rest) >= 2 && rest[0].is("if") && rest[1].is("exists") {
		ifExists = true
		rest = rest[2:]
	}
	rest = trimTrailingWords(rest, "cascade", "restrict")
	var sqls []string
	for _, part := range splitTop(rest) {
		name, err := tableName(part)
		if err != nil {
			return nil, err
		}
		s := "DROP " + strings.ToUpper(kind) + " "
		if ifExists {
			s += "IF EXISTS "
		}
		sqls = append(sqls, s+quoteIdent(name))
	}
	if len(sqls) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	return &stmt{kind: skExec, tag: "DROP " + strings.ToUpper(kind), sql: strings.Join(sqls, "; "), write: true, ddl: true}, nil
}

// translateAlter passes ALTER TABLE to SQLite, translating column types.
func translateAlter(toks []token, e env) (*stmt, error) {
	if len(toks) < 2 || !toks[1].is("table") {
		if len(toks) >= 2 && toks[1].kind == tkIdent {
			return nil, unsupportedf("ALTER %s is not supported by litepg", strings.ToUpper(toks[1].val))
		}
		return nil, syntaxErrorf("syntax error in ALTER")
	}
	rest := skipWords(toks[2:], "only")
	prefix := []token{toks[0], toks[1]}
	if len(rest) >= 2 && rest[0].is("if") && rest[1].is("exists") {
		return nil, unsupportedf("ALTER TABLE IF EXISTS is not supported")
	}
	name, n, err := readTableName(rest)
	if err != nil {
		return nil, err
	}
	rest = rest[n:]
	body := rest
	if pk := addPrimaryKey(body); pk != nil {
		// SQLite cannot add a primary key to a table; a unique index
		// gives the same lookups and the same uniqueness.
		out := []token{rawTok("CREATE UNIQUE INDEX IF NOT EXISTS"), rawTok(quoteIdent(name + "_pkey")), rawTok("ON"), rawTok(quoteIdent(name))}
		out = append(out, pk...)
		return &stmt{kind: skExec, tag: "ALTER TABLE", sql: emit(out), write: true, ddl: true}, nil
	}
	if len(body) >= 2 && body[0].is("add") {
		i := 1
		if body[1].is("column") {
			i = 2
		}
		col, err := translateColumnDef(body[i:], nil, e)
		if err != nil {
			return nil, err
		}
		body = append(append([]token{}, body[:i]...), col...)
	} else {
		body, err = rewriteExpr(body, e)
		if err != nil {
			return nil, err
		}
	}
	out := append(prefix, rawTok(quoteIdent(name)))
	out = append(out, body...)
	return &stmt{kind: skExec, tag: "ALTER TABLE", sql: emit(out), write: true, ddl: true}, nil
}

// addPrimaryKey returns the parenthesised column list of
// "ADD [CONSTRAINT name] PRIMARY KEY (cols)", or nil for any other ALTER.
func addPrimaryKey(body []token) []token {
	if len(body) < 4 || !body[0].is("add") {
		return nil
	}
	i := 1
	if body[i].is("constraint") {
		i += 2
	}
	if i+2 >= len(body) || !body[i].is("primary") || !body[i+1].is("key") || !body[i+2].isPunct("(") {
		return nil
	}
	cols := body[i+2:]
	if !cols[len(cols)-1].isPunct(")") {
		return nil
	}
	return cols
}

// rawTok makes a synthetic token emitted verbatim.
func rawTok(s string) token { return token{kind: tkRaw, pos: -1, text: s, val: s, space: true} }

// identTok makes a synthetic identifier token.
func identTok(s string) token {
	return token{kind: tkIdent, pos: -1, text: s, val: strings.ToLower(s), space: true}
}

// punctTok makes a synthetic punctuation token.
func punctTok(s string) token { return token{kind: tkPunct, pos: -1, text: s} }

// translateCreate handles CREATE TABLE / INDEX / VIEW.
func translateCreate(toks []token, e env) (*stmt, error) {
	rest := toks[1:]
	var mods []token
	for len(rest) > 0 {
		switch {
		case rest[0].is("temp"), rest[0].is("temporary"), rest[0].is("unique"):
			mods = append(mods, rest[0])
			rest = rest[1:]
			continue
		case rest[0].is("unlogged"), rest[0].is("global"), rest[0].is("local"):
			rest = rest[1:]
			continue
		case rest[0].is("or"):
			return nil, unsupportedf("CREATE OR REPLACE is not supported by litepg")
		}
		break
	}
	if len(rest) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	switch {
	case rest[0].is("table"):
		return translateCreateTable(mods, rest[1:], e)
	case rest[0].is("index"):
		return translateCreateIndex(mods, rest[1:], e)
	case rest[0].is("view"):
		body, err := rewriteExpr(rest[1:], e)
		if err != nil {
			return nil, err
		}
		out := append([]token{identTok("CREATE")}, mods...)
		out = append(out, identTok("VIEW"))
		out = append(out, body...)
		return &stmt{kind: skExec, tag: "CREATE VIEW", sql: emit(out), write: true, ddl: true}, nil
	}
	if rest[0].kind == tkIdent {
		return nil, unsupportedf("CREATE %s is not supported by litepg", strings.ToUpper(rest[0].val))
	}
	return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
}

// translateCreateIndex handles CREATE [UNIQUE] INDEX.
func translateCreateIndex(mods []token, rest []token, e env) (*stmt, error) {
	rest = skipWords(rest, "concurrently")
	head := []token{identTok("CREATE")}
	head = append(head, mods...)
	head = append(head, identTok("INDEX"))
	if len(rest) >= 3 && rest[0].is("if") && rest[1].is("not") && rest[2].is("exists") {
		head = append(head, identTok("IF"), identTok("NOT"), identTok("EXISTS"))
		rest = rest[3:]
	}
	var name string
	if len(rest) > 0 && !rest[0].is("on") {
		if rest[0].kind != tkIdent && rest[0].kind != tkQIdent {
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
		}
		name = identName(rest[0])
		rest = rest[1:]
	}
	if len(rest) == 0 || !rest[0].is("on") {
		return nil, syntaxErrorf("syntax error in CREATE INDEX")
	}
	rest = skipWords(rest[1:], "only")
	table, n, err := readTableName(rest)
	if err != nil {
		return nil, err
	}
	rest = rest[n:]
	if len(rest) >= 2 && rest[0].is("using") {
		switch rest[1].val {
		case "btree", "hash":
			rest = rest[2:]
		default:
			return nil, unsupportedf("index method %q is not supported", rest[1].text)
		}
	}
	if len(rest) == 0 || !rest[0].isPunct("(") {
		return nil, syntaxErrorf("syntax error in CREATE INDEX")
	}
	end := matchParen(rest, 0)
	if end < 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	cols := rest[:end+1]
	tail := rest[end+1:]
	if len(tail) > 0 && !tail[0].is("where") {
		return nil, unsupportedf("CREATE INDEX option %q is not supported", strings.ToUpper(tail[0].text))
	}
	if name == "" {
		name = table
		if end >= 2 && (cols[1].kind == tkIdent || cols[1].kind == tkQIdent) {
			name += "_" + identName(cols[1])
		}
		name += "_idx"
	}
	body, err := rewriteExpr(append(append([]token{}, cols...), tail...), e)
	if err != nil {
		return nil, err
	}
	out := append(head, rawTok(quoteIdent(name)), identTok("ON"), rawTok(quoteIdent(table)))
	out = append(out, body...)
	return &stmt{kind: skExec, tag: "CREATE INDEX", sql: emit(out), write: true, ddl: true}, nil
}

// serialTypes are PostgreSQL's auto-incrementing column types.
var serialTypes = map[string]bool{
	"serial": true, "serial4": true, "bigserial": true, "serial8": true,
	"smallserial": true, "serial2": true,
}

// translateCreateTable handles CREATE TABLE: column types, SERIAL and
// identity columns (which become INTEGER PRIMARY KEY AUTOINCREMENT, the
// only auto-incrementing column SQLite has) and CREATE TABLE AS.
func translateCreateTable(mods []token, rest []token, e env) (*stmt, error) {
	head := []token{identTok("CREATE")}
	for _, m := range mods {
		if m.is("unique") {
			return nil, syntaxErrorf("syntax error at or near \"TABLE\"")
		}
		head = append(head, m)
	}
	head = append(head, identTok("TABLE"))
	if len(rest) >= 3 && rest[0].is("if") && rest[1].is("not") && rest[2].is("exists") {
		head = append(head, identTok("IF"), identTok("NOT"), identTok("EXISTS"))
		rest = rest[3:]
	}
	name, n, err := readTableName(rest)
	if err != nil {
		return nil, err
	}
	rest = rest[n:]
	head = append(head, rawTok(quoteIdent(name)))
	if len(rest) > 0 && rest[0].is("as") {
		q, err := translateQuery(rest[1:], e)
		if err != nil {
			return nil, err
		}
		return &stmt{kind: skExec, tag: "CREATE TABLE", sql: emit(head) + " AS " + q.sql, write: true, ddl: true,
			nparams: q.nparams, params: q.params}, nil
	}
	if len(rest) == 0 || !rest[0].isPunct("(") {
		return nil, syntaxErrorf("syntax error in CREATE TABLE")
	}
	end := matchParen(rest, 0)
	if end < 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	tail := rest[end+1:]
	if len(tail) > 0 {
		return nil, unsupportedf("CREATE TABLE option %q is not supported", strings.ToUpper(tail[0].text))
	}
	defs := splitTop(rest[1:end])
	for _, d := range defs {
		if len(d) == 0 {
			return nil, syntaxErrorf("syntax error in CREATE TABLE")
		}
	}

	// Find the serial column. It becomes SQLite's rowid, so it must be
	// the primary key: either it is declared so, or the table has none.
	serialCol := ""
	for _, d := range defs {
		if len(d) >= 2 && (d[0].kind == tkIdent || d[0].kind == tkQIdent) && !isConstraintStart(d[0]) {
			if d[1].kind == tkIdent && serialTypes[d[1].val] || hasIdentity(d) {
				if serialCol != "" {
					return nil, unsupportedf("more than one serial or identity column is not supported")
				}
				serialCol = identName(d[0])
			}
		}
	}
	if serialCol != "" {
		for _, d := range defs {
			if isConstraintStart(d[0]) {
				if hasPrimaryKey(d) && !isPrimaryKeyOn(d, serialCol) {
					return nil, unsupportedf("a serial or identity column must be the table's single-column primary key")
				}
			} else if identName(d[0]) != serialCol && hasPrimaryKey(d) {
				return nil, unsupportedf("a serial or identity column must be the table's single-column primary key")
			}
		}
	}
	pkCol := serialCol
	var out []token
	out = append(out, head...)
	out = append(out, punctTok("("))
	first := true
	for _, d := range defs {
		if len(d) == 0 {
			return nil, syntaxErrorf("syntax error in CREATE TABLE")
		}
		var piece []token
		if isConstraintStart(d[0]) {
			if pkCol != "" && isPrimaryKeyOn(d, pkCol) {
				continue // folded into the column definition
			}
			piece, err = rewriteExpr(d, e)
		} else {
			piece, err = translateColumnDef(d, &serialCol, e)
		}
		if err != nil {
			return nil, err
		}
		if !first {
			out = append(out, punctTok(","))
		}
		first = false
		out = append(out, piece...)
	}
	if serialCol != "" {
		return nil, unsupportedf("a serial or identity column must be the table's single-column primary key")
	}
	out = append(out, punctTok(")"))
	return &stmt{kind: skExec, tag: "CREATE TABLE", sql: emit(out), write: true, ddl: true}, nil
}

// isConstraintStart reports whether a table element starts a table
// constraint rather than a column definition.
func isConstraintStart(t token) bool {
	if t.kind != tkIdent {
		return false
	}
	switch t.val {
	case "constraint", "primary", "unique", "check", "foreign", "exclude", "like":
		return true
	}
	return false
}

// isPrimaryKeyOn reports whether constraint d is PRIMARY KEY (col).
func isPrimaryKeyOn(d []token, col string) bool {
	if len(d) >= 2 && d[0].is("constraint") {
		d = d[2:]
	}
	return len(d) == 5 && d[0].is("primary") && d[1].is("key") && d[2].isPunct("(") &&
		(d[3].kind == tkIdent || d[3].kind == tkQIdent) && identName(d[3]) == col && d[4].isPunct(")")
}

// hasPrimaryKey reports whether a table element declares a primary key.
func hasPrimaryKey(d []token) bool {
	for i := 0; i+1 < len(d); i++ {
		if d[i].is("primary") && d[i+1].is("key") {
			return true
		}
	}
	return false
}

// hasIdentity reports whether a column definition is GENERATED ... AS
// IDENTITY.
func hasIdentity(d []token) bool {
	for i := 0; i+1 < len(d); i++ {
		if d[i].is("as") && d[i+1].is("identity") {
			return true
		}
	}
	return false
}

// translateColumnDef translates one column definition. If *serialCol
// names this column it becomes INTEGER PRIMARY KEY AUTOINCREMENT and
// *serialCol is cleared.
func translateColumnDef(d []token, serialCol *string, e env) ([]token, error) {
	if len(d) < 2 || d[0].kind != tkIdent && d[0].kind != tkQIdent {
		return nil, syntaxErrorf("syntax error in column definition")
	}
	out := []token{rawTok(quoteIdent(identName(d[0])))}
	rest := d[1:]
	isSerial := serialCol != nil && *serialCol != "" && *serialCol == identName(d[0])
	typ, n, err := readTypeName(rest)
	if err != nil {
		return nil, err
	}
	rest = rest[n:]
	if isSerial {
		out = append(out, identTok("INTEGER"), identTok("PRIMARY"), identTok("KEY"), identTok("AUTOINCREMENT"))
		*serialCol = ""
	} else {
		if serialTypes[typ.name] {
			return nil, unsupportedf("a serial or identity column must be the table's single-column primary key")
		}
		out = append(out, rawTok(typ.decl))
	}
	// Column constraints.
	for len(rest) > 0 {
		t := rest[0]
		switch {
		case isSerial && t.is("primary") && len(rest) >= 2 && rest[1].is("key"):
			rest = rest[2:]
		case isSerial && t.is("not") && len(rest) >= 2 && rest[1].is("null"):
			rest = rest[2:]
		case t.is("generated"):
			// GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [( options )]
			j := 1
			for j < len(rest) && !rest[j].is("identity") && !rest[j].isPunct("(") {
				j++
			}
			if j >= len(rest) || !rest[j].is("identity") {
				return nil, unsupportedf("generated columns are not supported")
			}
			j++
			if j < len(rest) && rest[j].isPunct("(") {
				end := matchParen(rest, j)
				if end < 0 {
					return nil, syntaxErrorf("syntax error at end of input")
				}
				j = end + 1
			}
			if !isSerial {
				return nil, unsupportedf("an identity column must be the table's single-column primary key")
			}
			rest = rest[j:]
		case t.is("default"):
			j := 1
			depth := 0
			for j < len(rest) {
				if depth == 0 && isColumnConstraintWord(rest[j]) {
					break
				}
				if rest[j].isPunct("(") {
					depth++
				} else if rest[j].isPunct(")") {
					depth--
				}
				j++
			}
			val, err := rewriteExpr(rest[1:j], e)
			if err != nil {
				return nil, err
			}
			if len(val) == 0 {
				return nil, syntaxErrorf("syntax error at or near \"DEFAULT\"")
			}
			out = append(out, identTok("DEFAULT"))
			if isSimpleDefault(val) {
				out = append(out, val...)
			} else {
				out = append(out, token{kind: tkPunct, space: true, pos: -1, text: "("})
				val[0].space = false
				out = append(out, val...)
				out = append(out, punctTok(")"))
			}
			rest = rest[j:]
		default:
			j := 1
			depth := 0
			if t.isPunct("(") {
				depth = 1
			}
			for j < len(rest) {
				if depth == 0 && (isColumnConstraintWord(rest[j]) && !rest[j].is("null") || rest[j].is("default")) {
					break
				}
				if rest[j].isPunct("(") {
					depth++
				} else if rest[j].isPunct(")") {
					depth--
				}
				j++
			}
			piece, err := rewriteExpr(rest[:j], e)
			if err != nil {
				return nil, err
			}
			out = append(out, piece...)
			rest = rest[j:]
		}
	}
	return out, nil
}

// isColumnConstraintWord reports whether t starts a column constraint.
func isColumnConstraintWord(t token) bool {
	if t.kind != tkIdent {
		return false
	}
	switch t.val {
	case "not", "null", "primary", "unique", "check", "references", "constraint", "default",
		"collate", "generated":
		return true
	}
	return false
}

// isSimpleDefault reports whether a DEFAULT value is a literal SQLite
// accepts without parentheses.
func isSimpleDefault(val []token) bool {
	if len(val) == 2 && val[0].kind == tkOp && (val[0].text == "-" || val[0].text == "+") && val[1].kind == tkNumber {
		return true
	}
	if len(val) != 1 {
		return false
	}
	switch val[0].kind {
	case tkString, tkNumber, tkRaw:
		return true
	case tkIdent:
		switch val[0].val {
		case "null", "true", "false", "current_timestamp", "current_date", "current_time":
			return true
		}
	}
	return false
}

// pgType is a parsed type name.
type pgType struct {
	name string // canonical lower-case PostgreSQL name: "int4", "varchar"
	decl string // SQLite declared type to write in CREATE TABLE
	oid  uint32 // OID reported for values of the type
}

// readTypeName reads a type name, with multi-word forms, modifiers and
// array brackets (rejected), at the start of toks.
func readTypeName(toks []token) (pgType, int, error) {
	if len(toks) == 0 || toks[0].kind != tkIdent && toks[0].kind != tkQIdent {
		if len(toks) == 0 {
			return pgType{}, 0, syntaxErrorf("syntax error at end of input")
		}
		return pgType{}, 0, syntaxErrorf("syntax error at or near %q", clip(toks[0].text))
	}
	n := 1
	w := identName(toks[0])
	if toks[0].kind == tkIdent && len(toks) >= 3 && (w == "pg_catalog" || w == "public") && toks[1].isPunct(".") {
		w = identName(toks[2])
		n = 3
	}
	next := func(i int, s string) bool { return n+i < len(toks) && toks[n+i].is(s) }
	switch w {
	case "double":
		if next(0, "precision") {
			w, n = "float8", n+1
		}
	case "character", "char", "national":
		if w == "national" && next(0, "character") {
			n++
		}
		if next(0, "varying") {
			w, n = "varchar", n+1
		} else {
			w = "bpchar"
		}
	case "bit":
		if next(0, "varying") {
			n++
		}
	case "timestamp", "time":
		if (next(0, "with") || next(0, "without")) && next(1, "time") && next(2, "zone") {
			if toks[n].is("with") {
				w += "tz"
			}
			n += 3
		}
	}
	mods := ""
	if n < len(toks) && toks[n].isPunct("(") {
		end := matchParen(toks, n)
		if end < 0 {
			return pgType{}, 0, syntaxErrorf("syntax error at end of input")
		}
		for _, t := range toks[n+1 : end] {
			if t.kind != tkNumber && !t.isPunct(",") {
				return pgType{}, 0, syntaxErrorf("syntax error at or near %q", clip(t.text))
			}
		}
		mods = emit(toks[n : end+1])
		n = end + 1
		// timestamp(3) with time zone
		if (w == "timestamp" || w == "time") && n+2 < len(toks) && (toks[n].is("with") || toks[n].is("without")) && toks[n+1].is("time") && toks[n+2].is("zone") {
			if toks[n].is("with") {
				w += "tz"
			}
			n += 3
		}
	}
	if n < len(toks) && toks[n].isPunct("[") || n < len(toks) && toks[n].is("array") {
		return pgType{}, 0, unsupportedf("array types are not supported by litepg")
	}
	t := lookupType(w)
	if t.decl == "" {
		t.decl = strings.ToUpper(w)
		if toks[0].kind == tkQIdent {
			t.decl = quoteIdent(w)
		}
	}
	if mods != "" && t.keepMods {
		t.decl += mods
	}
	return pgType{name: t.name, decl: t.decl, oid: t.oid}, n, nil
}

// typeInfo describes how a PostgreSQL type name is handled.
type typeInfo struct {
	name     string
	decl     string // SQLite declared type; "" = the name as written
	oid      uint32
	keepMods bool // keep (n) modifiers in the declared type
	castAs   string
}

// lookupType resolves a PostgreSQL type name or alias.
func lookupType(w string) typeInfo {
	switch w {
	case "int2", "smallint":
		return typeInfo{name: "int2", decl: "SMALLINT", oid: oidInt2, castAs: "INTEGER"}
	case "int4", "int", "integer":
		return typeInfo{name: "int4", decl: "INTEGER", oid: oidInt4, castAs: "INTEGER"}
	case "int8", "bigint":
		return typeInfo{name: "int8", decl: "BIGINT", oid: oidInt8, castAs: "INTEGER"}
	case "serial", "serial4", "bigserial", "serial8", "smallserial", "serial2":
		return typeInfo{name: w, decl: "INTEGER", oid: oidInt8, castAs: "INTEGER"}
	case "float4", "real":
		return typeInfo{name: "float4", decl: "REAL", oid: oidFloat8, castAs: "REAL"}
	case "float8", "float":
		return typeInfo{name: "float8", decl: "DOUBLE PRECISION", oid: oidFloat8, castAs: "REAL"}
	case "numeric", "decimal":
		return typeInfo{name: "numeric", decl: "NUMERIC", oid: oidFloat8, keepMods: true, castAs: "NUMERIC"}
	case "text":
		return typeInfo{name: "text", decl: "TEXT", oid: oidText, castAs: "TEXT"}
	case "varchar":
		return typeInfo{name: "varchar", decl: "VARCHAR", oid: oidVarchar, keepMods: true, castAs: "TEXT"}
	case "bpchar":
		return typeInfo{name: "bpchar", decl: "CHAR", oid: oidBPChar, keepMods: true, castAs: "TEXT"}
	case "name", "citext", "uuid", "json", "jsonb", "xml", "inet", "cidr", "macaddr", "interval", "time", "timetz", "money":
		return typeInfo{name: w, decl: strings.ToUpper(w), oid: oidText, castAs: "TEXT"}
	case "bool", "boolean":
		return typeInfo{name: "bool", decl: "BOOLEAN", oid: oidBool, castAs: "bool"}
	case "bytea":
		return typeInfo{name: "bytea", decl: "BYTEA", oid: oidBytea, castAs: "bytea"}
	case "date":
		return typeInfo{name: "date", decl: "DATE", oid: oidDate}
	case "timestamp":
		return typeInfo{name: "timestamp", decl: "TIMESTAMP", oid: oidTimestamp}
	case "timestamptz":
		return typeInfo{name: "timestamptz", decl: "TIMESTAMPTZ", oid: oidTimestamptz}
	case "blob":
		return typeInfo{name: "bytea", decl: "BLOB", oid: oidBytea, castAs: "BLOB"}
	}
	return typeInfo{name: w, oid: oidText}
}

// translateQuery translates SELECT, VALUES, WITH, TABLE, INSERT, UPDATE
// and DELETE, and works out the hints for parameter and result types.
func translateQuery(toks []token, e env) (*stmt, error) {
	if len(toks) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	st := &stmt{kind: skQuery}
	verb := mainVerb(toks)
	switch verb {
	case "select", "values", "table", "(":
		st.tag = "SELECT"
	case "insert", "update", "delete":
		st.tag = strings.ToUpper(verb)
		st.write = true
		st.kind = skExec
	default:
		return nil, syntaxErrorf("syntax error at or near %q", clip(toks[0].text))
	}
	if toks[0].is("table") {
		name, err := tableName(toks[1:])
		if err != nil {
			return nil, err
		}
		toks = []token{identTok("SELECT"), rawTok("*"), identTok("FROM"), rawTok(quoteIdent(name))}
	}
	if st.tag == "SELECT" {
		var forUpdate bool
		var err error
		toks, forUpdate, err = stripLockingClause(toks)
		if err != nil {
			return nil, err
		}
		st.write = forUpdate
		if hasTopLevelInto(toks) {
			return nil, unsupportedf("SELECT INTO is not supported; use CREATE TABLE AS")
		}
	}
	analyzeStatement(st, toks)
	if st.kind == skExec && st.cols != nil {
		st.kind = skQuery // RETURNING
	}
	out, err := rewriteExpr(toks, e)
	if err != nil {
		return nil, err
	}
	st.sql = emit(out)
	return st, nil
}

// mainVerb returns the statement verb after any WITH clause: "select",
// "insert", ..., "(" for a parenthesized query.
func mainVerb(toks []token) string {
	if len(toks) == 0 {
		return ""
	}
	if toks[0].isPunct("(") {
		return "("
	}
	if !toks[0].is("with") {
		return toks[0].val
	}
	depth := 0
	for _, t := range toks[1:] {
		switch {
		case t.isPunct("("):
			depth++
		case t.isPunct(")"):
			depth--
		case depth == 0 && t.kind == tkIdent:
			switch t.val {
			case "select", "insert", "update", "delete", "values":
				return t.val
			}
		}
	}
	return ""
}

// stripLockingClause removes a trailing FOR UPDATE / FOR SHARE clause,
// which SQLite has no use for: a transaction that writes holds the
// database's write lock. It reports whether one was present.
func stripLockingClause(toks []token) ([]token, bool, error) {
	depth := 0
	for i, t := range toks {
		switch {
		case t.isPunct("("):
			depth++
		case t.isPunct(")"):
			depth--
		case depth == 0 && t.is("for") && i+1 < len(toks):
			n := toks[i+1]
			if n.is("update") || n.is("share") || n.is("no") || n.is("key") {
				return toks[:i], true, nil
			}
		}
	}
	return toks, false, nil
}

// hasTopLevelInto reports a SELECT ... INTO table.
func hasTopLevelInto(toks []token) bool {
	depth := 0
	for _, t := range toks {
		switch {
		case t.isPunct("("):
			depth++
		case t.isPunct(")"):
			depth--
		case depth == 0 && t.is("into"):
			return true
		case depth == 0 && t.is("insert"):
			return false
		}
	}
	return false
}

// matchParen returns the index of the ")" matching the "(" at toks[i],
// or -1.
func matchParen(toks []token, i int) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		switch {
		case toks[j].isPunct("("):
			depth++
		case toks[j].isPunct(")"):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// splitTop splits toks at commas outside parentheses and brackets.
func splitTop(toks []token) [][]token {
	var parts [][]token
	depth, start := 0, 0
	for i, t := range toks {
		switch {
		case t.isPunct("(") || t.isPunct("["):
			depth++
		case t.isPunct(")") || t.isPunct("]"):
			depth--
		case depth == 0 && t.isPunct(","):
			parts = append(parts, toks[start:i])
			start = i + 1
		}
	}
	if start < len(toks) || len(parts) > 0 {
		parts = append(parts, toks[start:])
	}
	return parts
}

// fromEnders end a FROM list at their parenthesis depth.
var fromEnders = map[string]bool{
	"where": true, "group": true, "having": true, "order": true, "limit": true, "offset": true,
	"union": true, "intersect": true, "except": true, "window": true, "returning": true,
	"select": true, "set": true, "values": true, "on": true, "using": true, "fetch": true,
}

// rewriteExpr rewrites PostgreSQL-only syntax in toks into SQLite syntax:
// casts, generate_series in FROM, ILIKE, IS [NOT] DISTINCT FROM, the
// public schema, pg_sleep, session functions, LIMIT ALL.
func rewriteExpr(toks []token, e env) ([]token, error) {
	out := make([]token, 0, len(toks)+4)
	inFrom := []bool{false} // per parenthesis depth
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		d := len(inFrom) - 1
		switch {
		case t.isPunct("("):
			inFrom = append(inFrom, false)
		case t.isPunct(")"):
			if len(inFrom) > 1 {
				inFrom = inFrom[:len(inFrom)-1]
			}
		case t.kind == tkIdent && (t.val == "from" || t.val == "join" || t.val == "update" || t.val == "into"):
			inFrom[d] = true
		case t.kind == tkIdent && fromEnders[t.val]:
			inFrom[d] = false
		}

		switch {
		case t.kind == tkCast:
			operandStart := castOperandStart(out)
			if operandStart < 0 {
				return nil, syntaxErrorf("syntax error at or near \"::\"")
			}
			typ, n, err := readTypeName(toks[i+1:])
			if err != nil {
				return nil, err
			}
			operand := append([]token{}, out[operandStart:]...)
			cast, err := buildCast(operand, typ.name)
			if err != nil {
				return nil, err
			}
			out = append(out[:operandStart], cast...)
			i += n
			continue
		case t.is("cast") && i+1 < len(toks) && toks[i+1].isPunct("("):
			end := matchParen(toks, i+1)
			if end < 0 {
				return nil, syntaxErrorf("syntax error at end of input")
			}
			as := -1
			depth := 0
			for j := i + 2; j < end; j++ {
				switch {
				case toks[j].isPunct("("):
					depth++
				case toks[j].isPunct(")"):
					depth--
				case depth == 0 && toks[j].is("as"):
					as = j
				}
			}
			if as < 0 {
				return nil, syntaxErrorf("syntax error in CAST")
			}
			typ, n, err := readTypeName(toks[as+1 : end])
			if err != nil {
				return nil, err
			}
			if as+1+n != end {
				return nil, syntaxErrorf("syntax error in CAST")
			}
			operand, err := rewriteExpr(toks[i+2:as], e)
			if err != nil {
				return nil, err
			}
			cast, err := buildCast(operand, typ.name)
			if err != nil {
				return nil, err
			}
			if len(cast) > 0 {
				cast[0].space = t.space
			}
			out = append(out, cast...)
			i = end
			continue
		case t.is("generate_series") && i+1 < len(toks) && toks[i+1].isPunct("(") && len(out) > 0 &&
			(out[len(out)-1].is("from") || out[len(out)-1].is("join") || out[len(out)-1].is("lateral") ||
				out[len(out)-1].isPunct(",") && inFrom[d]):
			series, n, err := rewriteSeries(toks[i:], e)
			if err != nil {
				return nil, err
			}
			series[0].space = t.space
			out = append(out, series...)
			i += n - 1
			continue
		case t.is("ilike"):
			out = append(out, token{kind: tkIdent, space: t.space, pos: -1, text: "LIKE", val: "like"})
			continue
		case t.kind == tkOp && (t.text == "~~" || t.text == "~~*"):
			out = append(out, token{kind: tkIdent, space: true, pos: -1, text: "LIKE", val: "like"})
			continue
		case t.kind == tkOp && (t.text == "!~~" || t.text == "!~~*"):
			out = append(out, identTok("NOT"), identTok("LIKE"))
			continue
		case t.is("is") && i+3 < len(toks) && toks[i+1].is("distinct") && toks[i+2].is("from"):
			out = append(out, identTok("IS"), identTok("NOT"))
			i += 2
			continue
		case t.is("is") && i+4 < len(toks) && toks[i+1].is("not") && toks[i+2].is("distinct") && toks[i+3].is("from"):
			out = append(out, identTok("IS"))
			i += 3
			continue
		case (t.is("public") || t.is("pg_temp")) && i+2 < len(toks) && toks[i+1].isPunct(".") &&
			(toks[i+2].kind == tkIdent || toks[i+2].kind == tkQIdent) && !(len(out) > 0 && out[len(out)-1].isPunct(".")):
			next := toks[i+2]
			next.space = t.space
			out = append(out, next)
			i += 2
			continue
		case (t.is("pg_catalog") || t.is("information_schema")) && i+2 < len(toks) && toks[i+1].isPunct(".") &&
			!(len(out) > 0 && out[len(out)-1].isPunct(".")):
			if t.is("pg_catalog") && i+3 < len(toks) && toks[i+2].kind == tkIdent && toks[i+3].isPunct("(") {
				next := toks[i+2]
				next.space = t.space
				toks = append(append(toks[:i:i], next), toks[i+3:]...)
				i--
				continue
			}
			return nil, unsupportedf("the system catalogs (%s) are not supported by litepg", t.val)
		case t.is("pg_sleep") && i+1 < len(toks) && toks[i+1].isPunct("("):
			out = append(out, token{kind: tkIdent, space: t.space, pos: -1, text: "litepg_sleep", val: "litepg_sleep"},
				punctTok("("), rawTok(strconv.FormatUint(uint64(e.pid), 10)))
			if i+2 < len(toks) && !toks[i+2].isPunct(")") {
				out = append(out, punctTok(","))
			}
			i++
			continue
		case t.is("greatest") && i+1 < len(toks) && toks[i+1].isPunct("("):
			out = append(out, token{kind: tkIdent, space: t.space, pos: -1, text: "max", val: "max"})
			continue
		case t.is("least") && i+1 < len(toks) && toks[i+1].isPunct("("):
			out = append(out, token{kind: tkIdent, space: t.space, pos: -1, text: "min", val: "min"})
			continue
		case (t.is("current_user") || t.is("session_user") || t.is("current_role")) && !(i+1 < len(toks) && toks[i+1].isPunct("(")):
			out = append(out, token{kind: tkRaw, space: t.space, pos: -1, text: quoteString(e.user)})
			continue
		case t.is("current_catalog") || (t.is("current_database") && i+2 < len(toks) && toks[i+1].isPunct("(") && toks[i+2].isPunct(")")):
			out = append(out, token{kind: tkRaw, space: t.space, pos: -1, text: quoteString(e.database)})
			if !t.is("current_catalog") {
				i += 2
			}
			continue
		case t.is("current_schema") && !(len(out) > 0 && out[len(out)-1].isPunct(".")):
			out = append(out, token{kind: tkRaw, space: t.space, pos: -1, text: "'public'"})
			if i+2 < len(toks) && toks[i+1].isPunct("(") && toks[i+2].isPunct(")") {
				i += 2
			}
			continue
		case t.is("pg_backend_pid") && i+2 < len(toks) && toks[i+1].isPunct("(") && toks[i+2].isPunct(")"):
			out = append(out, token{kind: tkRaw, space: t.space, pos: -1, text: strconv.FormatUint(uint64(e.pid), 10)})
			i += 2
			continue
		case t.is("limit") && i+1 < len(toks) && toks[i+1].is("all"):
			out = append(out, t, rawTok("-1"))
			i++
			continue
		case t.kind == tkPunct && (t.text == "[" || t.text == "]"):
			return nil, unsupportedf("arrays are not supported by litepg")
		case t.is("array") && i+1 < len(toks) && (toks[i+1].isPunct("[") || toks[i+1].isPunct("(")):
			return nil, unsupportedf("arrays are not supported by litepg")
		case t.kind == tkOp && (t.text == "~" || t.text == "~*" || t.text == "!~" || t.text == "!~*") && len(out) > 0 && endsOperand(out[len(out)-1]):
			return nil, unsupportedf("regular expression operators are not supported by litepg")
		}
		out = append(out, t)
	}
	return out, nil
}

// endsOperand reports whether t can end an operand, which makes a
// following operator binary.
func endsOperand(t token) bool {
	switch t.kind {
	case tkIdent, tkQIdent, tkString, tkNumber, tkParam, tkRaw:
		return true
	}
	return t.isPunct(")")
}

// castOperandStart returns where the operand of a postfix :: cast starts
// in out (the tokens emitted so far), or -1.
func castOperandStart(out []token) int {
	if len(out) == 0 {
		return -1
	}
	i := len(out) - 1
	last := out[i]
	switch {
	case last.isPunct(")"):
		depth := 0
		for ; i >= 0; i-- {
			if out[i].isPunct(")") {
				depth++
			} else if out[i].isPunct("(") {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if i < 0 {
			return -1
		}
		if i > 0 && out[i-1].kind == tkIdent && isFunctionName(out[i-1].val) {
			i--
		}
	case last.kind == tkIdent || last.kind == tkQIdent || last.kind == tkString || last.kind == tkNumber ||
		last.kind == tkParam || last.kind == tkRaw:
	default:
		return -1
	}
	// Qualified names: a.b.c
	for i >= 2 && out[i-1].isPunct(".") && (out[i-2].kind == tkIdent || out[i-2].kind == tkQIdent) {
		i -= 2
	}
	return i
}

// isFunctionName reports whether an identifier before "(" names a
// function rather than being a keyword such as IN or VALUES.
func isFunctionName(w string) bool {
	switch w {
	case "select", "where", "and", "or", "not", "in", "on", "from", "values", "as", "by",
		"exists", "when", "then", "else", "case", "between", "like", "is", "set", "into",
		"join", "using", "having", "return", "returning", "all", "any", "some", "distinct", "limit", "offset":
		return false
	}
	return true
}

// buildCast renders operand cast to the PostgreSQL type named pg.
func buildCast(operand []token, pg string) ([]token, error) {
	info := lookupType(pg)
	wrap := func(fn string) []token {
		out := []token{{kind: tkIdent, space: true, pos: -1, text: fn, val: strings.ToLower(fn)}, punctTok("(")}
		out = append(out, operand...)
		return append(out, punctTok(")"))
	}
	if len(operand) > 0 {
		operand[0].space = false
	}
	switch info.castAs {
	case "bool":
		return wrap("litepg_bool"), nil
	case "bytea":
		return wrap("litepg_bytea"), nil
	case "":
		switch info.name {
		case "date", "timestamp", "timestamptz":
			out := []token{{kind: tkPunct, space: true, pos: -1, text: "("}}
			out = append(out, operand...)
			return append(out, punctTok(")")), nil
		}
		return nil, unsupportedf("cast to type %s is not supported by litepg", pg)
	}
	out := []token{{kind: tkIdent, space: true, pos: -1, text: "CAST", val: "cast"}, punctTok("(")}
	out = append(out, operand...)
	return append(out, identTok("AS"), identTok(info.castAs), punctTok(")")), nil
}

// seriesColumn is the column name generate_series gives by default.
const seriesColumn = "generate_series"

// rewriteSeries rewrites generate_series(start, stop[, step]) [AS]
// [alias[(column)]] at toks[0] in a FROM list into a recursive common
// table expression. It returns the new tokens and the number of source
// tokens consumed.
func rewriteSeries(toks []token, e env) ([]token, int, error) {
	end := matchParen(toks, 1)
	if end < 0 {
		return nil, 0, syntaxErrorf("syntax error at end of input")
	}
	args := splitTop(toks[2:end])
	if len(args) != 2 && len(args) != 3 {
		return nil, 0, unsupportedf("generate_series takes two or three integer arguments in litepg")
	}
	var rendered []string
	for _, a := range args {
		if len(a) == 0 {
			return nil, 0, syntaxErrorf("syntax error in generate_series")
		}
		r, err := rewriteExpr(a, e)
		if err != nil {
			return nil, 0, err
		}
		rendered = append(rendered, "CAST(("+emit(r)+") AS NUMERIC)")
	}
	startE, stopE := rendered[0], rendered[1]
	n := end + 1
	alias, column := seriesColumn, seriesColumn
	if n < len(toks) && toks[n].is("with") {
		return nil, 0, unsupportedf("WITH ORDINALITY is not supported by litepg")
	}
	if n < len(toks) && toks[n].is("as") {
		n++
	}
	if n < len(toks) && (toks[n].kind == tkQIdent || toks[n].kind == tkIdent && !isClauseWord(toks[n].val)) {
		alias = identName(toks[n])
		column = alias
		n++
		if n+2 < len(toks) && toks[n].isPunct("(") && (toks[n+1].kind == tkIdent || toks[n+1].kind == tkQIdent) && toks[n+2].isPunct(")") {
			column = identName(toks[n+1])
			n += 3
		}
	}
	var sql string
	if len(rendered) == 2 {
		sql = "(WITH RECURSIVE litepg_series(v) AS (SELECT " + startE + " WHERE " + startE + " <= " + stopE +
			" UNION ALL SELECT v + 1 FROM litepg_series WHERE v + 1 <= " + stopE + ") SELECT v AS " +
			quoteIdent(column) + " FROM litepg_series)"
	} else {
		step := rendered[2]
		sql = "(WITH RECURSIVE litepg_series(v) AS (SELECT " + startE + " WHERE " + step + " > 0 AND " + startE + " <= " + stopE +
			" OR " + step + " < 0 AND " + startE + " >= " + stopE +
			" UNION ALL SELECT v + " + step + " FROM litepg_series WHERE " + step + " > 0 AND v + " + step + " <= " + stopE +
			" OR " + step + " < 0 AND v + " + step + " >= " + stopE + ") SELECT v AS " +
			quoteIdent(column) + " FROM litepg_series)"
	}
	return []token{rawTok(sql), identTok("AS"), rawTok(quoteIdent(alias))}, n, nil
}

// isClauseWord reports keywords that cannot be a table alias.
func isClauseWord(w string) bool {
	switch w {
	case "where", "group", "having", "order", "limit", "offset", "union", "intersect", "except",
		"window", "join", "inner", "left", "right", "full", "cross", "natural", "on", "using",
		"returning", "fetch", "for", "lateral", "as", "with":
		return true
	}
	return false
}

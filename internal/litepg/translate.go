package litepg

// Statement translation: splitting a query into statements, classifying
// each (stmtKind) and dispatching to the DDL (translate_ddl.go), session
// (translate_session.go) and query translators, whose expressions are
// rewritten by translate_expr.go.

import (
	"iter"
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
		return translateTxEnd(toks, skCommit, "COMMIT")
	case "rollback", "abort":
		return translateTxEnd(toks, skRollback, "ROLLBACK")
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
	case "reset", "show":
		rest := toks[1:]
		if len(rest) == 0 {
			return nil, syntaxErrorf("syntax error at end of input")
		}
		name := settingName(rest)
		if name == "" {
			return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
		}
		if first.val == "reset" {
			return &stmt{kind: skReset, tag: "RESET", setName: name}, nil
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

// rawTok makes a synthetic token emitted verbatim.
func rawTok(s string) token { return token{kind: tkRaw, pos: -1, text: s, val: s, space: true} }

// identTok makes a synthetic identifier token.
func identTok(s string) token {
	return token{kind: tkIdent, pos: -1, text: s, val: strings.ToLower(s), space: true}
}

// punctTok makes a synthetic punctuation token.
func punctTok(s string) token { return token{kind: tkPunct, pos: -1, text: s} }

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

// translateTxEnd translates COMMIT / END (kind skCommit, tag COMMIT) and
// ROLLBACK / ABORT (skRollback, ROLLBACK), with ROLLBACK TO SAVEPOINT.
func translateTxEnd(toks []token, kind stmtKind, tag string) (*stmt, error) {
	rest := skipWords(toks[1:], "work", "transaction")
	if len(rest) > 0 && rest[0].is("prepared") {
		return nil, unsupportedf("two-phase commit is not supported")
	}
	if len(rest) > 0 && rest[0].is("to") && toks[0].is("rollback") {
		name, err := singleName(skipWords(rest[1:], "savepoint"))
		if err != nil {
			return nil, err
		}
		return &stmt{kind: skExec, tag: "ROLLBACK", sql: "ROLLBACK TO " + name, savepoint: true}, nil
	}
	if len(rest) > 0 && rest[0].is("and") {
		if len(rest) > 1 && rest[1].is("no") {
			return &stmt{kind: kind, tag: tag}, nil
		}
		return nil, unsupportedf("%s AND CHAIN is not supported", tag)
	}
	if len(rest) > 0 {
		return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
	}
	return &stmt{kind: kind, tag: tag}, nil
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
	for _, t := range topLevel(toks[1:]) {
		if t.kind != tkIdent {
			continue
		}
		switch t.val {
		case "select", "insert", "update", "delete", "values":
			return t.val
		}
	}
	return ""
}

// stripLockingClause removes a trailing FOR UPDATE / FOR SHARE clause,
// which SQLite has no use for: a transaction that writes holds the
// database's write lock. It reports whether one was present.
func stripLockingClause(toks []token) ([]token, bool, error) {
	for i, t := range topLevel(toks) {
		if t.is("for") && i+1 < len(toks) {
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
	for _, t := range topLevel(toks) {
		switch {
		case t.is("into"):
			return true
		case t.is("insert"):
			return false
		}
	}
	return false
}

// topLevel yields the tokens of toks at parenthesis depth 0, counted
// from toks[0], with their indexes in toks; it does not yield the
// parentheses themselves.
func topLevel(toks []token) iter.Seq2[int, token] {
	return func(yield func(int, token) bool) {
		depth := 0
		for i, t := range toks {
			switch {
			case t.isPunct("("):
				depth++
			case t.isPunct(")"):
				depth--
			case depth == 0:
				if !yield(i, t) {
					return
				}
			}
		}
	}
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

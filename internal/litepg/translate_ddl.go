package litepg

import "strings"

// DDL translation: CREATE TABLE, INDEX and VIEW, ALTER TABLE, DROP and
// TRUNCATE into SQLite's dialect, with PostgreSQL's type names, SERIAL
// and identity columns mapped onto SQLite's column types.

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
			j := constraintEnd(rest, 0, isColumnConstraintWord)
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
			depth := 0
			if t.isPunct("(") {
				depth = 1
			}
			j := constraintEnd(rest, depth, func(t token) bool {
				return isColumnConstraintWord(t) && !t.is("null") || t.is("default")
			})
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

// constraintEnd returns the index of the first token after toks[0], at
// parenthesis depth 0 (starting from depth), at which stop is true, or
// len(toks).
func constraintEnd(toks []token, depth int, stop func(token) bool) int {
	j := 1
	for ; j < len(toks); j++ {
		if depth == 0 && stop(toks[j]) {
			break
		}
		if toks[j].isPunct("(") {
			depth++
		} else if toks[j].isPunct(")") {
			depth--
		}
	}
	return j
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

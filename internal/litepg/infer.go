package litepg

import (
	"strconv"
	"strings"
)

// typeHint describes, without access to the schema, how to find the type
// of a parameter or result column. The session resolves it against the
// tables the statement names.
type typeHint struct {
	oid  uint32     // the type, when known from the text alone
	ref  *colRef    // else the type of this column
	fn   string     // else a combination of args: "sum", "same" (first arg), "arith"
	args []typeHint // arguments of fn
}

// colRef names a table column. table is a name or alias, "" when the
// reference is unqualified; index >= 0 selects a column by position
// (INSERT without a column list) when column is "".
type colRef struct {
	table, column string
	index         int
}

// colHint is a result column: its PostgreSQL-style name and type hint.
type colHint struct {
	name string
	hint typeHint
}

// maxHintDepth bounds the recursion of expression typing.
const maxHintDepth = 24

// analyzeStatement fills in the tables, parameter hints and result
// column hints of a query or DML statement from its source tokens.
func analyzeStatement(st *stmt, toks []token) {
	st.tables = map[string]string{}
	local := map[string]bool{}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tkIdent {
			continue
		}
		switch t.val {
		case "from", "join", "update", "into":
			j := i + 1
			for {
				for j < len(toks) && (toks[j].is("only") || toks[j].is("lateral")) {
					j++
				}
				if j < len(toks) && toks[j].is("generate_series") && j+1 < len(toks) && toks[j+1].isPunct("(") {
					end := matchParen(toks, j+1)
					if end < 0 {
						break
					}
					j = end + 1
					col := seriesColumn
					if j < len(toks) && toks[j].is("as") {
						j++
					}
					if j < len(toks) && (toks[j].kind == tkQIdent || toks[j].kind == tkIdent && !isClauseWord(toks[j].val)) {
						col = identName(toks[j])
						j++
						if j+2 < len(toks) && toks[j].isPunct("(") && toks[j+2].isPunct(")") {
							col = identName(toks[j+1])
							j += 3
						}
					}
					local[col] = true
				} else {
					name, n, err := readTableName(toks[j:])
					if err != nil {
						break
					}
					if j+n < len(toks) && toks[j+n].isPunct("(") && t.val != "into" {
						break // a function call
					}
					st.tables[name] = name
					j += n
					if t.val == "into" && st.target == "" && st.tag == "INSERT" {
						st.target = name
						if j < len(toks) && toks[j].isPunct("(") && j+1 < len(toks) && !toks[j+1].is("select") && !toks[j+1].is("with") {
							end := matchParen(toks, j)
							if end > 0 {
								for _, c := range splitTop(toks[j+1 : end]) {
									if len(c) == 1 {
										st.insertCols = append(st.insertCols, identName(c[0]))
									} else {
										st.insertCols = append(st.insertCols, "")
									}
								}
								j = end + 1
							}
						}
					}
					if j < len(toks) && toks[j].is("as") {
						j++
					}
					if j < len(toks) && (toks[j].kind == tkQIdent || toks[j].kind == tkIdent && !isClauseWord(toks[j].val) &&
						!fromEnders[toks[j].val] && toks[j].val != "default" && toks[j].val != "select") {
						st.tables[identName(toks[j])] = name
						j++
					}
				}
				if t.val == "from" && j < len(toks) && toks[j].isPunct(",") {
					j++
					continue
				}
				break
			}
		}
	}

	// Parameters.
	for _, t := range toks {
		if t.kind == tkParam && t.n > st.nparams {
			st.nparams = t.n
		}
	}
	st.params = make([]typeHint, st.nparams)
	for i, t := range toks {
		if t.kind != tkParam {
			continue
		}
		if h := &st.params[t.n-1]; h.oid == 0 && h.ref == nil {
			*h = paramHint(toks, i, st)
			if h.ref != nil && h.ref.table == "" && local[h.ref.column] {
				*h = typeHint{oid: oidInt8}
			}
		}
	}

	// Result columns.
	items, names := resultItems(toks)
	if items != nil {
		st.cols = make([]colHint, len(items))
		for k, item := range items {
			expr, alias := splitAlias(item)
			h := exprHint(expr, st, local, 0)
			name := alias
			if name == "" {
				name = exprName(expr)
				if names != nil {
					name = names[k]
				}
			}
			st.cols[k] = colHint{name: name, hint: h}
		}
	}
}

// resultItems returns the select-list items of the main SELECT, the
// items of the first VALUES row, or the RETURNING list. It returns nil
// when the list cannot be given item by item (a * item, a parenthesized
// query). names, when not nil, are the names PostgreSQL gives the items
// (VALUES: column1, column2, ...).
func resultItems(toks []token) (items [][]token, names []string) {
	start := -1
	values := false
	for i, t := range topLevel(toks) {
		if t.kind != tkIdent {
			continue
		}
		switch t.val {
		case "select", "returning":
			start = i + 1
		case "values":
			if i == 0 {
				values = true
				start = i + 1
			}
		case "insert", "update", "delete":
			// DML: look for RETURNING only.
			rest := toks[i+1:]
			for j, r := range topLevel(rest) {
				if r.is("returning") {
					return listItems(rest[j+1:], nil)
				}
			}
			return nil, nil
		}
		if start >= 0 {
			break
		}
	}
	if start < 0 || start >= len(toks) {
		return nil, nil
	}
	if values {
		if !toks[start].isPunct("(") {
			return nil, nil
		}
		end := matchParen(toks, start)
		if end < 0 {
			return nil, nil
		}
		parts := splitTop(toks[start+1 : end])
		for k := range parts {
			names = append(names, "column"+strconv.Itoa(k+1))
		}
		return parts, names
	}
	rest := toks[start:]
	if len(rest) > 0 && rest[0].is("all") {
		rest = rest[1:]
	} else if len(rest) > 0 && rest[0].is("distinct") {
		rest = rest[1:]
		if len(rest) > 1 && rest[0].is("on") && rest[1].isPunct("(") {
			end := matchParen(rest, 1)
			if end < 0 {
				return nil, nil
			}
			rest = rest[end+1:]
		}
	}
	return listItems(rest, nil)
}

// listEnders end a select list at depth 0.
var listEnders = map[string]bool{
	"from": true, "where": true, "group": true, "having": true, "order": true, "limit": true,
	"offset": true, "union": true, "intersect": true, "except": true, "window": true,
	"fetch": true, "for": true, "into": true,
}

// listItems splits a select list that starts at toks[0] into items.
func listItems(toks []token, names []string) ([][]token, []string) {
	end := len(toks)
	for i, t := range topLevel(toks) {
		if t.kind == tkIdent && listEnders[t.val] {
			end = i
			break
		}
	}
	items := splitTop(toks[:end])
	for _, it := range items {
		if len(it) == 0 {
			return nil, nil
		}
		last := it[len(it)-1]
		if last.isPunct("*") && (len(it) == 1 || len(it) >= 2 && it[len(it)-2].isPunct(".")) {
			return nil, nil
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	return items, names
}

// splitAlias separates "expr [AS] alias" into expr and alias ("" when
// there is none).
func splitAlias(item []token) ([]token, string) {
	n := len(item)
	if n >= 3 && item[n-2].is("as") && (item[n-1].kind == tkIdent || item[n-1].kind == tkQIdent) {
		return item[:n-2], identName(item[n-1])
	}
	if n >= 2 && (item[n-1].kind == tkQIdent || item[n-1].kind == tkIdent && !isKeywordValue(item[n-1].val)) {
		prev := item[n-2]
		if endsOperand(prev) && !prev.isPunct(".") && !(prev.kind == tkIdent && isOperatorWord(prev.val)) {
			return item[:n-1], identName(item[n-1])
		}
	}
	return item, ""
}

// isKeywordValue reports keywords that end expressions and so are never
// an alias.
func isKeywordValue(w string) bool {
	switch w {
	case "end", "null", "true", "false", "current_timestamp", "current_date", "current_time",
		"current_user", "session_user", "localtimestamp", "asc", "desc", "unknown":
		return true
	}
	return false
}

// isOperatorWord reports keywords that act as operators.
func isOperatorWord(w string) bool {
	switch w {
	case "and", "or", "not", "is", "in", "like", "ilike", "between", "case", "when", "then",
		"else", "distinct", "select", "exists", "interval", "cast", "collate", "escape":
		return true
	}
	return false
}

// exprName returns the column name PostgreSQL gives an expression.
func exprName(expr []token) string {
	n := len(expr)
	if n == 0 {
		return "?column?"
	}
	// Trailing cast: name of the operand, else of the type.
	if k := lastTopCast(expr); k > 0 {
		if typ, m, err := readTypeName(expr[k+1:]); err == nil && k+1+m == n {
			if name := exprName(expr[:k]); name != "?column?" {
				return name
			}
			return typ.name
		}
		return "?column?"
	}
	switch {
	case n == 1 && expr[0].kind == tkIdent:
		switch expr[0].val {
		case "true", "false", "null":
			if expr[0].val == "null" {
				return "?column?"
			}
			return "bool"
		}
		return expr[0].val
	case n == 1 && expr[0].kind == tkQIdent:
		return expr[0].val
	case n >= 3 && expr[n-2].isPunct(".") && (expr[n-1].kind == tkIdent || expr[n-1].kind == tkQIdent):
		return identName(expr[n-1])
	case n >= 3 && expr[0].kind == tkIdent && expr[1].isPunct("(") && matchParen(expr, 1) == n-1:
		if expr[0].val == "cast" {
			return castName(expr)
		}
		return expr[0].val
	}
	return "?column?"
}

// castName names CAST(x AS type) as PostgreSQL does.
func castName(expr []token) string {
	for j, t := range topLevel(expr[2 : len(expr)-1]) {
		if !t.is("as") {
			continue
		}
		j += 2
		if name := exprName(expr[2:j]); name != "?column?" {
			return name
		}
		if typ, _, err := readTypeName(expr[j+1 : len(expr)-1]); err == nil {
			return typ.name
		}
	}
	return "?column?"
}

// lastTopCast returns the index of the last :: at depth 0, or -1.
func lastTopCast(expr []token) int {
	k := -1
	for i, t := range topLevel(expr) {
		if t.kind == tkCast {
			k = i
		}
	}
	return k
}

// numberOID is the type of a numeric constant: int4 when it fits, int8,
// else float8 (PostgreSQL's numeric, reported as float8).
func numberOID(text string) uint32 {
	if n, err := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 0, 64); err == nil {
		if n >= -1<<31 && n < 1<<31 {
			return oidInt4
		}
		return oidInt8
	}
	return oidFloat8
}

// funcOID returns the result type of a function whose type does not
// depend on its arguments.
func funcOID(name string) (uint32, bool) {
	switch name {
	case "count", "changes", "last_insert_rowid", "total_changes", "generate_series":
		return oidInt8, true
	case "length", "char_length", "character_length", "octet_length", "strpos", "position",
		"ascii", "instr", "unicode", "pg_backend_pid":
		return oidInt4, true
	case "repeat", "lower", "upper", "substr", "substring", "trim", "ltrim", "rtrim", "btrim",
		"replace", "concat", "concat_ws", "md5", "lpad", "rpad", "left", "right", "reverse",
		"initcap", "version", "current_setting", "string_agg", "group_concat", "to_char",
		"quote_ident", "quote_literal", "quote_nullable", "format", "printf", "typeof", "hex",
		"chr", "translate", "split_part", "current_database", "current_schema", "pg_typeof",
		"sqlite_version", "char":
		return oidText, true
	case "avg", "total", "random", "pi", "sqrt", "ln", "log", "log10", "log2", "exp", "power",
		"pow", "cbrt", "degrees", "radians", "sin", "cos", "tan", "asin", "acos", "atan", "atan2",
		"round", "ceil", "ceiling", "floor", "trunc", "sign", "stddev", "variance":
		return oidFloat8, true
	case "now", "clock_timestamp", "statement_timestamp", "transaction_timestamp":
		return oidTimestamptz, true
	case "pg_sleep":
		return oidVoid, true
	case "bool_and", "bool_or", "every":
		return oidBool, true
	case "date":
		return oidDate, true
	case "datetime":
		return oidTimestamp, true
	}
	return 0, false
}

// exprHint types an expression from its tokens. local names columns
// known to hold integers (generate_series output).
func exprHint(expr []token, st *stmt, local map[string]bool, depth int) typeHint {
	n := len(expr)
	if n == 0 || depth > maxHintDepth {
		return typeHint{}
	}
	if expr[0].isPunct("(") && matchParen(expr, 0) == n-1 {
		if n > 2 && expr[1].kind == tkIdent && (expr[1].val == "select" || expr[1].val == "values" || expr[1].val == "with") {
			return typeHint{}
		}
		return exprHint(expr[1:n-1], st, local, depth+1)
	}
	if k := lastTopCast(expr); k > 0 {
		if typ, m, err := readTypeName(expr[k+1:]); err == nil && k+1+m == n {
			return typeHint{oid: reportable(typ.oid)}
		}
	}
	if n == 1 {
		t := expr[0]
		switch t.kind {
		case tkNumber:
			return typeHint{oid: numberOID(t.text)}
		case tkString:
			return typeHint{oid: oidText}
		case tkParam:
			if t.n-1 < len(st.params) {
				return st.params[t.n-1]
			}
			return typeHint{}
		case tkQIdent:
			return refHint("", t.val, local)
		case tkIdent:
			switch t.val {
			case "true", "false":
				return typeHint{oid: oidBool}
			case "null":
				return typeHint{oid: oidText}
			case "current_timestamp", "localtimestamp":
				return typeHint{oid: oidTimestamptz}
			case "current_date":
				return typeHint{oid: oidDate}
			case "current_time", "current_user", "session_user", "current_role", "current_catalog", "current_schema":
				return typeHint{oid: oidText}
			}
			return refHint("", t.val, local)
		}
		return typeHint{}
	}
	if n == 3 && expr[1].isPunct(".") && (expr[0].kind == tkIdent || expr[0].kind == tkQIdent) &&
		(expr[2].kind == tkIdent || expr[2].kind == tkQIdent) {
		return refHint(identName(expr[0]), identName(expr[2]), local)
	}
	if expr[0].kind == tkIdent && n >= 3 && expr[1].isPunct("(") && matchParen(expr, 1) == n-1 {
		name := expr[0].val
		args := splitTop(expr[2 : n-1])
		switch name {
		case "cast":
			for j := 2; j < n-1; j++ {
				if expr[j].is("as") {
					if typ, m, err := readTypeName(expr[j+1 : n-1]); err == nil && j+1+m == n-1 {
						return typeHint{oid: reportable(typ.oid)}
					}
				}
			}
			return typeHint{}
		case "sum":
			if len(args) == 1 {
				return typeHint{fn: "sum", args: []typeHint{exprHint(stripDistinct(args[0]), st, local, depth+1)}}
			}
		case "min", "max", "abs", "coalesce", "nullif", "greatest", "least", "mod", "ifnull":
			if len(args) >= 1 {
				return typeHint{fn: "same", args: []typeHint{exprHint(stripDistinct(args[0]), st, local, depth+1)}}
			}
		case "exists":
			return typeHint{oid: oidBool}
		}
		if oid, ok := funcOID(name); ok {
			return typeHint{oid: oid}
		}
		return typeHint{}
	}
	if expr[0].is("not") || expr[0].is("exists") {
		return typeHint{oid: oidBool}
	}
	if expr[0].is("case") {
		return typeHint{}
	}
	// Operators at depth 0.
	var operands [][]token
	start := 0
	arith, concat := false, false
	for i, t := range topLevel(expr) {
		switch {
		case t.kind == tkOp:
			switch t.text {
			case "=", "<>", "!=", "<", ">", "<=", ">=":
				return typeHint{oid: oidBool}
			case "||":
				concat = true
			case "+", "-", "*", "/", "%":
				if i > 0 && endsOperand(expr[i-1]) {
					arith = true
					operands = append(operands, expr[start:i])
					start = i + 1
				}
			}
		case t.kind == tkIdent:
			switch t.val {
			case "and", "or", "is", "in", "like", "ilike", "between", "glob":
				return typeHint{oid: oidBool}
			}
		}
	}
	if concat {
		return typeHint{oid: oidText}
	}
	if arith {
		operands = append(operands, expr[start:])
		h := typeHint{fn: "arith"}
		for _, o := range operands {
			h.args = append(h.args, exprHint(o, st, local, depth+1))
		}
		return h
	}
	if n == 2 && expr[0].kind == tkOp && (expr[0].text == "-" || expr[0].text == "+") {
		return exprHint(expr[1:], st, local, depth+1)
	}
	return typeHint{}
}

// stripDistinct drops a leading DISTINCT or ALL from an aggregate's
// argument.
func stripDistinct(arg []token) []token {
	if len(arg) > 1 && (arg[0].is("distinct") || arg[0].is("all")) {
		return arg[1:]
	}
	return arg
}

// refHint is the hint for a column reference.
func refHint(table, column string, local map[string]bool) typeHint {
	if table == "" && local[column] {
		return typeHint{oid: oidInt8}
	}
	return typeHint{ref: &colRef{table: table, column: column, index: -1}}
}

// paramHint infers the type of the parameter at toks[i] from what
// surrounds it.
func paramHint(toks []token, i int, st *stmt) typeHint {
	// $1::type
	if i+1 < len(toks) && toks[i+1].kind == tkCast {
		if typ, _, err := readTypeName(toks[i+2:]); err == nil {
			return typeHint{oid: reportable(typ.oid)}
		}
	}
	if i > 0 {
		p := toks[i-1]
		switch {
		case p.kind == tkOp && isCompareOrArith(p.text):
			if ref := colRefBefore(toks, i-2); ref != nil {
				return typeHint{ref: ref}
			}
		case p.kind == tkOp && p.text == "||":
			return typeHint{oid: oidText}
		case p.is("like") || p.is("ilike") || p.is("glob"):
			return typeHint{oid: oidText}
		case p.is("limit") || p.is("offset"):
			return typeHint{oid: oidInt8}
		case p.is("between") || p.is("symmetric"):
			j := i - 2
			if p.is("symmetric") {
				j--
			}
			if j >= 0 && toks[j].is("not") {
				j--
			}
			if ref := colRefBefore(toks, j); ref != nil {
				return typeHint{ref: ref}
			}
		case p.is("and"):
			// col BETWEEN x AND $n
			j := operandStartBefore(toks, i-2)
			if j > 0 && toks[j-1].is("between") {
				k := j - 2
				if k >= 0 && toks[k].is("not") {
					k--
				}
				if ref := colRefBefore(toks, k); ref != nil {
					return typeHint{ref: ref}
				}
			}
		case p.isPunct("(") || p.isPunct(","):
			if h, ok := listParamHint(toks, i, st); ok {
				return h
			}
		}
	}
	// $1 = col
	if i+2 < len(toks) && toks[i+1].kind == tkOp && isCompareOrArith(toks[i+1].text) {
		if ref := colRefAt(toks, i+2); ref != nil {
			return typeHint{ref: ref}
		}
	}
	return typeHint{}
}

func isCompareOrArith(op string) bool {
	switch op {
	case "=", "<>", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "%":
		return true
	}
	return false
}

// colRefBefore returns the column reference ending at toks[j], or nil.
func colRefBefore(toks []token, j int) *colRef {
	if j < 0 || j >= len(toks) || toks[j].kind != tkIdent && toks[j].kind != tkQIdent {
		return nil
	}
	if j >= 2 && toks[j-1].isPunct(".") && (toks[j-2].kind == tkIdent || toks[j-2].kind == tkQIdent) {
		return &colRef{table: identName(toks[j-2]), column: identName(toks[j]), index: -1}
	}
	return &colRef{column: identName(toks[j]), index: -1}
}

// colRefAt returns the column reference starting at toks[j], or nil.
func colRefAt(toks []token, j int) *colRef {
	if j >= len(toks) || toks[j].kind != tkIdent && toks[j].kind != tkQIdent {
		return nil
	}
	if j+2 < len(toks) && toks[j+1].isPunct(".") && (toks[j+2].kind == tkIdent || toks[j+2].kind == tkQIdent) {
		if j+3 < len(toks) && toks[j+3].isPunct("(") {
			return nil
		}
		return &colRef{table: identName(toks[j]), column: identName(toks[j+2]), index: -1}
	}
	if j+1 < len(toks) && toks[j+1].isPunct("(") {
		return nil
	}
	return &colRef{column: identName(toks[j]), index: -1}
}

// operandStartBefore returns where the operand ending at toks[j] starts:
// j itself, or the "(" of a parenthesized group. -1 if none.
func operandStartBefore(toks []token, j int) int {
	if j < 0 || j >= len(toks) {
		return -1
	}
	if !toks[j].isPunct(")") {
		return j
	}
	depth := 0
	for k := j; k >= 0; k-- {
		if toks[k].isPunct(")") {
			depth++
		} else if toks[k].isPunct("(") {
			depth--
			if depth == 0 {
				return k
			}
		}
	}
	return -1
}

// listParamHint types a parameter that is an element of a parenthesized
// list: an IN list, an INSERT VALUES row or a function's arguments.
func listParamHint(toks []token, i int, st *stmt) (typeHint, bool) {
	// The element must be the parameter alone.
	if i+1 < len(toks) && !toks[i+1].isPunct(",") && !toks[i+1].isPunct(")") {
		return typeHint{}, false
	}
	// Find the opening parenthesis and the element's position.
	depth, pos, open := 0, 0, -1
	for k := i - 1; k >= 0; k-- {
		t := toks[k]
		if t.isPunct(")") {
			depth++
		} else if t.isPunct("(") {
			if depth == 0 {
				open = k
				break
			}
			depth--
		} else if depth == 0 && t.isPunct(",") {
			pos++
		}
	}
	if open < 0 {
		return typeHint{}, false
	}
	if open > 0 {
		before := toks[open-1]
		switch {
		case before.is("in"):
			k := open - 2
			if k >= 0 && toks[k].is("not") {
				k--
			}
			if ref := colRefBefore(toks, k); ref != nil {
				return typeHint{ref: ref}, true
			}
			return typeHint{}, false
		case before.is("values") || before.isPunct(",") && st.tag == "INSERT" && inValuesList(toks, open):
			if st.tag != "INSERT" || st.target == "" {
				return typeHint{}, false
			}
			if st.insertCols != nil {
				if pos < len(st.insertCols) && st.insertCols[pos] != "" {
					return typeHint{ref: &colRef{table: st.target, column: st.insertCols[pos], index: -1}}, true
				}
				return typeHint{}, false
			}
			return typeHint{ref: &colRef{table: st.target, index: pos}}, true
		case before.kind == tkIdent:
			switch before.val {
			case "repeat", "lpad", "rpad", "left", "right":
				if pos == 1 {
					return typeHint{oid: oidInt8}, true
				}
				return typeHint{oid: oidText}, true
			case "substr", "substring":
				if pos > 0 {
					return typeHint{oid: oidInt8}, true
				}
				return typeHint{oid: oidText}, true
			case "generate_series":
				return typeHint{oid: oidInt8}, true
			case "pg_sleep":
				return typeHint{oid: oidFloat8}, true
			case "upper", "lower", "length", "md5", "concat", "trim", "replace":
				return typeHint{oid: oidText}, true
			}
		}
	}
	return typeHint{}, false
}

// inValuesList reports whether the "(" at toks[open] is a row of an
// INSERT's VALUES list.
func inValuesList(toks []token, open int) bool {
	depth := 0
	for k := open - 1; k >= 0; k-- {
		t := toks[k]
		switch {
		case t.isPunct(")"):
			depth++
		case t.isPunct("("):
			if depth == 0 {
				return false
			}
			depth--
		case depth == 0 && t.is("values"):
			return true
		case depth == 0 && !t.isPunct(","):
			return false
		}
	}
	return false
}

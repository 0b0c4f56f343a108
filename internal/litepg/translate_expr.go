package litepg

import (
	"strconv"
	"strings"
)

// Expression rewrite: the token-level rewrite of PostgreSQL expressions
// into SQLite's ($n parameters, ::casts, ILIKE, IS DISTINCT FROM,
// generate_series in FROM, E'' strings, the public schema prefix).

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
			as := -1 // the last AS at depth 0
			for j, t := range topLevel(toks[i+2 : end]) {
				if t.is("as") {
					as = i + 2 + j
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

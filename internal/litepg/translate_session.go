package litepg

import "strings"

// Session statements: SET, RESET and SET LOCAL of settings, and
// transaction control (BEGIN, START TRANSACTION, their modes). They run
// in the session, not in SQLite, except as the transaction they start.

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

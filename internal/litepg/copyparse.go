package litepg

import (
	"strings"
)

// translateCopy parses COPY ... FROM STDIN and COPY ... TO STDOUT in both
// the parenthesized option syntax and the older keyword syntax.
func translateCopy(toks []token, e env) (*stmt, error) {
	spec := &copySpec{}
	rest := toks[1:]
	binary := false
	if len(rest) > 0 && rest[0].is("binary") {
		binary = true
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return nil, syntaxErrorf("syntax error at end of input")
	}
	if rest[0].isPunct("(") {
		end := matchParen(rest, 0)
		if end < 0 {
			return nil, syntaxErrorf("syntax error at end of input")
		}
		q, err := translateOne(rest[1:end], e)
		if err != nil {
			return nil, err
		}
		if q.kind != skQuery {
			return nil, unsupportedf("COPY (%s) is not supported", q.tag)
		}
		spec.query = q
		rest = rest[end+1:]
	} else {
		name, n, err := readTableName(rest)
		if err != nil {
			return nil, err
		}
		spec.table = name
		rest = rest[n:]
		if len(rest) > 0 && rest[0].isPunct("(") {
			end := matchParen(rest, 0)
			if end < 0 {
				return nil, syntaxErrorf("syntax error at end of input")
			}
			for _, c := range splitTop(rest[1:end]) {
				if len(c) != 1 || c[0].kind != tkIdent && c[0].kind != tkQIdent {
					return nil, syntaxErrorf("syntax error in COPY column list")
				}
				spec.columns = append(spec.columns, identName(c[0]))
			}
			rest = rest[end+1:]
		}
	}
	if len(rest) < 2 {
		return nil, syntaxErrorf("syntax error in COPY")
	}
	switch {
	case rest[0].is("from"):
		spec.from = true
		if !rest[1].is("stdin") {
			return nil, unsupportedf("COPY FROM a file or program is not supported; use FROM STDIN")
		}
	case rest[0].is("to"):
		if !rest[1].is("stdout") {
			return nil, unsupportedf("COPY TO a file or program is not supported; use TO STDOUT")
		}
	default:
		return nil, syntaxErrorf("syntax error at or near %q", clip(rest[0].text))
	}
	if spec.query != nil && spec.from {
		return nil, syntaxErrorf("COPY (query) FROM is not valid")
	}
	rest = rest[2:]
	if binary {
		spec.format = copyBinary
	}
	if err := parseCopyOptions(spec, rest); err != nil {
		return nil, err
	}
	switch spec.format {
	case copyText:
		if spec.delim == 0 {
			spec.delim = '\t'
		}
		if spec.quote != 0 || spec.escape != 0 {
			return nil, unsupportedf("COPY QUOTE and ESCAPE are available only in CSV mode")
		}
	case copyCSV:
		if spec.delim == 0 {
			spec.delim = ','
		}
		if spec.quote == 0 {
			spec.quote = '"'
		}
		if spec.escape == 0 {
			spec.escape = spec.quote
		}
	case copyBinary:
		if spec.delim != 0 || spec.header {
			return nil, unsupportedf("COPY DELIMITER and HEADER are not available in BINARY mode")
		}
	}
	if spec.format == copyText && !spec.nullSet {
		spec.null = `\N`
	}

	st := &stmt{kind: skCopy, tag: "COPY", copy: spec, write: spec.from}
	if !spec.from {
		if spec.query == nil {
			cols := "*"
			if spec.columns != nil {
				q := make([]string, len(spec.columns))
				for i, c := range spec.columns {
					q[i] = quoteIdent(c)
				}
				cols = strings.Join(q, ", ")
			}
			qt, err := lex("SELECT " + cols + " FROM " + quoteIdent(spec.table))
			if err != nil {
				return nil, err
			}
			q, err := translateQuery(qt, e)
			if err != nil {
				return nil, err
			}
			spec.query = q
		}
		st.nparams, st.params = spec.query.nparams, spec.query.params
	}
	return st, nil
}

// parseCopyOptions reads the options after STDIN / STDOUT.
func parseCopyOptions(spec *copySpec, rest []token) error {
	if len(rest) > 0 && rest[0].is("with") {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0].isPunct("(") {
		end := matchParen(rest, 0)
		if end < 0 {
			return syntaxErrorf("syntax error at end of input")
		}
		if end != len(rest)-1 {
			return syntaxErrorf("syntax error at or near %q", clip(rest[end+1].text))
		}
		for _, opt := range splitTop(rest[1:end]) {
			if len(opt) == 0 || opt[0].kind != tkIdent {
				return syntaxErrorf("syntax error in COPY options")
			}
			var arg string
			hasArg := len(opt) > 1
			if len(opt) == 2 {
				arg = opt[1].val
				if opt[1].kind == tkNumber {
					arg = opt[1].text
				}
			} else if len(opt) > 2 {
				return unsupportedf("COPY option %q is not supported", opt[0].val)
			}
			if err := setCopyOption(spec, opt[0].val, arg, hasArg); err != nil {
				return err
			}
		}
		return nil
	}
	// Keyword syntax.
	for len(rest) > 0 {
		w := rest[0]
		if w.kind != tkIdent {
			return syntaxErrorf("syntax error at or near %q", clip(w.text))
		}
		rest = rest[1:]
		switch w.val {
		case "binary", "csv":
			if err := setCopyOption(spec, "format", w.val, true); err != nil {
				return err
			}
		case "header":
			if err := setCopyOption(spec, w.val, "", false); err != nil {
				return err
			}
		case "delimiter", "null", "quote", "escape":
			if len(rest) > 0 && rest[0].is("as") {
				rest = rest[1:]
			}
			if len(rest) == 0 || rest[0].kind != tkString {
				return syntaxErrorf("syntax error in COPY %s", strings.ToUpper(w.val))
			}
			if err := setCopyOption(spec, w.val, rest[0].val, true); err != nil {
				return err
			}
			rest = rest[1:]
		case "oids":
			return unsupportedf("COPY OIDS is not supported")
		default:
			return unsupportedf("COPY option %q is not supported", w.val)
		}
	}
	return nil
}

// setCopyOption applies one COPY option.
func setCopyOption(spec *copySpec, name, arg string, hasArg bool) error {
	oneByte := func() (byte, error) {
		if len(arg) != 1 {
			return 0, unsupportedf("COPY %s must be a single one-byte character", strings.ToUpper(name))
		}
		if arg[0] == '\r' || arg[0] == '\n' {
			return 0, unsupportedf("COPY %s cannot be newline or carriage return", strings.ToUpper(name))
		}
		return arg[0], nil
	}
	var err error
	switch name {
	case "format":
		switch strings.ToLower(arg) {
		case "text":
			spec.format = copyText
		case "csv":
			spec.format = copyCSV
		case "binary":
			spec.format = copyBinary
		default:
			return syntaxErrorf("COPY format %q not recognized", arg)
		}
	case "delimiter":
		spec.delim, err = oneByte()
	case "quote":
		spec.quote, err = oneByte()
	case "escape":
		spec.escape, err = oneByte()
	case "null":
		spec.null, spec.nullSet = arg, true
	case "header":
		if !hasArg {
			spec.header = true
			break
		}
		b, perr := parseBool(arg)
		if perr != nil {
			return unsupportedf("COPY HEADER %q is not supported", arg)
		}
		spec.header = b
	case "freeze":
	case "encoding":
		switch strings.ToLower(strings.ReplaceAll(arg, "-", "")) {
		case "utf8", "unicode", "sql_ascii":
		default:
			return unsupportedf("COPY ENCODING %q is not supported; litepg speaks UTF8", arg)
		}
	default:
		return unsupportedf("COPY option %q is not supported", name)
	}
	return err
}

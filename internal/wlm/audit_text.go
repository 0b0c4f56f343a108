package wlm

import (
	"maps"
	"slices"
	"strings"

	"github.com/sluicelab/sluice/internal/redact"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// auditText is the text the audit log keeps of st: its source text, or,
// for a statement built without one (the HTTP API's), the statement
// written out; password literals are masked either way.
func auditText(st ddl.Statement, d redact.Dialect) string {
	if t := st.Text(); t != "" {
		return redact.SQL(t, d)
	}
	var b strings.Builder
	switch s := st.(type) {
	case *ddl.Create:
		b.WriteString("CREATE " + s.Kind.String() + " ")
		if s.IfNotExists {
			b.WriteString("IF NOT EXISTS ")
		}
		b.WriteString(quoteIdent(s.Name.Name))
		writeOptions(&b, s.Kind, s.Options)
	case *ddl.Alter:
		b.WriteString("ALTER " + s.Kind.String() + " " + quoteIdent(s.Name.Name))
		writeOptions(&b, s.Kind, s.Options)
	case *ddl.AlterRoute:
		b.WriteString("ALTER ROUTE " + quoteIdent(s.Name.Name))
		writeOptions(&b, 0, s.Options)
	case *ddl.Drop:
		b.WriteString("DROP " + s.Kind.String() + " ")
		if s.IfExists {
			b.WriteString("IF EXISTS ")
		}
		for i, n := range s.Names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteIdent(n.Name))
		}
		if s.Cascade {
			b.WriteString(" CASCADE")
		}
	case *ddl.Set:
		b.WriteString("SET " + s.Name + " = " + valueText(s.Value))
	case *ddl.Reset:
		b.WriteString("RESET " + s.Name)
	default:
		return ""
	}
	return redact.SQL(b.String(), d)
}

// writeOptions writes the options of a statement on kind k: a user's
// clauses, or a WITH list. A password is always written as the mask.
func writeOptions(b *strings.Builder, k ddl.Kind, opts []ddl.Option) {
	if k == ddl.User {
		for _, o := range opts {
			switch o.Name {
			case "resource_pool":
				b.WriteString(" RESOURCE POOL " + valueText(o.Value))
			case "password":
				b.WriteString(" PASSWORD " + redact.Mask)
			}
		}
		return
	}
	if len(opts) == 0 {
		return
	}
	b.WriteString(" WITH (")
	for i, o := range opts {
		if i > 0 {
			b.WriteString(", ")
		}
		v := valueText(o.Value)
		if o.Name == "password" {
			v = redact.Mask
		}
		b.WriteString(o.Name + "=" + v)
	}
	b.WriteString(")")
}

// valueText writes v as the console would read it back.
func valueText(v ddl.Value) string {
	switch v.Kind {
	case ddl.Default:
		return "DEFAULT"
	case ddl.Number, ddl.Word:
		return v.Text
	}
	return quoteLiteral(v.Text)
}

// quoteIdent writes name as a "quoted identifier" unless it is a plain
// lower-case word.
func quoteIdent(name string) string {
	plain := name != ""
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// optionsText writes options given as a map (a configuration file's) as
// a WITH list in name order.
func optionsText(opts map[string]string) string {
	if len(opts) == 0 {
		return ""
	}
	parts := make([]string, 0, len(opts))
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		parts = append(parts, strings.ToLower(k)+"="+quoteLiteral(opts[k]))
	}
	return " WITH (" + strings.Join(parts, ", ") + ")"
}

// redactDialect is the redaction rules of a forwarding dialect.
func redactDialect(d ddl.Dialect) redact.Dialect {
	if d == ddl.MySQL {
		return redact.MySQL
	}
	return redact.PostgreSQL
}

package redact_test

import (
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/redact"
)

// marker is in every generated password; no template holds it.
const marker = "⟦SECRET⟧"

// templates are statements with a password literal at {}, by dialect.
// Their single spaces are where separators go; a ~ is a space that stays
// one (inside a string, where a separator would change the SQL it
// holds). In a body that builds a password, every literal but SQL is
// hidden, so the DO bodies hold no other.
var templates = map[redact.Dialect][]string{
	redact.PostgreSQL: {
		"ALTER ROLE u PASSWORD {}",
		"CREATE USER u WITH LOGIN ENCRYPTED PASSWORD {} VALID UNTIL 'infinity'",
		"CREATE ROLE \"u\" PASSWORD {}; SELECT 'x' AS y",
		"SELECT $1; ALTER USER u WITH PASSWORD {}",
		"CREATE USER MAPPING FOR u SERVER s OPTIONS (user 'u', password {})",
		"SELECT 'PASSWORD' || quote_literal({})",
		"SELECT 'PASSWORD' || {}",
		"DO $body$ BEGIN EXECUTE 'ALTER~ROLE~r~PASSWORD~' || quote_literal({}); END $body$",
		"DO $body$ DECLARE p text := {}; BEGIN EXECUTE format('ALTER~ROLE~r~PASSWORD~%L', p); END $body$",
		"DO $body$ DECLARE p text; BEGIN SELECT {} INTO p; EXECUTE 'ALTER~ROLE~r~PASSWORD~' || quote_literal(p); END $body$",
		"SELECT format('ALTER~ROLE~%I~PASSWORD~%L~VALID~UNTIL~%L', 'u', {}, 'infinity')",
	},
	redact.MySQL: {
		"CREATE USER 'u'@'%' IDENTIFIED BY {}",
		"ALTER USER u IDENTIFIED WITH mysql_native_password BY {} PASSWORD EXPIRE",
		"CREATE USER u IDENTIFIED WITH 'caching_sha2_password' AS {} COMMENT 'c'",
		"CREATE USER u IDENTIFIED BY PASSWORD {}",
		"CREATE USER u IDENTIFIED VIA ed25519 USING PASSWORD({}) OR unix_socket",
		"SET PASSWORD FOR 'u'@'%' = PASSWORD({})",
		"SET PASSWORD = {}",
		"GRANT ALL ON *.* TO `u`@`%` IDENTIFIED BY {} WITH GRANT OPTION",
		"ALTER USER u IDENTIFIED BY RANDOM PASSWORD REPLACE {}",
		"CHANGE MASTER TO MASTER_HOST = 'h', MASTER_PASSWORD = {}",
		"SELECT 1; CREATE USER u /*!80000 IDENTIFIED BY {} */",
	},
}

// separators stand between the tokens of a template, by dialect.
var separators = map[redact.Dialect][]string{
	redact.PostgreSQL: {" ", "\n", "\t ", " /* c */ ", "/* a /* nested */ one */", " -- c\n"},
	redact.MySQL:      {" ", "\n", "\t ", " /* c */ ", "/**/", " # c\n", " -- c\n"},
}

// literal writes s as a string literal in one of the dialect's quotings,
// and returns it with the prefix that stays before the mask (a MySQL
// character set introducer).
func literal(s string, d redact.Dialect, quoting uint8) (lit, kept string) {
	double := func(s, q string) string { return strings.ReplaceAll(s, q, q+q) }
	escape := func(s, q string) string {
		return strings.NewReplacer(`\`, `\\`, q, `\`+q).Replace(s)
	}
	if d == redact.PostgreSQL {
		switch quoting % 4 {
		case 0:
			return "'" + double(s, "'") + "'", ""
		case 1:
			return "E'" + escape(s, "'") + "'", ""
		case 2:
			tag := "$$"
			for i := 0; strings.Index(s+tag, tag) < len(s); i++ {
				tag = "$t" + strings.Repeat("x", i) + "$"
			}
			return tag + s + tag, ""
		default:
			return "U&'" + double(s, "'") + "'", ""
		}
	}
	switch quoting % 5 {
	case 0:
		return "'" + escape(s, "'") + "'", ""
	case 1:
		return `"` + escape(s, `"`) + `"`, ""
	case 2:
		return "'" + double(strings.ReplaceAll(s, `\`, `\\`), "'") + "'", ""
	case 3:
		return "N'" + escape(s, "'") + "'", ""
	default:
		return "_utf8mb4 '" + escape(s, "'") + "'", "_utf8mb4 "
	}
}

// FuzzRedact checks that SQL never panics and changes no text without a
// keyword, and that a password embedded in a generated statement, in any
// quoting, with any separators, never survives: in the whole statement,
// which is otherwise kept byte for byte, nor in the statement cut short
// anywhere.
func FuzzRedact(f *testing.F) {
	f.Add("pw-1", "", uint8(0), uint8(0), uint8(0), false, uint16(0), "SELECT 1")
	f.Add(`it's`, `a\b`, uint8(1), uint8(1), uint8(3), true, uint16(30), "ALTER ROLE x PASSWORD 'y")
	f.Add("$$", "$t$", uint8(2), uint8(2), uint8(5), false, uint16(40), "SET PASSWORD = $x$")
	f.Add(`"q"`, "*/", uint8(7), uint8(4), uint8(6), true, uint16(60), "/*! IDENTIFIED BY 'z' */")
	f.Fuzz(func(t *testing.T, a, b string, form, quoting, sep uint8, lower bool, cut uint16, text string) {
		for _, d := range []redact.Dialect{redact.PostgreSQL, redact.MySQL} {
			out := redact.SQL(text, d)
			l := strings.ToLower(text)
			if !strings.Contains(l, "password") && !strings.Contains(l, "identified") && out != text {
				t.Fatalf("SQL(%q, %d) = %q: changed text without a keyword", text, d, out)
			}
		}

		d := redact.PostgreSQL
		if form%2 == 1 {
			d = redact.MySQL
		}
		ts, ss := templates[d], separators[d]
		tmpl := ts[int(form/2)%len(ts)]
		if lower {
			tmpl = strings.ToLower(tmpl)
		}
		tmpl = strings.ReplaceAll(tmpl, " ", ss[int(sep)%len(ss)])
		tmpl = strings.ReplaceAll(tmpl, "~", " ")
		strip := func(s string) string { return strings.ReplaceAll(s, "⟦", "") }
		secret := strip(a) + marker + strip(b)
		if strings.Contains(tmpl, "$body$") && strings.Contains(secret, "$body$") {
			return // the literal would end the body it stands in
		}
		lit, kept := literal(secret, d, quoting)
		sql := strings.Replace(tmpl, "{}", lit, 1)
		// A password that comes before the keyword (a variable's value)
		// is recognised once the text shows the keyword after it.
		seen := 0
		if at := strings.Index(tmpl, "{}"); at < strings.Index(strings.ToLower(tmpl), "password") {
			end := at + len(lit)
			seen = end + strings.Index(strings.ToLower(sql[end:]), "password") + len("password")
		}

		out := redact.SQL(sql, d)
		if strings.Contains(out, marker) {
			t.Fatalf("SQL(%q, %d) = %q: the password survives", sql, d, out)
		}
		// A literal with a backslash is hidden to its longer end, which
		// may take in more of the statement; any other one exactly.
		if !strings.Contains(lit, `\`) {
			if want := strings.Replace(tmpl, "{}", kept+redact.Mask, 1); out != want {
				t.Fatalf("SQL(%q, %d)\n got %q\nwant %q", sql, d, out, want)
			}
		}
		short := sql[:int(cut)%(len(sql)+1)]
		if len(short) < seen {
			return
		}
		if out := redact.SQL(short, d); strings.Contains(out, "⟦") || strings.Contains(out, "SECRET⟧") {
			t.Fatalf("SQL(%q, %d) = %q: the cut password survives", short, d, out)
		}
	})
}

package sqltext

import (
	"strings"
	"testing"
)

func TestScanner(t *testing.T) {
	tests := []struct {
		name string
		d    Dialect
		src  string
		want []string // kind:text of each token; a trailing ! marks an unclosed literal
	}{
		{"words and ops", PostgreSQL, "select a,b from t;", []string{"w:select", "w:a", "o:,", "w:b", "w:from", "w:t", "o:;"}},
		{"pg nested comment", PostgreSQL, "a /* x /* y */ z */ b", []string{"w:a", "w:b"}},
		{"mysql comment does not nest", MySQL, "a /* x /* y */ b", []string{"w:a", "w:b"}},
		{"pg line comment", PostgreSQL, "a -- x\nb", []string{"w:a", "w:b"}},
		{"mysql dash needs a space", MySQL, "a --x\nb", []string{"w:a", "o:-", "o:-", "w:x", "w:b"}},
		{"mysql hash comment", MySQL, "a # x\nb", []string{"w:a", "w:b"}},
		{"pg hash is an op", PostgreSQL, "a # b", []string{"w:a", "o:#", "w:b"}},
		{"doubled quote", PostgreSQL, "'it''s' x", []string{"s:'it''s'", "w:x"}},
		{"pg backslash is plain", PostgreSQL, `'a\' b`, []string{`s:'a\'`, "w:b"}},
		{"mysql backslash escapes", MySQL, `'a\'b' c`, []string{`s:'a\'b'`, "w:c"}},
		{"E string", PostgreSQL, `E'a\'b' c`, []string{`s:E'a\'b'`, "w:c"}},
		{"mysql double quote is a string", MySQL, `"x" y`, []string{`s:"x"`, "w:y"}},
		{"pg double quote is a name", PostgreSQL, `"x" y`, []string{`n:"x"`, "w:y"}},
		{"backtick name", MySQL, "`a b` c", []string{"n:`a b`", "w:c"}},
		{"U& name", PostgreSQL, `U&"d\0061" x`, []string{`n:U&"d\0061"`, "w:x"}},
		{"dollar quote", PostgreSQL, "$f$ it's $f$ x", []string{"s:$f$ it's $f$", "w:x"}},
		{"empty dollar tag", PostgreSQL, "$$a$$", []string{"s:$$a$$"}},
		{"param", PostgreSQL, "$12+1", []string{"o:$12", "o:+", "d:1"}},
		{"mysql dollar word", MySQL, "$a b", []string{"w:$a", "w:b"}},
		{"number forms", PostgreSQL, "1.5e-3 .5 0x1F 1_000", []string{"d:1.5e-3", "d:.5", "d:0x1F", "d:1_000"}},
		{"executable comment is code", MySQL, "a /*!50100 b */ c", []string{"w:a", "w:b", "w:c"}},
		{"unterminated string", PostgreSQL, "x 'abc", []string{"w:x", "s:'abc!"}},
		{"unterminated dollar", PostgreSQL, "$q$ abc", []string{"s:$q$ abc!"}},
		{"unterminated comment", PostgreSQL, "a /* b", []string{"w:a"}},
		{"multibyte word", PostgreSQL, "größe=1", []string{"w:größe", "o:=", "d:1"}},
	}
	kinds := map[Kind]string{Word: "w", String: "s", Name: "n", Number: "d", Op: "o"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Scanner{Src: tt.src, Dialect: tt.d}
			var got []string
			for tok := s.Next(); tok.Kind != EOF; tok = s.Next() {
				g := kinds[tok.Kind] + ":" + tt.src[tok.Start:tok.End]
				if (tok.Kind == String || tok.Kind == Name) && !tok.Closed {
					g += "!"
				}
				got = append(got, g)
			}
			if strings.Join(got, " | ") != strings.Join(tt.want, " | ") {
				t.Errorf("tokens of %q:\n got %q\nwant %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestPrimitives(t *testing.T) {
	tests := []struct {
		name string
		got  int
		want int
	}{
		{"NumberEnd stops at a range", NumberEnd("1..2", 0), 1},
		{"NumberEnd exponent", NumberEnd("2e+10x", 0), 5},
		{"NumberEnd no exponent digits", NumberEnd("2ex", 0), 1},
		{"NumberEnd hex", NumberEnd("0xFFg", 0), 4},
		{"LooseNumberEnd takes letters", LooseNumberEnd("10ms,", 0), 4},
		{"LineEnd", LineEnd("ab\ncd", 0), 3},
		{"LineEnd last line", LineEnd("abcd", 1), 4},
		{"ParamEnd", ParamEnd("$1x", 0), 2},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	if end, ok := Executable(MySQL, "/*M!100 x */", 0); !ok || end != 7 {
		t.Errorf("Executable(/*M!100) = %d, %v; want 7, true", end, ok)
	}
	if _, ok := Executable(PostgreSQL, "/*! x */", 0); ok {
		t.Error("PostgreSQL has no executable comments")
	}
	if end, closed := BlockCommentEnd(PostgreSQL, "/* /* */", 0); closed || end != 8 {
		t.Errorf("unclosed nested comment: %d, %v; want 8, false", end, closed)
	}
}

// FuzzScanner checks that the scanner never panics, that its tokens
// move forward within the text, and that a literal reported unclosed
// runs to the end.
func FuzzScanner(f *testing.F) {
	f.Add("select 'a''b', $x$ y $x$, E'\\'' from \"t\" -- c\n/* d /* e */ */", false)
	f.Add("select `a`, \"b\\\"\" /*!50100 c */ # d\n", true)
	f.Fuzz(func(t *testing.T, src string, my bool) {
		d := PostgreSQL
		if my {
			d = MySQL
		}
		s := Scanner{Src: src, Dialect: d}
		last := 0
		for n := 0; ; n++ {
			tok := s.Next()
			if tok.Start < last || tok.End < tok.Start || tok.End > len(src) {
				t.Fatalf("token %d out of order or bounds: %+v after %d in %q", n, tok, last, src)
			}
			if tok.Kind == EOF {
				return
			}
			if tok.End == tok.Start {
				t.Fatalf("empty token %+v in %q", tok, src)
			}
			if (tok.Kind == String || tok.Kind == Name) && !tok.Closed && tok.End != len(src) {
				t.Fatalf("unclosed literal %+v does not run to the end of %q", tok, src)
			}
			last = tok.End
		}
	})
}

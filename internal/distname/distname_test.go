package distname_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/distname"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		pattern string
		err     string // substring; "" for valid
	}{
		{"", ""},
		{"fdw %p", ""},
		{"citus_internal gpid=%g", ""},
		{"%a-%u-%d-%C-%c", ""},
		{"100%% %p", ""},
		{"fdw", "no %p, %c or %g"},
		{"%a %u", "no %p, %c or %g"},
		{"%p %p", "more than one"},
		{"%p %c", "more than one"},
		{"fdw %p%", "lone %"},
		{"fdw %x %p", "unknown escape %x"},
		{"%%p", "no %p"},
		{strings.Repeat("x", distname.MaxPattern) + "%p", "at most"},
	} {
		_, err := distname.Parse(c.pattern)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("Parse(%q) = %v, want no error", c.pattern, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Parse(%q) = %v, want an error with %q", c.pattern, err, c.err)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		pid           uint32 // 0: no match
	}{
		{"fdw %p", "fdw 12345", 12345},
		{"fdw %p", "fdw 1", 1},
		{"fdw %p", "fdw ", 0},
		{"fdw %p", "fdw 0", 0},
		{"fdw %p", "fdw 12a", 0},
		{"fdw %p", "FDW 12", 0},
		{"fdw %p", "fdw 4294967295", 4294967295},
		{"fdw %p", "fdw 4294967296", 0},
		{"fdw %p", "fdw 99999999999999999999999", 0},
		{"fdw %p", "postgres_fdw", 0},
		{"", "fdw 12", 0},
		{"%p", "77", 77},
		{"fdw %p x", "fdw 12 x", 12},
		{"%u@%d/%p", "alice@shop/901", 901},
		{"%u@%d/%p", "a@b@c/d/42", 42},
		{"%a %p", "my app 7 8", 8},
		{"%p-%u", "12-34-56", 12},
		{"citus_internal gpid=%g", "citus_internal gpid=10000012345", 12345},
		{"citus_internal gpid=%g", "citus_internal gpid=20000000077", 77},
		{"citus_internal gpid=%g", "citus_internal gpid=10000000000", 0},
		{"citus_internal gpid=%g", "citus_internal gpid=12345", 12345},
		{"fdw %c", "fdw 65f1a2b3.3039", 12345},
		{"fdw %c", "fdw 65f1a2b3.", 0},
		{"fdw %c", "fdw .3039", 0},
		{"fdw %c end", "fdw 1.ff end", 255},
		{"100%% %p", "100% 5", 5},
		{"fdw %p", strings.Repeat("x", distname.MaxName+1), 0},
	} {
		p, err := distname.Parse(c.pattern)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.pattern, err)
		}
		pid, ok := p.Match(c.name)
		if ok != (c.pid != 0) || pid != c.pid {
			t.Errorf("Parse(%q).Match(%q) = %d, %v; want %d, %v", c.pattern, c.name, pid, ok, c.pid, c.pid != 0)
		}
	}
}

func TestOff(t *testing.T) {
	if p, _ := distname.Parse(""); !p.Off() {
		t.Error("the empty pattern is not off")
	}
	if p, _ := distname.Parse(distname.Default); p.Off() || p.String() != distname.Default {
		t.Errorf("the default pattern: off %v, string %q", p.Off(), p.String())
	}
	var zero distname.Pattern
	if _, ok := zero.Match("fdw 1"); ok {
		t.Error("the zero pattern matched")
	}
}

// expand writes the name pattern gives for pid, with fill for every
// text escape: what postgres_fdw sends.
func expand(pattern string, pid uint32, fill string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '%' || i+1 == len(pattern) {
			b.WriteByte(pattern[i])
			continue
		}
		i++
		switch pattern[i] {
		case 'p':
			fmt.Fprintf(&b, "%d", pid)
		case 'g':
			fmt.Fprintf(&b, "%d", 30_000_000_000+uint64(pid))
		case 'c':
			fmt.Fprintf(&b, "%x.%x", 0x65f1a2b3, pid)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteString(fill)
		}
	}
	return b.String()
}

// literals returns pattern without its escapes.
func literals(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '%' {
			i++
			continue
		}
		b.WriteByte(pattern[i])
	}
	return b.String()
}

// FuzzMatch: Parse and Match never panic; a match carries a pid other
// than 0; the name a valid pattern expands to matches; and when neither
// the pattern's text nor the fill can pass for a pid (no hex digit, no
// dot), it matches with the pid it was made with.
func FuzzMatch(f *testing.F) {
	f.Add("fdw %p", uint32(12345), "x", "fdw 12345")
	f.Add("citus_internal gpid=%g", uint32(7), "", "citus_internal gpid=10000000007")
	f.Add("%u@%d/%c", uint32(4242), "zz y", "u@d/1.ff")
	f.Add("100%% %a %p", uint32(1), "%p", "100% a 1")
	f.Add("%", uint32(0), "", "")
	f.Fuzz(func(t *testing.T, pattern string, pid uint32, fill, name string) {
		p, err := distname.Parse(pattern)
		if v, ok := p.Match(name); ok && v == 0 {
			t.Fatalf("Parse(%q).Match(%q) = 0, true", pattern, name)
		}
		if err != nil || p.Off() || pid == 0 {
			return
		}
		n := expand(pattern, pid, fill)
		if len(n) > distname.MaxName {
			return
		}
		v, ok := p.Match(n)
		if !ok {
			t.Fatalf("Parse(%q).Match(%q) (pid %d, fill %q) did not match", pattern, n, pid, fill)
		}
		if !strings.ContainsAny(literals(pattern)+fill, "0123456789abcdefABCDEF.%") && v != pid {
			t.Fatalf("Parse(%q).Match(%q) = %d, want %d", pattern, n, v, pid)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	p, err := distname.Parse(distname.Default)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := p.Match("fdw 123456"); !ok {
			b.Fatal("no match")
		}
	}
}

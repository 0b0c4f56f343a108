package distname

import (
	"errors"
	"fmt"
	"strings"
)

// Limits of Parse and Match, in bytes.
const (
	MaxPattern = 256
	MaxName    = 1024
)

// Default is the pattern of a new catalog: postgres_fdw with
// postgres_fdw.application_name = 'fdw %p'.
const Default = "fdw %p"

// gpidBase is Citus's multiplier of the node id in a global pid.
const gpidBase = 10_000_000_000

// kind is what one part of a pattern matches.
type kind uint8

const (
	literal  kind = iota
	pid           // %p: decimal pid
	session       // %c: hex start time, '.', hex pid
	gpid          // %g: decimal nodeid*10^10 + pid
	wildcard      // %a %u %d %C: any text
)

type part struct {
	kind kind
	text string // literal only
}

// Pattern is a parsed pattern. The zero value, like the empty pattern,
// matches nothing.
type Pattern struct {
	src   string
	parts []part
}

// Parse reads pattern s (see the package documentation).
func Parse(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, nil
	}
	if len(s) > MaxPattern {
		return Pattern{}, fmt.Errorf("pattern is %d bytes, at most %d", len(s), MaxPattern)
	}
	p := Pattern{src: s}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			p.parts = append(p.parts, part{kind: literal, text: lit.String()})
			lit.Reset()
		}
	}
	pids := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			lit.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return Pattern{}, errors.New("pattern ends with a lone %")
		}
		i++
		var k kind
		switch s[i] {
		case '%':
			lit.WriteByte('%')
			continue
		case 'p':
			k = pid
		case 'c':
			k = session
		case 'g':
			k = gpid
		case 'a', 'u', 'd', 'C':
			k = wildcard
		default:
			return Pattern{}, fmt.Errorf("unknown escape %%%c at byte %d (want %%p, %%c, %%g, %%a, %%u, %%d, %%C or %%%%)", s[i], i)
		}
		if k != wildcard {
			pids++
		}
		flush()
		p.parts = append(p.parts, part{kind: k})
	}
	flush()
	switch {
	case pids == 0:
		return Pattern{}, errors.New("pattern has no %p, %c or %g: it carries no process id")
	case pids > 1:
		return Pattern{}, errors.New("pattern has more than one of %p, %c and %g")
	}
	return p, nil
}

// String returns the pattern as Parse read it ("" when off).
func (p Pattern) String() string { return p.src }

// Off reports whether the pattern matches nothing (the empty pattern).
func (p Pattern) Off() bool { return len(p.parts) == 0 }

// Match reports whether name fits the pattern and returns the process id
// it carries (never 0).
func (p Pattern) Match(name string) (pid uint32, ok bool) {
	if p.Off() || len(name) > MaxName {
		return 0, false
	}
	m := matcher{parts: p.parts, name: name, failed: make(map[[2]int]bool)}
	return m.match(0, 0)
}

// matcher is one Match: failed memoises the (part, position) pairs that
// cannot lead to a match, so every pair is explored once.
type matcher struct {
	parts  []part
	name   string
	failed map[[2]int]bool
}

func (m *matcher) match(i, pos int) (uint32, bool) {
	if i == len(m.parts) {
		return 0, pos == len(m.name)
	}
	key := [2]int{i, pos}
	if m.failed[key] {
		return 0, false
	}
	rest := m.name[pos:]
	switch pt := m.parts[i]; pt.kind {
	case literal:
		if strings.HasPrefix(rest, pt.text) {
			if v, ok := m.match(i+1, pos+len(pt.text)); ok {
				return v, true
			}
		}
	case wildcard:
		for n := 0; n <= len(rest); n++ {
			if v, ok := m.match(i+1, pos+n); ok {
				return v, true
			}
		}
	case pid, gpid:
		// Try the longest run of digits first: a pid is followed by
		// something that is not a digit in every sane pattern.
		digits := 0
		for digits < len(rest) && digits < 20 && isDigit(rest[digits]) {
			digits++
		}
		for n := digits; n >= 1; n-- {
			v, ok := decimal(rest[:n], pt.kind == gpid)
			if !ok {
				continue
			}
			if _, ok := m.match(i+1, pos+n); ok {
				return v, true
			}
		}
	case session:
		// "%lx.%x": start time, a dot, pid, both lower-case hex.
		t := 0
		for t < len(rest) && t < 16 && isHex(rest[t]) {
			t++
		}
		if t == 0 || t == len(rest) || rest[t] != '.' {
			break
		}
		h := rest[t+1:]
		digits := 0
		for digits < len(h) && digits < 8 && isHex(h[digits]) {
			digits++
		}
		for n := digits; n >= 1; n-- {
			v := hexValue(h[:n])
			if v == 0 {
				continue
			}
			if _, ok := m.match(i+1, pos+t+1+n); ok {
				return v, true
			}
		}
	}
	m.failed[key] = true
	return 0, false
}

// decimal reads s (digits only): the pid itself, or for a Citus global
// pid, the value modulo 10^10. ok is false for 0 and for a pid that does
// not fit 32 bits.
func decimal(s string, global bool) (uint32, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		d := uint64(s[i] - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if global {
		v %= gpidBase
	}
	if v == 0 || v > 1<<32-1 {
		return 0, false
	}
	return uint32(v), true
}

func hexValue(s string) uint32 {
	var v uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case isDigit(c):
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			d = c - 'A' + 10
		}
		v = v<<4 | uint32(d)
	}
	return v
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }

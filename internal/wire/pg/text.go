package pg

import (
	"bytes"
	"unicode/utf8"
)

// cstring splits a NUL-terminated string off the front of b. ok is false
// when b holds no NUL (the string is longer than what was buffered, or the
// message is malformed); s is then all of b.
func cstring(b []byte) (s, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return b, nil, false
	}
	return b[:i], b[i+1:], true
}

// clip shortens b to at most n bytes without splitting a UTF-8 sequence
// (a cut sequence is dropped whole; invalid bytes are kept as they are).
func clip(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[:n]
	// Back off over a multi-byte sequence the cut left incomplete.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return b
}

// same returns old when it spells b, and a new string otherwise, so text
// that repeats (the same statement prepared again and again) costs no
// allocation.
func same(old string, b []byte) string {
	if old == string(b) {
		return old
	}
	return string(b)
}

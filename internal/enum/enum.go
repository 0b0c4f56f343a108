package enum

import (
	"fmt"
	"strings"
)

// Name returns names[v], or kind+"(v)" when v is outside names or its
// entry is empty (a value the enumeration leaves unnamed, such as a zero
// that means "unset").
func Name(names []string, v int, kind string) string {
	if v >= 0 && v < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// Index returns the index of the non-empty entry of names equal to s, and
// whether there is one. With fold, case and surrounding spaces in s are
// ignored; without it s must match exactly.
func Index(names []string, s string, fold bool) (int, bool) {
	if fold {
		s = strings.TrimSpace(s)
	}
	for i, name := range names {
		if name == "" {
			continue
		}
		if name == s || fold && strings.EqualFold(name, s) {
			return i, true
		}
	}
	return 0, false
}

package enum

import "testing"

var colours = []string{1: "red", 2: "green", 3: "Blue"}

func TestName(t *testing.T) {
	// 0 has an empty entry: it is unnamed.
	for v, want := range map[int]string{1: "red", 3: "Blue", 0: "colour(0)", 4: "colour(4)", -1: "colour(-1)"} {
		if got := Name(colours, v, "colour"); got != want {
			t.Errorf("Name(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestIndex(t *testing.T) {
	// The index each string finds, -1 for none; the empty entry is not a
	// name.
	exact := map[string]int{"red": 1, "Blue": 3, "blue": -1, " green ": -1, "": -1}
	folded := map[string]int{" GREEN ": 2, "blue": 3, "RED": 1, "": -1, "purple": -1}
	for fold, cases := range map[bool]map[string]int{false: exact, true: folded} {
		for s, want := range cases {
			got, ok := Index(colours, s, fold)
			if ok != (want >= 0) || ok && got != want {
				t.Errorf("Index(%q, %v) = %d, %v; want %d", s, fold, got, ok, want)
			}
		}
	}
}

package testenv

import (
	"os"
	"strings"
	"testing"
)

// ReadDoc returns the reference document at path, relative to the
// test's package (../../doc/console.md); a file that cannot be read
// fails t.
func ReadDoc(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// CheckDocumented fails t when doc does not write each of names as
// code: "`" + name + end (end "`" for a whole name, "" for code that
// begins with it). The error lists the missing names, in order, as
// "<where> does not document these <what>".
func CheckDocumented(t testing.TB, where, doc string, names []string, end, what string) {
	t.Helper()
	var missing []string
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+end) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s does not document these %s:\n  %s", where, what, strings.Join(missing, "\n  "))
	}
}

package testenv

import "testing"

// SkipShort skips t under go test -short, saying why it is left out
// (what it costs, as in "takes 3s here"), with "; runs without -short"
// after it.
func SkipShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why + "; runs without -short")
	}
}

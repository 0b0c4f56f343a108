package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestAdmittingBegin: an empty chunk is done with the held bytes, another
// chunk begins a walk, and after Fail every Begin is done with its error.
func TestAdmittingBegin(t *testing.T) {
	var a Admitting
	a.Walk.Begin([]byte("held"))
	a.Walk.Set(0, WalkHold)
	a.Walk.Result()
	if out, done, err := a.Begin(nil); !done || err != nil || !bytes.Equal(out, []byte("held")) {
		t.Fatalf("Begin(nil) = %q, %v, %v; want the held bytes, done", out, done, err)
	}
	if out, done, err := a.Begin([]byte("next")); done || err != nil || out != nil {
		t.Fatalf("Begin(chunk) = %q, %v, %v; want a walk begun", out, done, err)
	}
	a.Walk.Set(0, WalkPass)
	if got := a.Walk.Result(); !bytes.Equal(got, []byte("next")) {
		t.Fatalf("walked %q, want the chunk", got)
	}
	errTest := errors.New("test")
	if err := a.Fail(errTest); err != errTest {
		t.Fatalf("Fail returned %v", err)
	}
	for _, p := range [][]byte{nil, []byte("more")} {
		if out, done, err := a.Begin(p); !done || err != errTest || out != nil {
			t.Fatalf("Begin(%q) after Fail = %q, %v, %v; want done with the error", p, out, done, err)
		}
	}
}

package wire

import (
	"testing"

	"github.com/sluicelab/sluice/internal/session"
)

// TestAnswers queues three answers, the second after a request still in
// flight, and takes them as the readiness test allows, all at once and
// one at a time.
func TestAnswers(t *testing.T) {
	st := &session.Statement{}
	for _, all := range []bool{true, false} {
		var a Answers
		wakes := 0
		a.SetWake(func() { wakes++ })
		if a.Queued() || a.Next(func(*session.Statement) bool { return true }, all) != nil {
			t.Fatal("an empty queue has answers")
		}
		a.Add([]byte("a"), nil)
		a.Add([]byte("b"), st)
		a.Add([]byte("c"), nil)
		if !a.Queued() || wakes != 3 {
			t.Fatalf("after three Adds: queued %v, wakes %d", a.Queued(), wakes)
		}
		answered := false // whether st's request has its server answer
		ready := func(after *session.Statement) bool { return after == nil || answered }
		want := []string{"a", "", "b", "c"}
		if all {
			want = []string{"a", "", "bc", ""}
		}
		var got []string
		for i := range 4 {
			if i == 2 {
				answered = true
				before := wakes
				a.Check(ready)
				if wakes != before+1 {
					t.Errorf("all=%v: Check with the first answer ready did not wake", all)
				}
			}
			got = append(got, string(a.Next(ready, all)))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("all=%v: Next calls = %q, want %q", all, got, want)
				break
			}
		}
		if a.Queued() {
			t.Errorf("all=%v: answers left after every one was taken", all)
		}
	}
}

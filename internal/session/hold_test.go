package session

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeWait records what was done to a wait.
type fakeWait struct {
	ended    bool
	err      error
	demoted  int
	cancels  int
	refusals int
}

func (w *fakeWait) Cancel(err error) bool {
	w.cancels++
	if w.ended {
		w.refusals++
		return false
	}
	w.ended, w.err = true, err
	return true
}

func (w *fakeWait) Demote() bool { w.demoted++; return !w.ended }

func TestHoldAdmit(t *testing.T) {
	t0 := time.Unix(100, 0)
	sec := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	tests := []struct {
		name      string
		run       func(st *Statement, w *fakeWait)
		at        time.Time
		waiting   bool
		block     time.Duration
		execStart time.Time
	}{
		{
			name: "never held", run: func(*Statement, *fakeWait) {},
			at: sec(5), block: 0, execStart: t0,
		},
		{
			name: "waiting", run: func(st *Statement, w *fakeWait) { st.Hold(sec(1), w) },
			at: sec(4), waiting: true, block: 3 * time.Second,
		},
		{
			name: "admitted", run: func(st *Statement, w *fakeWait) { st.Hold(sec(1), w); st.Admit(sec(3.5)) },
			at: sec(9), block: 2500 * time.Millisecond, execStart: sec(3.5),
		},
		{
			name: "held twice keeps the first", run: func(st *Statement, w *fakeWait) { st.Hold(sec(1), w); st.Hold(sec(2), w); st.Admit(sec(3)) },
			at: sec(9), block: 2 * time.Second, execStart: sec(3),
		},
		{
			name: "admit without hold does nothing", run: func(st *Statement, _ *fakeWait) { st.Admit(sec(3)) },
			at: sec(9), block: 0, execStart: t0,
		},
		{
			name: "wait left", run: func(st *Statement, w *fakeWait) { st.Hold(sec(1), w); st.LeaveWait(sec(4)); st.LeaveWait(sec(5)) },
			at: sec(9), block: 3 * time.Second,
		},
		{
			name: "wait cancelled then left", run: func(st *Statement, w *fakeWait) {
				st.Hold(sec(1), w)
				st.CancelWait(errors.New("x"))
				st.LeaveWait(sec(2))
			},
			at: sec(9), block: time.Second,
		},
		{
			name: "left after admission does nothing", run: func(st *Statement, w *fakeWait) { st.Hold(sec(1), w); st.Admit(sec(2)); st.LeaveWait(sec(3)) },
			at: sec(9), block: time.Second, execStart: sec(2),
		},
		{
			name: "ended while held", run: func(st *Statement, w *fakeWait) { st.Hold(sec(1), w); st.End(sec(2), Failed, -1, "08006") },
			at: sec(9), block: time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(Options{})
			st := r.Open(Info{Route: "pg"}, t0).Begin("select 1", t0)
			w := &fakeWait{}
			tt.run(st, w)
			if got := st.Waiting(); got != tt.waiting {
				t.Errorf("Waiting = %v, want %v", got, tt.waiting)
			}
			if got := st.BlockTime(tt.at); got != tt.block {
				t.Errorf("BlockTime = %v, want %v", got, tt.block)
			}
			snap := st.Snapshot()
			if snap.Waiting != tt.waiting || snap.BlockTime(tt.at) != tt.block {
				t.Errorf("snapshot: waiting %v block %v, want %v %v", snap.Waiting, snap.BlockTime(tt.at), tt.waiting, tt.block)
			}
			if got := st.ExecStarted(); !got.Equal(tt.execStart) {
				t.Errorf("ExecStarted = %v, want %v", got, tt.execStart)
			}
			if got := snap.ExecStarted(); !got.Equal(tt.execStart) {
				t.Errorf("snapshot ExecStarted = %v, want %v", got, tt.execStart)
			}
		})
	}
}

// heldStatement opens a session of a new registry at 1 s and begins
// "select 1" in it, held from 2 s on the returned wait.
func heldStatement() (*Session, *Statement, *fakeWait) {
	s := NewRegistry(Options{}).Open(Info{Route: "pg"}, time.Unix(1, 0))
	st := s.Begin("select 1", time.Unix(1, 0))
	w := &fakeWait{}
	st.Hold(time.Unix(2, 0), w)
	return s, st, w
}

func TestEndCancelsWait(t *testing.T) {
	s, st, w := heldStatement()
	s.Close(time.Unix(3, 0))
	if !w.ended || !errors.Is(w.err, ErrEndedWhileWaiting) {
		t.Fatalf("wait after Close: ended %v err %v", w.ended, w.err)
	}
	if st.Waiting() {
		t.Error("an ended statement is still waiting")
	}
}

func TestCancelWait(t *testing.T) {
	r := NewRegistry(Options{})
	s := r.Open(Info{Route: "pg"}, time.Unix(1, 0))
	c := &fakeCanceler{}
	s.SetCanceler(c)
	st := s.Begin("select 1", time.Unix(1, 0))
	if st.CancelWait(errors.New("x")) {
		t.Fatal("CancelWait of a statement never held = true")
	}
	w := &fakeWait{}
	st.Hold(time.Unix(2, 0), w)

	// Registry.Cancel of a held statement ends the wait, sends nothing.
	if err := r.Cancel(context.Background(), st); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if c.n != 0 {
		t.Errorf("a held statement sent %d cancel requests to the server", c.n)
	}
	if !errors.Is(w.err, ErrCancelRequested) || !st.CancelRequested() || st.Waiting() {
		t.Errorf("after Cancel: wait err %v, requested %v, waiting %v", w.err, st.CancelRequested(), st.Waiting())
	}
	// Once the wait ended without admission, the server never saw the
	// statement: nothing to cancel.
	if err := r.Cancel(context.Background(), st); !errors.Is(err, ErrNotRunning) || c.n != 0 {
		t.Errorf("Cancel after the wait failed: %v, %d requests", err, c.n)
	}
	// Once admitted, a cancel goes to the server as before.
	st3 := s.Begin("select 3", time.Unix(1, 0))
	st3.Hold(time.Unix(2, 0), &fakeWait{})
	st3.Admit(time.Unix(3, 0))
	if err := r.Cancel(context.Background(), st3); err != nil || c.n != 1 {
		t.Errorf("Cancel of an admitted statement: %v, %d requests", err, c.n)
	}

	// A wait the waiter already left (admitted in the same instant)
	// reports false and stays as it is.
	st2 := s.Begin("select 2", time.Unix(1, 0))
	w2 := &fakeWait{ended: true}
	st2.Hold(time.Unix(2, 0), w2)
	if st2.CancelWait(errors.New("late")) {
		t.Error("CancelWait of a wait that had ended = true")
	}
}

func TestPenalizeDemotesWait(t *testing.T) {
	s, st, w := heldStatement()
	if !st.Penalize("rule") || w.demoted != 1 || !st.Penalized() {
		t.Fatalf("Penalize of a held statement: demoted %d, penalized %v", w.demoted, st.Penalized())
	}
	st.Admit(time.Unix(3, 0))
	st2 := s.Begin("select 2", time.Unix(1, 0))
	st2.Penalize("rule")
	if w.demoted != 1 {
		t.Error("Penalize of a statement not held demoted a wait")
	}
}

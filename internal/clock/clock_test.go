package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	f := NewFake(start)
	a := f.NewTimer(3 * time.Millisecond)
	b := f.NewTimer(1 * time.Millisecond)
	c := f.NewTimer(2 * time.Millisecond)
	c.Stop()
	f.Advance(2 * time.Millisecond)
	select {
	case got := <-b.C():
		if want := start.Add(time.Millisecond); !got.Equal(want) {
			t.Fatalf("b fired at %v, want %v", got, want)
		}
	default:
		t.Fatal("b did not fire")
	}
	select {
	case <-a.C():
		t.Fatal("a fired early")
	case <-c.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if f.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", f.Pending())
	}
	f.Advance(time.Millisecond)
	if got := <-a.C(); !got.Equal(start.Add(3 * time.Millisecond)) {
		t.Fatalf("a fired at %v", got)
	}
}

func TestSleepUntilVirtual(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan error)
	go func() { done <- Sleep(context.Background(), f, time.Second) }()
	f.BlockUntil(1)
	f.Advance(999 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("woke early")
	default:
	}
	f.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSleepCancelled(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, f, time.Hour); err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
}

func TestHighResTimer(t *testing.T) {
	var clk Clock = Real{}
	hr, ok := clk.(HighRes)
	if !ok {
		t.Fatal("Real is not HighRes")
	}
	start := time.Now()
	tm, release := hr.NewHighResTimer(2 * time.Millisecond)
	defer release()
	select {
	case <-tm.C():
		if el := time.Since(start); el < 2*time.Millisecond {
			t.Fatalf("fired after %v, before its 2ms", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("high-resolution timer never fired")
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported it armed")
	}
	if tm.Reset(time.Hour) {
		t.Fatal("Reset of a stopped timer reported it armed")
	}
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported it disarmed")
	}
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	case <-time.After(20 * time.Millisecond):
	}
	tm.Reset(0)
	select {
	case <-tm.C():
	case <-time.After(5 * time.Second):
		t.Fatal("Reset(0) did not fire")
	}
	release()
	release() // safe twice
}

// TestFromWall: a wall-clock reading lands on Real's time line, with a
// monotonic reading, as far before Now as it is old.
func TestFromWall(t *testing.T) {
	var c Real
	for _, age := range []time.Duration{0, 3 * time.Millisecond, 2 * time.Second, -time.Second} {
		before := c.Now()
		w := time.Now().Round(0).Add(-age)
		got := c.FromWall(w, c.Now())
		after := c.Now()
		if got.Round(0) == got {
			t.Fatalf("age %v: %v has no monotonic reading", age, got)
		}
		if got.Before(before.Add(-age)) || got.After(after.Add(-age)) {
			t.Fatalf("age %v: got %v, want between %v and %v", age, got, before.Add(-age), after.Add(-age))
		}
	}
}

package clock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFromMonotonic(t *testing.T) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	mono := uint64(ts.Nano())
	now := Real{}.Now()
	for _, c := range []struct {
		name string
		ns   uint64
		// The result lies in [now-age-slack, now-age]: the function reads
		// CLOCK_MONOTONIC after the test did.
		age time.Duration
	}{
		{"a second ago", mono - uint64(time.Second), time.Second},
		{"the test's reading", mono, 0},
		{"the future gives now", mono + uint64(time.Hour), 0},
	} {
		got := Real{}.FromMonotonic(c.ns, now)
		hi := now.Add(-c.age)
		lo := hi.Add(-time.Second)
		if got.After(hi) || got.Before(lo) {
			t.Errorf("%s: FromMonotonic = now%+v, want in [now%+v, now%+v]", c.name, got.Sub(now), lo.Sub(now), hi.Sub(now))
		}
	}
}

func TestReplay(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	r := NewReplay(f)
	at := time.Unix(50, 0)
	steps := []struct {
		name string
		do   func()
		want time.Time
	}{
		{"none set: the clock's", nil, time.Unix(100, 0)},
		{"the clock moves", func() { f.Advance(time.Second) }, time.Unix(101, 0)},
		{"set", func() { r.Set(at) }, at},
		{"set holds while the clock moves", func() { f.Advance(time.Second) }, at},
		{"zero: the clock's again", func() { r.Set(time.Time{}) }, time.Unix(102, 0)},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if got := r.Now(); !got.Equal(s.want) {
			t.Fatalf("%s: Now = %v, want %v", s.name, got, s.want)
		}
	}
}

package cpuset_test

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/cpuset"
)

func set(cpus ...int) cpuset.Set {
	var s cpuset.Set
	for _, c := range cpus {
		s.Set(c)
	}
	return s
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cpuset.Set
		fmt  string
	}{
		{"0", set(0), "0"},
		{"3", set(3), "3"},
		{"0-3", set(0, 1, 2, 3), "0-3"},
		{"0,2-3,7", set(0, 2, 3, 7), "0,2-3,7"},
		{"5,1", set(1, 5), "1,5"},
		{"1,1-2", set(1, 2), "1-2"},
		{"4-4", set(4), "4"},
		{"1023", set(1023), "1023"},
		{"007", set(7), "7"},
	} {
		got, err := cpuset.Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, cpuset.Format(got), cpuset.Format(tc.want))
		}
		if f := cpuset.Format(got); f != tc.fmt {
			t.Errorf("Format(Parse(%q)) = %q, want %q", tc.in, f, tc.fmt)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"", ",", "0,", "-1", "1-", "3-1", "a", "0x1", "1024", "0-1024", " 1", "1 ", "+1", "99999999999999999999999"} {
		_, err := cpuset.Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) accepted", in)
			continue
		}
		if !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("Parse(%q): error %q does not name the value", in, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "0-3", "0,2-3,7", "1023", "3-1", "", ",", "1-", "0-1024", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := cpuset.Parse(s)
		if err != nil {
			return
		}
		if got.Count() == 0 {
			t.Fatalf("Parse(%q) accepted an empty set", s)
		}
		back, err := cpuset.Parse(cpuset.Format(got))
		if err != nil || back != got {
			t.Fatalf("Format(Parse(%q)) = %q does not parse back: %v", s, cpuset.Format(got), err)
		}
	})
}

func TestLast(t *testing.T) {
	for _, tc := range []struct {
		s    cpuset.Set
		want int
	}{{set(), -1}, {set(0), 0}, {set(1, 5), 5}, {set(3, cpuset.Max), cpuset.Max}} {
		if got := cpuset.Last(tc.s); got != tc.want {
			t.Errorf("Last(%s) = %d, want %d", cpuset.Format(tc.s), got, tc.want)
		}
	}
}

func TestPinRefuses(t *testing.T) {
	allowed := set(0, 1)
	if err := cpuset.Pin(cpuset.Set{}, allowed); err == nil {
		t.Error("empty set accepted")
	}
	err := cpuset.Pin(set(1, 5, 6), allowed)
	if err == nil || !strings.Contains(err.Error(), "CPU 5-6 not available") || !strings.Contains(err.Error(), "0-1") {
		t.Errorf("Pin outside allowed: %v", err)
	}
}

// TestPinEveryThread pins the test process to one CPU on the real kernel,
// with threads blocked in system calls, then checks each thread's
// affinity, including a thread started after Pin, and restores it.
func TestPinEveryThread(t *testing.T) {
	allowed, err := cpuset.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cpuset.Pin(allowed, allowed); err != nil {
			t.Errorf("restore: %v", err)
		}
	}()
	one := set(cpuset.Last(allowed))
	// Threads held in blocking system calls, so the runtime has more
	// than the one running this test.
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	defer unix.Close(fds[0])
	var wg sync.WaitGroup
	read := func() {
		defer wg.Done()
		runtime.LockOSThread()
		var b [1]byte
		unix.Read(fds[0], b[:])
	}
	for range 3 {
		wg.Add(1)
		go read()
	}
	if err := cpuset.Pin(one, allowed); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	tid := make(chan int)
	go func() {
		runtime.LockOSThread()
		tid <- unix.Gettid()
		read()
	}()
	late := <-tid
	checked := 0
	tasks, err := cpuset.Threads()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tasks {
		var got cpuset.Set
		if err := unix.SchedGetaffinity(id, &got); err != nil {
			continue // exited
		}
		checked++
		if got != one {
			t.Errorf("thread %d runs on %s, want %s", id, cpuset.Format(got), cpuset.Format(one))
		}
	}
	if checked < 4 {
		t.Errorf("checked %d threads, want at least 4", checked)
	}
	var lateSet cpuset.Set
	if err := unix.SchedGetaffinity(late, &lateSet); err != nil || lateSet != one {
		t.Errorf("thread %d started after Pin runs on %s (%v), want %s", late, cpuset.Format(lateSet), err, cpuset.Format(one))
	}
	unix.Write(fds[1], []byte{1, 1, 1, 1})
	wg.Wait()
}

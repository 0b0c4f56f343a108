package cpuset

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Set is a set of CPUs numbered 0 to Max. The zero value is empty.
type Set = unix.CPUSet

// Max is the highest CPU number a Set holds: 1023, the bound of the
// affinity calls' fixed-size mask.
const Max = int(unsafe.Sizeof(Set{}))*8 - 1

// Parse reads a CPU list: comma-separated CPU numbers and inclusive
// ranges ("0", "0-3", "0,2-3"), without spaces. Numbers run from 0 to
// Max; a range must not run backwards; the list must name at least one
// CPU. The error names the value.
func Parse(s string) (Set, error) {
	var set Set
	bad := func(why string) (Set, error) {
		return Set{}, fmt.Errorf("bad CPU list %q: %s (want CPU numbers and ranges such as 0 or 0-3,6)", s, why)
	}
	if s == "" {
		return bad("empty")
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return bad(err.Error())
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return bad(err.Error())
			}
			if b < a {
				return bad(fmt.Sprintf("range %s runs backwards", part))
			}
		}
		for c := a; c <= b; c++ {
			set.Set(c)
		}
	}
	return set, nil
}

// cpuNumber reads one CPU number: decimal digits only, 0 to Max.
func cpuNumber(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > Max {
		return 0, fmt.Errorf("CPU %s is above %d", s, Max)
	}
	return n, nil
}

// Format writes set as a CPU list, ranges collapsed ("0-3,6"); the empty
// set is "".
func Format(set Set) string {
	var b strings.Builder
	for c := 0; c <= Max; c++ {
		if !set.IsSet(c) {
			continue
		}
		end := c
		for end < Max && set.IsSet(end+1) {
			end++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
		if end > c {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(end))
		}
		c = end
	}
	return b.String()
}

// Last returns the highest CPU in set, or -1 if set is empty.
func Last(set Set) int {
	for c := Max; c >= 0; c-- {
		if set.IsSet(c) {
			return c
		}
	}
	return -1
}

// Allowed returns the CPUs the calling thread may run on.
func Allowed() (Set, error) {
	var set Set
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return Set{}, fmt.Errorf("cpuset: sched_getaffinity: %w", err)
	}
	return set, nil
}

// Pin restricts every thread of the process to set. It refuses an empty
// set and one naming a CPU outside allowed (normally Allowed()), naming
// those CPUs, before changing anything. A thread that exits while Pin
// runs is skipped. Not safe to call concurrently with itself.
func Pin(set, allowed Set) error {
	if set.Count() == 0 {
		return errors.New("cpuset: no CPU to pin to")
	}
	var outside Set
	for i := range set {
		outside[i] = set[i] &^ allowed[i]
	}
	if outside.Count() > 0 {
		return fmt.Errorf("cpuset: CPU %s not available to this process (it may use %s)", Format(outside), Format(allowed))
	}
	done := map[int]bool{}
	for {
		tids, err := threads()
		if err != nil {
			return err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("cpuset: sched_setaffinity thread %d: %w", tid, err)
			}
			done[tid] = true
		}
		if fresh == 0 {
			return nil
		}
	}
}

// threads lists the process's thread IDs.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("cpuset: list threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

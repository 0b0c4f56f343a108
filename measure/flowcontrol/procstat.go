package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc CPU times; 100
// on every Linux port in use.
const clockTicks = 100

// cpuSample is the host's CPU time from /proc/stat, in clock ticks.
type cpuSample struct{ busy, total int64 }

// hostCPU reads the host's CPU counters; zero if they cannot be read.
func hostCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuSample{}
	}
	var s cpuSample
	for i, x := range f[1:] {
		v, _ := strconv.ParseInt(x, 10, 64)
		s.total += v
		if i != 3 && i != 4 { // idle, iowait
			s.busy += v
		}
	}
	return s
}

// since returns the host's busy share between s0 and s in percent of one
// core (200% is two cores busy), or 0 if nothing was counted.
func (s cpuSample) since(s0 cpuSample) float64 {
	busy, total := s.busy-s0.busy, s.total-s0.total
	if total <= 0 {
		return 0
	}
	n := numCPU()
	return 100 * float64(n) * float64(busy) / float64(total)
}

func numCPU() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 1
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return max(n, 1)
}

// procCPU returns the user plus system CPU time of process pid in
// seconds, 0 if it cannot be read.
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return float64(u+st) / clockTicks
}

// pidOf returns the process running the executable bin, 0 if none.
func pidOf(bin string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); exe == bin {
			return pid
		}
	}
	return 0
}

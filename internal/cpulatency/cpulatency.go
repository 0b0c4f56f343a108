package cpulatency

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"
)

// Device is the kernel's PM QoS CPU latency interface.
const Device = "/dev/cpu_dma_latency"

// Request is a held CPU latency request. Its methods are safe for
// concurrent use.
type Request struct {
	f    *os.File
	once sync.Once
	err  error // Close's result, set once
}

// Hold opens path (normally Device) and asks that no CPU's idle-state exit
// latency exceed bound, truncated to whole microseconds, until Close. A
// negative bound is an error; one above about 35 minutes is capped at the
// interface's largest bound.
func Hold(path string, bound time.Duration) (*Request, error) {
	if bound < 0 {
		return nil, fmt.Errorf("cpulatency: bound %v is negative", bound)
	}
	us := bound / time.Microsecond
	if us > math.MaxInt32 {
		us = math.MaxInt32
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("cpulatency: %w", err)
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(us))
	if _, err := f.Write(b[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpulatency: write %s: %w", path, err)
	}
	return &Request{f: f}, nil
}

// ParseBound reads a bound as written on a command line: a Go duration
// of 0 or more ("0s", "20us"). The error names the value.
func ParseBound(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad value %q (want a duration of 0 or more, such as 0s or 20us)", s)
	}
	return d, nil
}

// Close withdraws the request. Calls after the first return its result.
func (r *Request) Close() error {
	r.once.Do(func() { r.err = r.f.Close() })
	return r.err
}

// Current reads the bound in force on the machine from path (normally
// Device): the lowest any process holds, or the kernel's default (about
// 2,000 s, meaning none) when nobody holds one.
func Current(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("cpulatency: %w", err)
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return 0, fmt.Errorf("cpulatency: read %s: %w", path, err)
	}
	return time.Duration(int32(binary.NativeEndian.Uint32(b[:]))) * time.Microsecond, nil
}

package cpulatency_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/cpulatency"
	"github.com/sluicelab/sluice/internal/testenv"
)

func TestHoldWritesMicroseconds(t *testing.T) {
	for _, tc := range []struct {
		bound time.Duration
		want  uint32
	}{
		{0, 0},
		{1500 * time.Nanosecond, 1},
		{20 * time.Microsecond, 20},
		{time.Hour, 1<<31 - 1},
	} {
		path := filepath.Join(t.TempDir(), "dev")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := cpulatency.Hold(path, tc.bound)
		if err != nil {
			t.Fatalf("Hold(%v): %v", tc.bound, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 4 || binary.NativeEndian.Uint32(b) != tc.want {
			t.Errorf("Hold(%v) wrote %x, want the 32-bit %d", tc.bound, b, tc.want)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
}

func TestHoldRejects(t *testing.T) {
	if _, err := cpulatency.Hold(filepath.Join(t.TempDir(), "dev"), -time.Microsecond); err == nil {
		t.Error("negative bound accepted")
	}
	if _, err := cpulatency.Hold(filepath.Join(t.TempDir(), "absent", "dev"), 0); err == nil {
		t.Error("missing device accepted")
	}
}

// TestKernelHonoursRequest holds a request on the real device and reads
// back the bound in force, then checks that closing withdraws it.
func TestKernelHonoursRequest(t *testing.T) {
	before, err := cpulatency.Current(cpulatency.Device)
	if err != nil {
		testenv.Missing(t, "PM QoS device: %v", err)
	}
	r, err := cpulatency.Hold(cpulatency.Device, 7*time.Microsecond)
	if err != nil {
		testenv.Missing(t, "PM QoS device not writable: %v", err)
	}
	got, err := cpulatency.Current(cpulatency.Device)
	if err != nil {
		t.Fatal(err)
	}
	if want := min(before, 7*time.Microsecond); got != want {
		t.Errorf("bound in force while held = %v, want %v (was %v)", got, want, before)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := cpulatency.Current(cpulatency.Device)
	if err != nil {
		t.Fatal(err)
	}
	if before > 7*time.Microsecond && after != before {
		t.Errorf("bound after Close = %v, want %v again", after, before)
	}
}

func TestParseBound(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0s", 0, true},
		{"0", 0, true},
		{"20us", 20 * time.Microsecond, true},
		{"-1us", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	} {
		got, err := cpulatency.ParseBound(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBound(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
			t.Errorf("ParseBound(%q) error %q does not name the value", tc.in, err)
		}
	}
}

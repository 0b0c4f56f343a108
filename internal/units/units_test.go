package units

import (
	"math"
	"testing"
	"time"
)

// checkParse checks that parse reads each key of good as its value and
// refuses each of bad. Values are compared to within 1e-12, which is exact
// for the integer results.
func checkParse[T int64 | time.Duration | float64](t *testing.T, name string, parse func(string) (T, error), good map[string]T, bad ...string) {
	t.Helper()
	for in, want := range good {
		if got, err := parse(in); err != nil || math.Abs(float64(got)-float64(want)) > 1e-12 {
			t.Errorf("%s(%q) = %v, %v; want %v", name, in, got, err, want)
		}
	}
	for _, in := range bad {
		if got, err := parse(in); err == nil {
			t.Errorf("%s(%q) = %v, want an error", name, in, got)
		}
	}
}

func TestParse(t *testing.T) {
	checkParse(t, "ParseBytes", ParseBytes, map[string]int64{
		"0": 0, "1500": 1500, "64KiB": 64 << 10, "2MiB": 2 << 20, "2MB": 2e6,
		"1.5kB": 1500, "1Gbit": 125e6, " 10 MB ": 10e6, "1e3B": 1000,
	}, "10mb", "-1MB", "MB", "")
	checkParse(t, "ParseRate", ParseRate, map[string]int64{
		"100MB": 100e6, "100MB/s": 100e6, "1Gbit": 125e6, "100Mbps": 12.5e6, "256MB": 256e6,
	}, "fast")
	checkParse(t, "ParseDuration", ParseDuration, map[string]time.Duration{
		"10ms": 10 * time.Millisecond, "500us": 500 * time.Microsecond, "0.5ms": 500 * time.Microsecond,
		"1.5s": 1500 * time.Millisecond, "0": 0,
		"1 ms": time.Millisecond, " 20 ms ": 20 * time.Millisecond, "1.5 s": 1500 * time.Millisecond, "250 us": 250 * time.Microsecond,
	}, "10", "-1ms", "- 1 ms", "1 parsec")
	checkParse(t, "ParseBytes with a space", ParseBytes, map[string]int64{"20 MB": 20e6, "1 GiB": 1 << 30}, "20 parsecs")
	checkParse(t, "ParseRate with a space", ParseRate, map[string]int64{"1 Gbit": 125e6, "100 MB/s": 100e6}, "1 Gparsec")
	// tc netem's percentages: a bare number is a percent.
	checkParse(t, "ParsePercentage", ParsePercentage, map[string]float64{
		"1": 0.01, "1%": 0.01, "1 %": 0.01, "0.5%": 0.005, "100": 1, "0": 0, "25": 0.25,
	}, "101", "-1%", "x", "")
	checkParse(t, "ParsePercent", ParsePercent, map[string]float64{
		"0.1%": 0.001, "0.001": 0.001, "100%": 1,
	}, "101%", "x%")
}

func TestFormat(t *testing.T) {
	for i, c := range [][2]string{
		{FormatBytes(0), "0B"}, {FormatBytes(3 << 30), "3GiB"}, {FormatBytes(1500), "1.5kB"},
		{FormatBytes(1234567), "1.235MB"}, {FormatBytes(999), "999B"},
		{FormatRate(0), "unlimited"}, {FormatRate(256e6), "256MB/s"}, {FormatRate(1.25e9), "1.25GB/s"},
		{FormatRate(1500), "1.5kB/s"}, {FormatRate(999), "999B/s"},
	} {
		if c[0] != c[1] {
			t.Errorf("case %d: got %q, want %q", i, c[0], c[1])
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for _, b := range []int64{0, 1, 999, 1000, 1500, 64 << 10, 2 << 20, 2e6, 3 << 30, 1234567} {
		got, err := ParseBytes(FormatBytes(b))
		if err != nil {
			t.Fatalf("FormatBytes(%d) = %q does not parse: %v", b, FormatBytes(b), err)
		}
		if d := got - b; d > b/1000 || -d > b/1000 {
			t.Errorf("round trip of %d gave %d via %q", b, got, FormatBytes(b))
		}
	}
	for _, d := range []time.Duration{0, 500 * time.Microsecond, 10 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second} {
		got, err := ParseDuration(FormatDuration(d))
		if err != nil || got != d {
			t.Errorf("round trip of %v gave %v, %v via %q", d, got, err, FormatDuration(d))
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"10ms", "64KiB", "1Gbit", "0.1%", "1e", "-", ".", "1e-", "9999999999999999999TB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ParseBytes(s)
		ParseRate(s)
		ParseDuration(s)
		ParsePercent(s)
	})
}

package units

import (
	"testing"
	"time"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false},
		{"1500", 1500, false},
		{"64KiB", 64 << 10, false},
		{"2MiB", 2 << 20, false},
		{"2MB", 2e6, false},
		{"1.5kB", 1500, false},
		{"1Gbit", 125e6, false},
		{" 10 MB ", 10e6, false},
		{"10mb", 0, true},
		{"-1MB", 0, true},
		{"MB", 0, true},
		{"", 0, true},
		{"1e3B", 1000, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"100MB", 100e6, false},
		{"100MB/s", 100e6, false},
		{"1Gbit", 125e6, false},
		{"100Mbps", 12.5e6, false},
		{"256MB", 256e6, false},
		{"fast", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"10ms", 10 * time.Millisecond, false},
		{"500us", 500 * time.Microsecond, false},
		{"0.5ms", 500 * time.Microsecond, false},
		{"1.5s", 1500 * time.Millisecond, false},
		{"0", 0, false},
		{"10", 0, true},
		{"-1ms", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParsePercent(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  bool
	}{
		{"0.1%", 0.001, false},
		{"0.001", 0.001, false},
		{"100%", 1, false},
		{"101%", 0, true},
		{"x%", 0, true},
	}
	for _, tt := range tests {
		got, err := ParsePercent(tt.in)
		if (err != nil) != tt.err || (err == nil && (got-tt.want > 1e-12 || tt.want-got > 1e-12)) {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.err)
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

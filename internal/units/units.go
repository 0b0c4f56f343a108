package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"Tbit", 1e12 / 8}, {"Gbit", 1e9 / 8}, {"Mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"Kbit", 1e3 / 8}, {"bit", 1.0 / 8},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"KB", 1e3},
	{"B", 1},
}

// splitNumber splits "12.5MB" into 12.5 and "MB".
func splitNumber(s string) (float64, string, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || (i == 0 && (s[i] == '-' || s[i] == '+')) || s[i] == 'e' && i > 0 && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-')) {
		if s[i] == 'e' && i+1 < len(s) && s[i+1] == '-' {
			i++
		}
		i++
	}
	if i == 0 {
		return 0, "", fmt.Errorf("%q: expected a number", s)
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, "", fmt.Errorf("%q: bad number", s)
	}
	return v, strings.TrimSpace(s[i:]), nil
}

// ParseBytes parses a size such as "64KiB", "2MB" or "1500" into bytes.
func ParseBytes(s string) (int64, error) {
	v, unit, err := splitNumber(s)
	if err != nil {
		return 0, fmt.Errorf("size %w", err)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q: must not be negative", s)
	}
	mult := 1.0
	if unit != "" {
		found := false
		for _, u := range sizeUnits {
			if unit == u.suffix {
				mult, found = u.mult, true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("size %q: unknown unit %q (use B, kB, MB, GB, KiB, MiB, GiB, kbit, Mbit, Gbit)", s, unit)
		}
	}
	b := v * mult
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(math.Round(b)), nil
}

// ParseRate parses a rate such as "100MB", "100MB/s" or "1Gbit" into
// bytes per second.
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(t, "/s")
	if strings.HasSuffix(t, "bps") {
		t = strings.TrimSuffix(t, "ps") + "it"
	}
	b, err := ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	return b, nil
}

// ParseDuration parses "10ms", "500us", "1.5s", with or without a space
// before the unit ("1 ms"). A bare number other than 0 is an error.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	if v, unit, err := splitNumber(t); err == nil && unit != "" {
		t = strconv.FormatFloat(v, 'f', -1, 64) + unit
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number with a unit (us, ms, s)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q: must not be negative", s)
	}
	return d, nil
}

// ParsePercent parses "0.1%" (0.001) or a fraction "0.001". The result is
// in [0, 1].
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	t = strings.TrimSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("percentage %q: bad number", s)
	}
	if pct {
		v /= 100
	}
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("percentage %q: must be between 0%% and 100%%", s)
	}
	return v, nil
}

// ParsePercentage parses a percentage as tc netem reads one: "1", "1%"
// and "1 %" are all 0.01, "0.5%" is 0.005. The result is in [0, 1].
func ParsePercentage(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("percentage %q: bad number", s)
	}
	if v < 0 || v > 100 {
		return 0, fmt.Errorf("percentage %q: must be between 0 and 100", s)
	}
	return v / 100, nil
}

// FormatBytes writes b with the largest binary unit that divides it
// exactly, else in decimal units with up to three decimals.
func FormatBytes(b int64) string {
	switch {
	case b == 0:
		return "0B"
	case b%(1<<30) == 0:
		return strconv.FormatInt(b>>30, 10) + "GiB"
	case b%(1<<20) == 0:
		return strconv.FormatInt(b>>20, 10) + "MiB"
	case b%(1<<10) == 0:
		return strconv.FormatInt(b>>10, 10) + "KiB"
	}
	return formatDecimal(b, "B")
}

// FormatRate writes a bytes/s rate in decimal units ("100MB/s"); 0 is
// "unlimited".
func FormatRate(bps int64) string {
	if bps == 0 {
		return "unlimited"
	}
	return formatDecimal(bps, "B/s")
}

// formatDecimal writes v with the largest of the decimal prefixes G, M, k
// that keeps it at 1 or more (up to three decimals) before unit.
func formatDecimal(v int64, unit string) string {
	switch {
	case v >= 1e9:
		return trimFloat(float64(v)/1e9) + "G" + unit
	case v >= 1e6:
		return trimFloat(float64(v)/1e6) + "M" + unit
	case v >= 1e3:
		return trimFloat(float64(v)/1e3) + "k" + unit
	}
	return strconv.FormatInt(v, 10) + unit
}

// FormatDuration writes d in the largest of s, ms, us that keeps it short.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d >= time.Millisecond:
		return trimFloat(float64(d)/1e6) + "ms"
	}
	return trimFloat(float64(d)/1e3) + "us"
}

func trimFloat(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

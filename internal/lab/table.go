package lab

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// dash formats v with f, or "-" for 0 (not measured or not predicted).
func dash(v float64, f func(float64) string) string {
	if v == 0 {
		return "-"
	}
	return f(v)
}

func f3(v float64) string { return fmt.Sprintf("%.3f", v) }

func pct(v float64) string { return fmt.Sprintf("%+.1f%%", 100*v) }

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func joinRTTs(v []time.Duration) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmtNum(rttMs(x))
	}
	return strings.Join(s, ", ") + " ms"
}

// table is a table of formatted cells, printed as aligned text or as
// Markdown.
type table struct {
	head []string
	rows [][]string
}

// text writes the table with columns aligned: the first left, the rest
// right.
func (t table) text(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = len(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
}

// markdown writes the table in GitHub Markdown, right-aligning the
// columns whose cells all read as numbers.
func (t table) markdown(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.head, " | "))
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
		numeric := len(t.rows) > 0
		for _, r := range t.rows {
			if c := r[i]; c != "-" && (c == "" || !strings.ContainsAny(c[:1], "0123456789+-")) {
				numeric = false
			}
		}
		if numeric && i > 0 {
			sep[i] = "---:"
		}
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(sep, "|"))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func x2(v float64) string { return fmt.Sprintf("%.2fx", v) }

// fmtNum writes v with up to three decimals and no trailing zeros.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := fmt.Sprintf("%.3f", v)
	for len(s) > 1 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// plural writes "1 thread", "4 threads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fmtRTT writes an RTT in milliseconds: "0.3 ms".
func fmtRTT(d time.Duration) string { return fmtNum(rttMs(d)) + " ms" }

func rttMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mbps spells bytes/s as MB/s with one decimal.
func mbps(v float64) string { return f1(v / 1e6) }

// hours formats a duration in hours with sensible precision.
func hours(h float64) string {
	switch {
	case h >= 10:
		return fmt.Sprintf("%.0f", h)
	case h >= 0.1:
		return fmt.Sprintf("%.2f", h)
	}
	return fmt.Sprintf("%.4f", h)
}

package svg

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Default size of a chart, in pixels.
const (
	DefaultWidth  = 720
	DefaultHeight = 450
)

// Point is one data point, in the units of the axes.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	// Name is the legend text.
	Name string
	// Points are drawn in order, joined by straight segments; NaN and
	// infinite coordinates are skipped.
	Points []Point
	// Dashed draws the line dashed (a model beside a measurement, say).
	Dashed bool
	// Like, if above 0, draws the series in the colour and markers of
	// series number Like (from 1) of the chart, so that a model and its
	// measurement pair up; 0 (or out of range) gives it its own.
	Like int
}

// Guide is a horizontal reference line across the plot, such as a
// target.
type Guide struct {
	Y     float64
	Label string
}

// Chart is a line chart. The zero value renders an empty chart of the
// default size.
type Chart struct {
	Title  string
	XLabel string // x axis title, with its unit: "added RTT (ms)"
	YLabel string // y axis title, with its unit
	Series []Series
	Guides []Guide
	// Width and Height are the document size in pixels; 0 means
	// DefaultWidth and DefaultHeight.
	Width, Height int
	// ZeroX and ZeroY extend the axis range to include 0. ZeroY is
	// ignored with LogY.
	ZeroX, ZeroY bool
	// LogY makes the y axis logarithmic (base 10); points and guides
	// with y <= 0 are then skipped.
	LogY bool
}

// palette holds the series colours, reused in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// Layout, in pixels.
const (
	marginLeft   = 78
	marginRight  = 24
	marginTop    = 44
	marginBottom = 58
	legendRow    = 20
	fontSize     = 12
	charWidth    = 7 // average advance of a 12 px sans-serif character
	markerSize   = 4
)

// Render writes c as a standalone SVG document.
func (c *Chart) Render(w io.Writer) error {
	bw := bufio.NewWriter(w)
	c.render(bw)
	return bw.Flush()
}

// String returns the SVG document.
func (c *Chart) String() string {
	var b strings.Builder
	c.render(&b)
	return b.String()
}

type writer interface {
	io.Writer
	io.StringWriter
}

func (c *Chart) render(w writer) {
	width, height := c.Width, c.Height
	if width <= 0 {
		width = DefaultWidth
	}
	if height <= 0 {
		height = DefaultHeight
	}
	legend := c.legendLayout(width)
	top := marginTop + len(legend)*legendRow
	if len(legend) > 0 {
		top += 6
	}
	plot := box{x0: marginLeft, y0: float64(top), x1: float64(width - marginRight), y1: float64(height - marginBottom)}
	if plot.y1-plot.y0 < 40 {
		plot.y1 = plot.y0 + 40
	}
	xs, ys := c.ranges()
	xt := niceTicks(xs.lo, xs.hi, int(math.Max(3, (plot.x1-plot.x0)/90)))
	sx := scale{lo: xt.lo, hi: xt.hi, p0: plot.x0, p1: plot.x1}
	var yt ticks
	if c.LogY {
		yt = logTicks(ys.lo, ys.hi)
	} else {
		yt = niceTicks(ys.lo, ys.hi, int(math.Max(3, (plot.y1-plot.y0)/55)))
	}
	sy := scale{lo: yt.lo, hi: yt.hi, p0: plot.y1, p1: plot.y0, log: c.LogY}

	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="%d">`+"\n",
		width, height, width, height, fontSize)
	fmt.Fprintf(w, "<title>%s</title>\n", esc(c.Title))
	fmt.Fprintf(w, `<rect class="background" x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text class="title" x="%d" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", width/2, esc(c.Title))

	// Grid and axes.
	w.WriteString(`<g class="grid" stroke="#e5e5e5" stroke-width="1">` + "\n")
	for _, v := range xt.values {
		x := sx.at(v)
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(x), num(plot.y0), num(x), num(plot.y1))
	}
	for _, v := range yt.values {
		y := sy.at(v)
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(plot.x0), num(y), num(plot.x1), num(y))
	}
	w.WriteString("</g>\n")

	w.WriteString(`<g class="axis x">` + "\n")
	fmt.Fprintf(w, `<line class="line" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333" stroke-width="1.2"/>`+"\n", num(plot.x0), num(plot.y1), num(plot.x1), num(plot.y1))
	for _, v := range xt.values {
		x := sx.at(v)
		fmt.Fprintf(w, `<line class="tickmark" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>`+"\n", num(x), num(plot.y1), num(x), num(plot.y1+5))
		fmt.Fprintf(w, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(x), num(plot.y1+19), esc(xt.label(v)))
	}
	fmt.Fprintf(w, `<text class="label" x="%s" y="%s" text-anchor="middle" font-size="13">%s</text>`+"\n", num((plot.x0+plot.x1)/2), num(plot.y1+44), esc(c.XLabel))
	w.WriteString("</g>\n")

	w.WriteString(`<g class="axis y">` + "\n")
	fmt.Fprintf(w, `<line class="line" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333" stroke-width="1.2"/>`+"\n", num(plot.x0), num(plot.y0), num(plot.x0), num(plot.y1))
	for _, v := range yt.values {
		y := sy.at(v)
		fmt.Fprintf(w, `<line class="tickmark" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/>`+"\n", num(plot.x0-5), num(y), num(plot.x0), num(y))
		fmt.Fprintf(w, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`+"\n", num(plot.x0-8), num(y+4), esc(yt.label(v)))
	}
	cy := (plot.y0 + plot.y1) / 2
	fmt.Fprintf(w, `<text class="label" x="20" y="%s" text-anchor="middle" font-size="13" transform="rotate(-90 20 %s)">%s</text>`+"\n", num(cy), num(cy), esc(c.YLabel))
	w.WriteString("</g>\n")

	// Guides.
	for _, g := range c.Guides {
		if !c.usable(Point{0, g.Y}) || g.Y < yt.lo || g.Y > yt.hi {
			continue
		}
		y := sy.at(g.Y)
		fmt.Fprintf(w, `<g class="guide"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#888888" stroke-width="1" stroke-dasharray="2,3"/>`, num(plot.x0), num(y), num(plot.x1), num(y))
		fmt.Fprintf(w, `<text x="%s" y="%s" text-anchor="end" fill="#666666" font-size="11">%s</text></g>`+"\n", num(plot.x1-4), num(y-4), esc(g.Label))
	}

	// Series, clipped to the plot.
	fmt.Fprintf(w, `<clipPath id="plot"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`+"\n",
		num(plot.x0-markerSize-1), num(plot.y0-markerSize-1), num(plot.x1-plot.x0+2*markerSize+2), num(plot.y1-plot.y0+2*markerSize+2))
	for i, s := range c.Series {
		i := c.style(i)
		color := palette[i%len(palette)]
		fmt.Fprintf(w, `<g class="series" data-name="%s" clip-path="url(#plot)">`+"\n", esc(s.Name))
		var pts []string
		for _, p := range s.Points {
			if c.usable(p) {
				pts = append(pts, num(sx.at(p.X))+","+num(sy.at(p.Y)))
			}
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="7,4"`
		}
		fmt.Fprintf(w, `<polyline class="line" points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), color, dash)
		for _, p := range s.Points {
			if c.usable(p) {
				marker(w, i, sx.at(p.X), sy.at(p.Y), color)
			}
		}
		w.WriteString("</g>\n")
	}

	// Legend.
	if len(legend) > 0 {
		w.WriteString(`<g class="legend">` + "\n")
		for _, e := range slices.Concat(legend...) {
			s := c.Series[e.series]
			style := c.style(e.series)
			color := palette[style%len(palette)]
			dash := ""
			if s.Dashed {
				dash = ` stroke-dasharray="7,4"`
			}
			fmt.Fprintf(w, `<g class="entry"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`,
				num(e.x), num(e.y), num(e.x+28), num(e.y), color, dash)
			marker(w, style, e.x+14, e.y, color)
			fmt.Fprintf(w, `<text x="%s" y="%s">%s</text></g>`+"\n", num(e.x+34), num(e.y+4), esc(s.Name))
		}
		w.WriteString("</g>\n")
	}
	w.WriteString("</svg>\n")
}

// legendEntry places one series' legend entry.
type legendEntry struct {
	series int
	x, y   float64
}

// legendLayout places the legend entries in centred rows under the
// title; it returns one slice per row.
// style returns the index of the series whose colour and marker series
// i is drawn with: its Like's, or its own.
func (c *Chart) style(i int) int {
	if l := c.Series[i].Like; l > 0 && l <= len(c.Series) && l-1 != i {
		return l - 1
	}
	return i
}

func (c *Chart) legendLayout(width int) [][]legendEntry {
	var rows [][]legendEntry
	var row []legendEntry
	var widths []float64
	rowWidth := 0.0
	avail := float64(width - marginLeft - marginRight)
	for i, s := range c.Series {
		ew := float64(34+charWidth*len([]rune(s.Name))) + 18
		if len(row) > 0 && rowWidth+ew > avail {
			rows, widths = append(rows, row), append(widths, rowWidth)
			row, rowWidth = nil, 0
		}
		row = append(row, legendEntry{series: i, x: rowWidth})
		rowWidth += ew
	}
	if len(row) > 0 {
		rows, widths = append(rows, row), append(widths, rowWidth)
	}
	for r := range rows {
		x0 := float64(marginLeft) + (avail-widths[r]+18)/2
		for i := range rows[r] {
			rows[r][i].x += x0
			rows[r][i].y = float64(marginTop + r*legendRow)
		}
	}
	return rows
}

// marker draws series i's marker shape centred on x, y.
func marker(w writer, i int, x, y float64, color string) {
	const m = markerSize
	switch i % 4 {
	case 0:
		fmt.Fprintf(w, `<circle class="marker" cx="%s" cy="%s" r="%d" fill="%s"/>`, num(x), num(y), m, color)
	case 1:
		fmt.Fprintf(w, `<rect class="marker" x="%s" y="%s" width="%d" height="%d" fill="%s"/>`, num(x-m), num(y-m), 2*m, 2*m, color)
	case 2:
		fmt.Fprintf(w, `<polygon class="marker" points="%s,%s %s,%s %s,%s" fill="%s"/>`,
			num(x), num(y-m-1), num(x+m+1), num(y+m), num(x-m-1), num(y+m), color)
	default:
		fmt.Fprintf(w, `<polygon class="marker" points="%s,%s %s,%s %s,%s %s,%s" fill="%s"/>`,
			num(x), num(y-m-1), num(x+m+1), num(y), num(x), num(y+m+1), num(x-m-1), num(y), color)
	}
	w.WriteString("\n")
}

type box struct{ x0, y0, x1, y1 float64 }

// interval is a data range.
type interval struct{ lo, hi float64 }

// ranges returns the data range of each axis, with the zero options and
// the guides applied; an axis without data is [0, 1].
func (c *Chart) ranges() (x, y interval) {
	x = interval{math.Inf(1), math.Inf(-1)}
	y = x
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !c.usable(p) {
				continue
			}
			x.lo, x.hi = math.Min(x.lo, p.X), math.Max(x.hi, p.X)
			y.lo, y.hi = math.Min(y.lo, p.Y), math.Max(y.hi, p.Y)
		}
	}
	for _, g := range c.Guides {
		if c.usable(Point{0, g.Y}) && y.lo <= y.hi {
			y.lo, y.hi = math.Min(y.lo, g.Y), math.Max(y.hi, g.Y)
		}
	}
	fix := func(r interval, zero bool) interval {
		if r.lo > r.hi {
			return interval{0, 1}
		}
		if zero {
			r.lo, r.hi = math.Min(r.lo, 0), math.Max(r.hi, 0)
		}
		if r.lo == r.hi {
			d := math.Abs(r.lo) / 2
			if d == 0 {
				d = 1
			}
			r.lo, r.hi = r.lo-d, r.hi+d
			if zero && r.lo < 0 && r.hi > 0 && r.hi-d*2 >= 0 {
				r.lo = 0
			}
		}
		return r
	}
	if c.LogY {
		if y.lo > y.hi {
			return fix(x, c.ZeroX), interval{1, 10}
		}
		if y.lo == y.hi {
			y.lo, y.hi = y.lo/2, y.hi*2
		}
		return fix(x, c.ZeroX), y
	}
	return fix(x, c.ZeroX), fix(y, c.ZeroY)
}

// usable reports whether p can be drawn: finite, and y > 0 on a log axis.
func (c *Chart) usable(p Point) bool {
	return finite(p.X) && finite(p.Y) && (!c.LogY || p.Y > 0)
}

// ticks are the tick values of an axis and its (extended) range.
type ticks struct {
	lo, hi float64
	step   float64 // 0 on a log axis
	log    bool
	values []float64
}

// niceTicks covers [lo, hi] with about n ticks at a step of 1, 2, 2.5 or
// 5 times a power of ten; the range grows to whole steps.
func niceTicks(lo, hi float64, n int) ticks {
	if n < 2 {
		n = 2
	}
	span := hi - lo
	if !(span > 0) || !finite(span) {
		span = 1
	}
	raw := span / float64(n-1)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := p * 10
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	t := ticks{lo: math.Floor(lo/step+1e-9) * step, hi: math.Ceil(hi/step-1e-9) * step, step: step}
	if t.hi <= t.lo {
		t.hi = t.lo + step
	}
	for i := 0; ; i++ {
		v := t.lo + float64(i)*step
		if v > t.hi+step*1e-9 || i > 1000 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		t.values = append(t.values, v)
	}
	return t
}

// logTicks covers [lo, hi] (both > 0) with whole decades, adding 2 and 5
// times each power of ten when the range spans fewer than three decades.
func logTicks(lo, hi float64) ticks {
	e0, e1 := math.Floor(math.Log10(lo)+1e-9), math.Ceil(math.Log10(hi)-1e-9)
	if e1 <= e0 {
		e1 = e0 + 1
	}
	t := ticks{lo: math.Pow(10, e0), hi: math.Pow(10, e1), log: true}
	mults := []float64{1}
	if e1-e0 < 3 {
		mults = []float64{1, 2, 5}
	}
	for e := e0; e <= e1 && e-e0 < 400; e++ {
		for _, m := range mults {
			if v := m * math.Pow(10, e); v <= t.hi*(1+1e-9) {
				t.values = append(t.values, v)
			}
		}
	}
	return t
}

// label formats a tick value with at most as many decimals as the step
// needs, and no trailing zeros.
func (t ticks) label(v float64) string {
	if t.log {
		if v >= 1e6 || v < 1e-3 {
			return strconv.FormatFloat(v, 'g', 3, 64)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	dec := 0
	for s := t.step; dec < 6 && math.Abs(s-math.Round(s)) > 1e-9*math.Max(1, math.Abs(s)); s *= 10 {
		dec++
	}
	p := math.Pow(10, float64(dec))
	return strconv.FormatFloat(math.Round(v*p)/p, 'f', -1, 64)
}

// scale maps data values on [lo, hi] to pixels on [p0, p1], linearly or
// by their logarithm.
type scale struct {
	lo, hi, p0, p1 float64
	log            bool
}

func (s scale) at(v float64) float64 {
	lo, hi := s.lo, s.hi
	if s.log {
		v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
	}
	if hi == lo {
		return (s.p0 + s.p1) / 2
	}
	return s.p0 + (v-lo)/(hi-lo)*(s.p1-s.p0)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// num formats a pixel coordinate with at most two decimals.
func num(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

package svg

import (
	"encoding/xml"
	"github.com/sluicelab/sluice/internal/testenv"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

func parse(t *testing.T, doc string) *testenv.SVGNode {
	t.Helper()
	var root testenv.SVGNode
	if err := xml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatalf("not XML: %v\n%s", err, doc)
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("root element %v, want svg in the SVG namespace", root.XMLName)
	}
	return &root
}

func TestChartStructure(t *testing.T) {
	c := Chart{
		Title:  "TPS vs added RTT",
		XLabel: "added RTT (ms)",
		YLabel: "transactions per second",
		Series: []Series{
			{Name: "measured", Points: []Point{{0, 900}, {1, 45}, {5, 9.6}, {10, 4.9}}},
			{Name: "predicted", Points: []Point{{0, 900}, {1, 47}, {5, 9.8}, {10, 4.95}}, Dashed: true},
		},
		Guides: []Guide{{Y: 100, Label: "target"}},
		ZeroX:  true, ZeroY: true,
	}
	root := parse(t, c.String())
	if w, h := root.Attr("width"), root.Attr("height"); w != "720" || h != "450" {
		t.Errorf("size %sx%s, want the default 720x450", w, h)
	}
	for _, axis := range []string{"axis x", "axis y"} {
		g := root.Find(axis)
		if len(g) != 1 {
			t.Fatalf("%d %q groups, want 1", len(g), axis)
		}
		if len(g[0].Find("line")) != 1 {
			t.Errorf("%s: no axis line", axis)
		}
		ticks := g[0].Find("tick")
		if len(ticks) < 3 {
			t.Errorf("%s: %d tick labels, want at least 3", axis, len(ticks))
		}
		prev := math.Inf(-1)
		for _, tk := range ticks {
			v, err := strconv.ParseFloat(tk.Text, 64)
			if err != nil || v <= prev {
				t.Errorf("%s: tick labels %q not increasing numbers", axis, tk.Text)
			}
			prev = v
		}
	}
	labels := root.Find("label")
	if len(labels) != 2 || labels[0].Text != "added RTT (ms)" || labels[1].Text != "transactions per second" {
		t.Errorf("axis labels %v", root.Texts())
	}
	if x := root.Find("axis x")[0].Find("tick"); x[0].Text != "0" {
		t.Errorf("ZeroX: first x tick %q, want 0", x[0].Text)
	}
	series := root.Find("series")
	if len(series) != 2 {
		t.Fatalf("%d series groups, want 2", len(series))
	}
	for i, s := range series {
		if s.Attr("data-name") != c.Series[i].Name {
			t.Errorf("series %d named %q", i, s.Attr("data-name"))
		}
		lines := s.Find("line")
		if len(lines) != 1 || len(strings.Fields(lines[0].Attr("points"))) != 4 {
			t.Errorf("series %d: want one polyline of 4 points", i)
		}
		if m := s.Find("marker"); len(m) != 4 {
			t.Errorf("series %d: %d markers, want 4", i, len(m))
		}
	}
	if series[0].Find("line")[0].Attr("stroke-dasharray") != "" || series[1].Find("line")[0].Attr("stroke-dasharray") == "" {
		t.Error("only the second series should be dashed")
	}
	legend := root.Find("legend")
	if len(legend) != 1 {
		t.Fatalf("%d legends", len(legend))
	}
	if got := legend[0].Texts(); strings.Join(got, "|") != "measured|predicted" {
		t.Errorf("legend %q", got)
	}
	if g := root.Find("guide"); len(g) != 1 || g[0].Texts()[0] != "target" {
		t.Errorf("guide missing: %d", len(g))
	}
	if root.Find("title")[0].Text != c.Title {
		t.Error("title text missing")
	}
}

// Points must land inside the plot area: y grows downwards, so a larger
// value has a smaller y coordinate.
func TestChartGeometry(t *testing.T) {
	c := Chart{Series: []Series{{Name: "s", Points: []Point{{0, 1}, {10, 11}}}}}
	root := parse(t, c.String())
	pts := strings.Fields(root.Find("series")[0].Find("line")[0].Attr("points"))
	xy := func(s string) (float64, float64) {
		a, b, _ := strings.Cut(s, ",")
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		return x, y
	}
	x0, y0 := xy(pts[0])
	x1, y1 := xy(pts[1])
	if !(x1 > x0 && y1 < y0) {
		t.Errorf("points %v: want the second right of and above the first", pts)
	}
	for _, v := range []float64{x0, x1} {
		if v < marginLeft || v > DefaultWidth-marginRight {
			t.Errorf("x %v outside the plot", v)
		}
	}
	for _, v := range []float64{y0, y1} {
		if v < marginTop || v > DefaultHeight-marginBottom {
			t.Errorf("y %v outside the plot", v)
		}
	}
}

func TestChartOddData(t *testing.T) {
	tests := []struct {
		name  string
		chart Chart
		pts   []int // points per series
	}{
		{"empty", Chart{}, nil},
		{"no points", Chart{Series: []Series{{Name: "a"}}}, []int{0}},
		{"one point", Chart{Series: []Series{{Name: "a", Points: []Point{{3, 3}}}}}, []int{1}},
		{"flat", Chart{Series: []Series{{Name: "a", Points: []Point{{1, 0}, {2, 0}}}}}, []int{2}},
		{"NaN and Inf skipped", Chart{Series: []Series{{Name: "a", Points: []Point{{math.NaN(), 1}, {1, math.Inf(1)}, {2, 2}}}}}, []int{1}},
		{"escaped names", Chart{Title: `<b>&"x"`, XLabel: "a<b", Series: []Series{{Name: "c&d <e>", Points: []Point{{1, 1}}}}}, []int{1}},
		{"tiny values", Chart{Series: []Series{{Name: "a", Points: []Point{{0, 1e-7}, {1, 3e-7}}}}}, []int{2}},
		{"huge values", Chart{Series: []Series{{Name: "a", Points: []Point{{0, 1e12}, {1, 3e12}}}}}, []int{2}},
		{"negative", Chart{ZeroY: true, Series: []Series{{Name: "a", Points: []Point{{-5, -2}, {5, 7}}}}}, []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := parse(t, tt.chart.String())
			if len(root.Find("axis x")) != 1 || len(root.Find("axis y")) != 1 {
				t.Fatal("axes missing")
			}
			series := root.Find("series")
			if len(series) != len(tt.pts) {
				t.Fatalf("%d series, want %d", len(series), len(tt.pts))
			}
			for i, s := range series {
				if n := len(strings.Fields(s.Find("line")[0].Attr("points"))); n != tt.pts[i] {
					t.Errorf("series %d: %d points, want %d", i, n, tt.pts[i])
				}
			}
			if tt.name == "escaped names" {
				if root.Find("series")[0].Attr("data-name") != "c&d <e>" || root.Find("label")[0].Text != "a<b" {
					t.Error("text not round-tripped through escaping")
				}
			}
		})
	}
}

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		n      int
		want   string
	}{
		{0, 20, 8, "0 5 10 15 20"},
		{0, 20, 9, "0 2.5 5 7.5 10 12.5 15 17.5 20"},
		{0, 10, 5, "0 2.5 5 7.5 10"},
		{0, 1000, 6, "0 200 400 600 800 1000"},
		{0, 11.3, 6, "0 2.5 5 7.5 10 12.5"},
		{0.95, 1.13, 5, "0.95 1 1.05 1.1 1.15"},
		{3, 3, 5, "3 3.25"},
	}
	for _, tt := range tests {
		tk := niceTicks(tt.lo, tt.hi, tt.n)
		var got []string
		for _, v := range tk.values {
			got = append(got, tk.label(v))
		}
		if s := strings.Join(got, " "); s != tt.want {
			t.Errorf("niceTicks(%v, %v, %d) = %s, want %s", tt.lo, tt.hi, tt.n, s, tt.want)
		}
	}
}

func TestLogY(t *testing.T) {
	c := Chart{LogY: true, ZeroY: true, Series: []Series{{Name: "tps", Points: []Point{{0, 1000}, {1, 45}, {5, 0}, {10, 4.9}}}}}
	root := parse(t, c.String())
	var ticks []string
	for _, tk := range root.Find("axis y")[0].Find("tick") {
		ticks = append(ticks, tk.Text)
	}
	if got := strings.Join(ticks, " "); got != "1 10 100 1000" {
		t.Errorf("log ticks %q, want the decades 1 10 100 1000", got)
	}
	pts := strings.Fields(root.Find("series")[0].Find("line")[0].Attr("points"))
	if len(pts) != 3 {
		t.Errorf("%d points drawn, want 3 (y = 0 has no logarithm)", len(pts))
	}
	// Equal ratios are equal distances on a log axis.
	y := func(v float64) float64 {
		return scale{lo: 1, hi: 1000, p0: 400, p1: 100, log: true}.at(v)
	}
	if d1, d2 := y(1)-y(10), y(10)-y(100); math.Abs(d1-d2) > 1e-9 || math.Abs(d1-100) > 1e-9 {
		t.Errorf("decades %v and %v px apart, want 100 each", d1, d2)
	}
	narrow := logTicks(3, 40)
	var labels []string
	for _, v := range narrow.values {
		labels = append(labels, narrow.label(v))
	}
	if got := strings.Join(labels, " "); got != "1 2 5 10 20 50 100" {
		t.Errorf("narrow log ticks %q", got)
	}
}

func TestLegendWraps(t *testing.T) {
	var c Chart
	c.Width = 300
	for i := 0; i < 5; i++ {
		c.Series = append(c.Series, Series{Name: strings.Repeat("n", 12), Points: []Point{{float64(i), 1}}})
	}
	rows := c.legendLayout(c.Width)
	if len(rows) < 2 {
		t.Fatalf("%d legend rows for 5 long names in 300 px, want several", len(rows))
	}
	root := parse(t, c.String())
	if n := len(root.Find("entry")); n != 5 {
		t.Errorf("%d legend entries, want 5", n)
	}
}

func TestRenderDeterministic(t *testing.T) {
	c := Chart{Title: "t", Series: []Series{{Name: "a", Points: []Point{{0, 1}, {1, 2}}}}}
	var a, b strings.Builder
	if err := c.Render(&a); err != nil {
		t.Fatal(err)
	}
	if err := c.Render(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() || a.String() != c.String() {
		t.Error("renderings differ")
	}
}

func FuzzRender(f *testing.F) {
	f.Add("name", "label", 0.0, 1.0, 2.0, 3.0)
	f.Add("<&>\"'", "\x00\xff", math.NaN(), math.Inf(1), -1e300, 1e300)
	f.Add("", "", 0.0, 0.0, 0.0, 0.0)
	f.Fuzz(func(t *testing.T, name, label string, x0, y0, x1, y1 float64) {
		c := Chart{Title: label, XLabel: label, YLabel: name, ZeroY: true,
			Series: []Series{{Name: name, Points: []Point{{x0, y0}, {x1, y1}}}}, Guides: []Guide{{Y: y1, Label: label}}}
		var root testenv.SVGNode
		if err := xml.Unmarshal([]byte(c.String()), &root); err != nil {
			t.Fatalf("output is not XML: %v", err)
		}
	})
}

func BenchmarkRender(b *testing.B) {
	c := Chart{Title: "t", XLabel: "x", YLabel: "y"}
	for s := 0; s < 2; s++ {
		var pts []Point
		for i := 0; i < 10; i++ {
			pts = append(pts, Point{float64(i), float64(i * i * (s + 1))})
		}
		c.Series = append(c.Series, Series{Name: "s", Points: pts})
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Render(io.Discard)
	}
}

// TestLike checks that a series drawn like another takes its colour and
// markers, in the plot and in the legend, and that a Like out of range
// is ignored.
func TestLike(t *testing.T) {
	c := &Chart{Title: "t", XLabel: "x", YLabel: "y", Series: []Series{
		{Name: "a", Points: []Point{{0, 1}, {1, 2}}},
		{Name: "b", Points: []Point{{0, 2}, {1, 3}}},
		{Name: "a model", Like: 1, Dashed: true, Points: []Point{{0, 1.5}, {1, 2.5}}},
		{Name: "odd", Like: 9, Points: []Point{{0, 3}, {1, 1}}},
	}}
	root := parse(t, c.String())
	stroke := map[string]string{}
	markers := map[string]string{}
	for _, g := range root.Find("series") {
		m := g.Find("marker")[0]
		stroke[g.Attr("data-name")] = g.Find("line")[0].Attr("stroke")
		markers[g.Attr("data-name")] = m.XMLName.Local + " " + m.Attr("fill")
	}
	if stroke["a model"] != stroke["a"] || markers["a model"] != markers["a"] {
		t.Errorf("a model drawn %s/%s, a %s/%s", stroke["a model"], markers["a model"], stroke["a"], markers["a"])
	}
	if stroke["b"] == stroke["a"] || stroke["odd"] == stroke["a"] || stroke["odd"] == stroke["b"] {
		t.Errorf("strokes %v: b and odd should have their own", stroke)
	}
	legend := map[string]string{}
	for _, e := range root.Find("entry") {
		legend[e.Texts()[0]] = e.Find("marker")[0].XMLName.Local + " " + e.Find("marker")[0].Attr("fill")
	}
	if legend["a model"] != markers["a"] || legend["b"] != markers["b"] {
		t.Errorf("legend markers %v, series %v", legend, markers)
	}
}

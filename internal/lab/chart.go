package lab

import (
	"cmp"
	"slices"

	"github.com/sluicelab/sluice/internal/lab/svg"
)

// seriesOf is the series of rows' points (x(row), y(row)) in order of x,
// so that lines join neighbours.
func seriesOf[R any](name string, dashed bool, rows []R, x, y func(R) float64) svg.Series {
	s := svg.Series{Name: name, Dashed: dashed}
	for _, r := range rows {
		s.Points = append(s.Points, svg.Point{X: x(r), Y: y(r)})
	}
	slices.SortStableFunc(s.Points, func(a, b svg.Point) int { return cmp.Compare(a.X, b.X) })
	return s
}

// sweepChart draws the slowdown of rows against N, one series with
// network_control off and one with it on, and the off points' FIFO
// model over the elapsed time at N = 0, dashed.
func sweepChart[R sweepRow](c *svg.Chart, rows []R) *svg.Chart {
	model := svg.Series{Name: "off: FIFO model", Dashed: true}
	base := sweepAt(rows, "off", 0)
	for _, control := range []string{"off", "on"} {
		s := svg.Series{Name: "network_control " + control}
		for _, r := range rows {
			ctl, n, t, m := r.point()
			if ctl != control {
				continue
			}
			s.Points = append(s.Points, svg.Point{X: float64(n), Y: t.Slowdown})
			if control == "off" && base != nil && m > 0 {
				if _, _, b, _ := (*base).point(); b.ElapsedMs > 0 {
					model.Points = append(model.Points, svg.Point{X: float64(n), Y: m / b.ElapsedMs})
				}
			}
		}
		c.Series = append(c.Series, s)
	}
	if len(model.Points) > 0 {
		c.Series = append(c.Series, model)
	}
	return c
}

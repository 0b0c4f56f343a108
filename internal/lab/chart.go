package lab

import "github.com/sluicelab/sluice/internal/lab/svg"

// sortByX orders each series' points by x, so lines join neighbours.
func sortByX(ss ...*svg.Series) {
	for _, s := range ss {
		pts := s.Points
		for i := 1; i < len(pts); i++ {
			for j := i; j > 0 && pts[j].X < pts[j-1].X; j-- {
				pts[j], pts[j-1] = pts[j-1], pts[j]
			}
		}
	}
}

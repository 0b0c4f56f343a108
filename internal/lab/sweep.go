package lab

import (
	"fmt"
	"slices"
)

// sweepRow is a point of an off/on sweep (the flow-control and the
// cluster experiments): the measured job at N with network_control off
// or on.
type sweepRow interface {
	// point returns the setting ("off" or "on"), N, the job's times and,
	// with control off, the FIFO model's elapsed time in ms.
	point() (control string, n int, t PointTimes, modelMs float64)
}

func (r FlowRow) point() (string, int, PointTimes, float64) {
	return r.Control, r.N, r.PointTimes, r.ModelMs
}

func (r ClusterRow) point() (string, int, PointTimes, float64) {
	return r.Control, r.N, r.PointTimes, r.ModelMs
}

// sweepNs returns the Ns of rows, in order of first appearance.
func sweepNs[R sweepRow](rows []R) []int {
	var out []int
	for _, r := range rows {
		if _, n, _, _ := r.point(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// sweepAt returns the row of rows at control and n, or nil.
func sweepAt[R sweepRow](rows []R, control string, n int) *R {
	for i := range rows {
		if c, k, _, _ := rows[i].point(); c == control && k == n {
			return &rows[i]
		}
	}
	return nil
}

// sweepMaxN returns the largest N of rows, 0 for none.
func sweepMaxN[R sweepRow](rows []R) int {
	m := 0
	for _, r := range rows {
		_, n, _, _ := r.point()
		m = max(m, n)
	}
	return m
}

// sweepTable returns one row per N of rows, both settings side by side:
// N (its column named nHead), with control off the elapsed time, the
// FIFO model and the slowdown, with it on the elapsed time and the
// slowdown, then the cells more returns (one per name of moreHead) of
// the off and on points, either of which may be nil. A missing point's
// cells are "-".
func sweepTable[R sweepRow](rows []R, nHead string, moreHead []string, more func(off, on *R) []string) table {
	t := table{head: append([]string{nHead, "off: elapsed (ms)", "off: FIFO model (ms)", "off: slowdown", "on: elapsed (ms)", "on: slowdown"}, moreHead...)}
	for _, n := range sweepNs(rows) {
		off, on := sweepAt(rows, "off", n), sweepAt(rows, "on", n)
		cells := []string{fmt.Sprint(n), "-", "-", "-", "-", "-"}
		if off != nil {
			_, _, tm, model := (*off).point()
			cells[1], cells[2], cells[3] = f1(tm.ElapsedMs), f1(model), x2(tm.Slowdown)
		}
		if on != nil {
			_, _, tm, _ := (*on).point()
			cells[4], cells[5] = f1(tm.ElapsedMs), x2(tm.Slowdown)
		}
		t.rows = append(t.rows, append(cells, more(off, on)...))
	}
	return t
}

// mbpsCell formats a point's MB/s, "-" for no point.
func mbpsCell[R any](r *R, v func(*R) float64) string {
	if r == nil {
		return "-"
	}
	return f1(v(r))
}

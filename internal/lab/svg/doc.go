// Package svg draws the lab's line charts as standalone SVG 1.1
// documents, by hand, with no drawing library: a title, a legend, two
// axes with "nice" ticks (1, 2, 2.5 or 5 times a power of ten; decades
// on a logarithmic y axis, with 2 and 5 between them when the range is
// narrow), labelled grid lines, axis titles, and one polyline with
// markers per series. Optional horizontal guides mark thresholds such as
// a target.
//
// The output is deterministic: the same Chart renders to the same bytes,
// so charts can be compared and checked in tests. Elements carry class
// attributes that name their role (axis x, axis y, tick, label, series,
// legend, entry, guide) so a reader can find them without knowing the
// geometry. All text is escaped; names and labels may hold any string.
//
// Rendering never fails on odd data: a chart with no series or no points
// draws empty axes over the unit range; NaN and infinite values, and
// y <= 0 on a logarithmic axis, are skipped; a series whose points all
// coincide still gets a sensible range. Errors come only from the
// writer.
package svg

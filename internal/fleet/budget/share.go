package budget

import "sort"

// MaxMin divides budget (bytes/s) over wants by water filling: every
// want at or under the fair level gets what it asks, the others get the
// level, where the level is the largest that keeps the sum within
// budget. The result has one entry per want, in order; each is at most
// its want, and their sum is at most budget (equal to it when the wants
// add up to more). Negative wants count as 0; budget <= 0 gives zeros.
// Integer division leaves at most len(wants)-1 bytes/s unassigned.
func MaxMin(budget int64, wants []int64) []int64 {
	out := make([]int64, len(wants))
	if budget <= 0 || len(wants) == 0 {
		return out
	}
	idx := make([]int, len(wants))
	for i := range idx {
		idx[i] = i
	}
	want := func(i int) int64 { return max(wants[i], 0) }
	sort.SliceStable(idx, func(a, b int) bool { return want(idx[a]) < want(idx[b]) })
	left := budget
	for k, i := range idx {
		level := left / int64(len(idx)-k)
		g := min(want(i), level)
		out[i] = g
		left -= g
	}
	return out
}

// Fill is MaxMin with what is left over split equally over every entry
// (the remainder of the division to the first ones): the sum is exactly
// budget (for budget > 0 and at least one want), and an entry that asked
// for nothing still gets a share of an idle budget, so it can start
// sending before the next allocation.
func Fill(budget int64, wants []int64) []int64 {
	out := MaxMin(budget, wants)
	if budget <= 0 || len(out) == 0 {
		return out
	}
	left := budget
	for _, g := range out {
		left -= g
	}
	n := int64(len(out))
	for i := range out {
		out[i] += left / n
		if int64(i) < left%n {
			out[i]++
		}
	}
	return out
}

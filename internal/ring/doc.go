// Package ring keeps the last values of a stream in a buffer of fixed
// size: the recent statements, rule firings, audit entries and samples
// the workload manager's views show.
//
// It owns nothing but the buffer. Invariants: a Ring holds at most Size
// values, oldest first in All; Add never allocates once the buffer is
// full. It has no lock: its owner's lock guards it.
package ring

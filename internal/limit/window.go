package limit

import "time"

// FixedWindow is a fixed-window counter. Time is cut into windows of
// length w, aligned to the first time the counter sees; each window admits
// rate*w units. A reservation passes in the current window if it fits in
// what is left of it, otherwise at the start of the first later window
// with room. What a window leaves unused is lost. A reservation larger
// than rate*w passes alone at the start of an empty window and uses up as
// many following windows as it needs, so the long-run rate never exceeds
// the limit.
//
// Boundary problem: the count restarts at every window edge, so a stream
// that spends a window's allowance just before an edge and the next
// window's just after it passes up to 2*rate*w units in a moment: twice
// the limit over any interval of length w that straddles the edge. Within
// one window it bursts the whole allowance at once. When reservations do
// not divide rate*w evenly, the remainder of each window is lost and a
// backlogged stream gets less than the rate. LeakyBucket and TokenBucket
// do not have these properties.
//
// SetRate changes the limit to rate*w units per window; the units already
// counted in the current window (and any later ones) stay counted.
//
// The zero value is an unlimited counter with the default window. A
// FixedWindow is safe for concurrent use.
type FixedWindow struct{ core[window] }

// window is the FixedWindow policy: its length in ns, 0 means
// DefaultWindow.
type window int64

// NewFixedWindow returns a counter admitting rate*w units per window of
// length w. rate <= 0 means unlimited; w <= 0 means DefaultWindow.
func NewFixedWindow(rate int64, w time.Duration) *FixedWindow {
	return &FixedWindow{newCore(rate, window(w))}
}

// Window returns the window length.
func (f *FixedWindow) Window() time.Duration { return f.tick(int64(f.p), DefaultWindow) }

// anchor is the start of t's window: the backlog of a rate change is
// counted from there.
func (f window) anchor(t int64) int64 { return floorTo(t, orDefault(int64(f), DefaultWindow)) }

// planLocked works on the cursor as a position in time: window k owns the
// offsets [k*w, (k+1)*w), and each unit moves the cursor by 1/rate s, so a
// window is full when the cursor reaches its end.
func (f window) planLocked(m *meter, t int64, n int, commit bool) int64 {
	w := orDefault(int64(f), DefaultWindow)
	s, rem := m.cur, m.rem
	if ws := floorTo(t, w); s < ws {
		s, rem = ws, 0 // a fresh window: its whole allowance is free
	}
	js := floorTo(s, w)
	e, erem := advance(s, rem, n, m.rate)
	fits := e < js+w || (e == js+w && erem == 0)
	empty := s == js && rem == 0
	if !fits && !empty {
		js = satAdd(js, uint64(w))
		e, erem = advance(js, 0, n, m.rate)
	}
	if commit {
		m.cur, m.rem = e, erem
	}
	return js
}

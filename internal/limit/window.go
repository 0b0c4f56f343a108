package limit

import "time"

// DefaultWindow is the window of a FixedWindow whose window is not set.
const DefaultWindow = time.Second

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
// The zero value is an unlimited counter with the default window. A
// FixedWindow is safe for concurrent use.
type FixedWindow struct {
	meter
	w int64 // guarded by mu; window in ns, 0 means DefaultWindow
}

// NewFixedWindow returns a counter admitting rate*window units per window.
// rate <= 0 means unlimited; window <= 0 means DefaultWindow.
func NewFixedWindow(rate int64, window time.Duration) *FixedWindow {
	f := &FixedWindow{w: int64(window)}
	f.setRate(rate, 0)
	return f
}

// Window returns the window length.
func (f *FixedWindow) Window() time.Duration { return f.tick(f.w, DefaultWindow) }

// Reserve commits n units at now and returns when they may pass.
func (f *FixedWindow) Reserve(now time.Time, n int) time.Time { return f.plan(f, now, n, true) }

// Next returns when n units reserved at now would pass, committing
// nothing.
func (f *FixedWindow) Next(now time.Time, n int) time.Time { return f.plan(f, now, n, false) }

// SetRate changes the limit to rate*w units per window from now on. The
// units already counted in the current window (and any later ones) stay
// counted. rate <= 0 means unlimited.
func (f *FixedWindow) SetRate(now time.Time, rate int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.offset(now)
	f.setRate(rate, floorTo(t, orDefault(f.w, DefaultWindow)))
}

// planLocked works on the cursor as a position in time: window k owns the
// offsets [k*w, (k+1)*w), and each unit moves the cursor by 1/rate s, so a
// window is full when the cursor reaches its end.
func (f *FixedWindow) planLocked(now time.Time, n int, commit bool) time.Time {
	if f.rate == 0 {
		return now
	}
	w := orDefault(f.w, DefaultWindow)
	t := f.offset(now)
	s, rem := f.cur, f.rem
	if ws := floorTo(t, w); s < ws {
		s, rem = ws, 0 // a fresh window: its whole allowance is free
	}
	js := floorTo(s, w)
	e, erem := advance(s, rem, n, f.rate)
	fits := e < js+w || (e == js+w && erem == 0)
	empty := s == js && rem == 0
	if !fits && !empty {
		js = satAdd(js, uint64(w))
		e, erem = advance(js, 0, n, f.rate)
	}
	if commit {
		f.cur, f.rem = e, erem
	}
	return f.timeAt(now, t, js)
}

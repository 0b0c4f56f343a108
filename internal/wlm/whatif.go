package wlm

import (
	"time"

	"github.com/sluicelab/sluice/internal/whatif"
)

// WhatIfSource is the live round-trip aggregation of the sessions
// (*whatif.Table, which the stack owns and its front ends feed). It must
// be safe for concurrent use.
type WhatIfSource interface {
	Snapshot(now time.Time) []whatif.App
	Window() time.Duration
}

type whatIfHolder struct{ src WhatIfSource }

// SetWhatIf makes src the source of SHOW WHATIF, the whatif view, GET
// /api/whatif and the whatif metrics; nil removes it (they are then
// empty).
func (m *Manager) SetWhatIf(src WhatIfSource) {
	if src == nil {
		m.whatIf.Store(nil)
		return
	}
	m.whatIf.Store(&whatIfHolder{src})
}

// WhatIf returns the applications of the what-if source over its window
// ending now, and the window; none and 0 without a source.
func (m *Manager) WhatIf() ([]whatif.App, time.Duration) {
	h := m.whatIf.Load()
	if h == nil {
		return nil, 0
	}
	return h.src.Snapshot(m.clk.Now()), h.src.Window()
}

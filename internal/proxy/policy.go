package proxy

import (
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
)

// Binding is how one session's traffic is treated: which pool it belongs
// to, its class on the link, the link it shares, and the path emulation
// of each direction.
type Binding struct {
	Pool  string
	Class link.Class
	Link  *link.Link // nil means the server's own unlimited link
	Up    netem.Params
	Down  netem.Params
}

// Policy binds sessions. The workload manager implements it.
type Policy interface {
	// Bind returns the binding for a session of user on route.
	Bind(route, user string) Binding
	// Version changes whenever a Bind result may have changed. Live
	// sessions compare it on every chunk, so it must be one atomic load.
	Version() uint64
}

// staticPolicy binds everything to the server's default link at normal
// priority with no emulation.
type staticPolicy struct{}

func (staticPolicy) Bind(route, user string) Binding { return Binding{Class: link.Normal} }
func (staticPolicy) Version() uint64                 { return 0 }

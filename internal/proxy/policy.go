package proxy

import (
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/wlm"
)

// Policy binds sessions. The workload manager's binding runtime (*wlm.Runtime) implements it.
type Policy interface {
	// Bind returns the binding for a session of user on route.
	Bind(route, user string) wlm.Binding
	// Version changes whenever a Bind result may have changed. Live
	// sessions compare it on every chunk, so it must be one atomic load.
	Version() uint64
}

// staticPolicy binds everything to the server's default link at normal
// priority with no emulation.
type staticPolicy struct{}

func (staticPolicy) Bind(route, user string) wlm.Binding { return wlm.Binding{Class: link.Normal} }
func (staticPolicy) Version() uint64                     { return 0 }

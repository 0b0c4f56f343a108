package wlm

import (
	"github.com/sluicelab/sluice/internal/distname"
	"github.com/sluicelab/sluice/internal/session"
)

// distPattern is the parsed distributed_application_name of one
// catalog generation's text.
type distPattern struct {
	text string
	p    distname.Pattern
}

// Coordinator returns the open session whose upstream backend a shard
// connection named app works for: app matches the setting
// distributed_application_name, and the process id it carries is the
// backend pid of exactly one open session's cancel key
// (session.Registry.ByBackendPID), on any route of this instance. nil
// when the setting is empty (off), app does not match, or no single session
// has that pid. It parses the setting once per value and allocates only
// while matching; it is safe for concurrent use.
func (m *Runtime) Coordinator(app string) *session.Session {
	text := m.state.Load().cat.Settings.DistributedApplicationName
	if text == "" {
		return nil
	}
	c := m.dist.Load()
	if c == nil || c.text != text {
		p, err := distname.Parse(text)
		if err != nil {
			return nil // the catalog validates it: not reached
		}
		c = &distPattern{text: text, p: p}
		m.dist.Store(c)
	}
	pid, ok := c.p.Match(app)
	if !ok {
		return nil
	}
	return m.reg.ByBackendPID(pid)
}

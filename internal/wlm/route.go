package wlm

import (
	"maps"
	"strings"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// alterRoute runs ALTER ROUTE: it changes the link, the default pool or
// the path emulation options of a route the configuration made, as
// SetRoute would with the changed Route, so every session of the route
// re-binds on its next chunk. Errors: 42704 for an unknown route, link
// or pool, 22023 naming a bad option, 0A000 when the change makes an
// abort rule reachable while a route cannot cancel. The next SetRoute of
// the route (a configuration reload) replaces what it changed.
func (m *core) alterRoute(s *ddl.AlterRoute) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return errClosed
	}
	cur, ok := m.state.Load().routes[s.Name.Name]
	if !ok {
		return ddl.Errorf(sqlstate.UndefinedObject, s.Name.Pos, "route %q does not exist", s.Name.Name)
	}
	r := cur.Route
	r.Emulation = maps.Clone(r.Emulation)
	cat := m.state.Load().cat
	for _, o := range s.Options {
		switch o.Name {
		case "link", "pool":
			name := objectName(o.Value)
			if o.Name == "link" {
				if name != "" && cat.Links[name] == nil {
					return ddl.Errorf(sqlstate.UndefinedObject, o.Value.Pos, "link %q does not exist", name)
				}
				r.Link = name
				continue
			}
			if name != "" && cat.Pools[name] == nil {
				return ddl.Errorf(sqlstate.UndefinedObject, o.Value.Pos, "resource pool %q does not exist", name)
			}
			r.Pool = name
			continue
		}
		if err := catalog.CheckRouteEmulation(o); err != nil {
			return err
		}
		for k := range r.Emulation {
			if strings.EqualFold(strings.TrimSpace(k), o.Name) {
				delete(r.Emulation, k)
			}
		}
		if o.Value.Kind != ddl.Default {
			if r.Emulation == nil {
				r.Emulation = map[string]string{}
			}
			r.Emulation[o.Name] = o.Value.Text
		}
	}
	return m.setRouteLocked(s.Name.Name, r, true)
}

// objectName reads the value of a link or pool option as the console
// reads names: a bare word folded to lower case, a string kept as
// written; DEFAULT (and for a pool, default_pool or none) is "".
func objectName(v ddl.Value) string {
	if v.Kind == ddl.Default {
		return ""
	}
	name := strings.TrimSpace(v.Text)
	if v.Kind != ddl.String {
		name = strings.ToLower(name)
	}
	return name
}

package wlm

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// This file gathers the inputs of package views (one catalog
// generation, the registry's sessions and statements, the time) and
// answers SHOW and SELECT with its tables.

// result makes a view the Result of a statement tagged tag, or of a
// SELECT ("SELECT n") when tag is "".
func result(t views.Table, tag string) Result {
	if tag == "" {
		tag = "SELECT " + strconv.Itoa(len(t.Rows))
	}
	return Result{Tag: tag, Columns: t.Columns, Rows: t.Rows}
}

// viewRoutes returns the routes as the views show them, by name.
func (st *state) viewRoutes() []views.Route {
	out := make([]views.Route, 0, len(st.routes))
	for _, name := range catalog.SortedKeys(st.routes) {
		r := st.routes[name]
		out = append(out, views.Route{Name: name, Protocol: r.Protocol, Link: r.linkName(), Pool: r.Pool, CanCancel: r.CanCancel, Emulation: r.em})
	}
	return out
}

// RoutesByLink returns the names of the routes by the link they attach
// to, each list in order.
func (m *Manager) RoutesByLink() map[string][]string {
	return views.RoutesByLink(m.state.Load().viewRoutes())
}

func (m *Manager) show(s *ddl.Show) (Result, error) {
	now := m.clk.Now()
	st := m.state.Load()
	var t views.Table
	switch s.Name {
	case "sessions":
		t = views.Sessions(m.reg.Sessions())
	case "statements":
		t = views.Statements(st.cat, m.statements(now, true, true), now)
	case "pools":
		t = views.Pools(st.cat, m.reg.Sessions())
	case "rules":
		t = views.Rules(st.cat, m.Stats().RuleFirings)
	case "links":
		t = views.Links(st.cat, st.viewRoutes(), st.links)
	case "users":
		t = views.Users(st.cat, m.reg.Sessions())
	case "routes":
		t = views.Routes(st.viewRoutes())
	case "audit":
		t = views.Audit(m.audit.Entries())
	case "all":
		t = views.Settings(st.cat)
	default:
		v, ok := st.cat.Settings.Show(s.Name)
		if !ok {
			e := ddl.Errorf(ddl.CodeUndefinedObject, s.NamePos, "unrecognized configuration parameter %q", s.Name)
			e.Hint = "SHOW takes a setting (" + strings.Join(catalog.SettingNames(), ", ") + ") or one of " + strings.ToUpper(strings.Join(views.Lists, ", ")) + "."
			return Result{}, e
		}
		t = views.Table{Columns: []string{s.Name}, Rows: [][]string{{v}}}
	}
	return result(t, "SHOW"), nil
}

// statements returns the running statements, oldest first, then the
// recently ended ones, newest first, with the evaluator's bandwidth.
func (m *Manager) statements(now time.Time, running, ended bool) []views.Statement {
	var out []views.Statement
	add := func(s *session.Statement) {
		snap := s.Snapshot()
		out = append(out, views.Statement{Session: s.Session, Snapshot: snap, Bandwidth: m.eval.statementBandwidth(s, &snap, now)})
	}
	if running {
		for _, s := range m.reg.Active() {
			add(s)
		}
	}
	if ended {
		recent := m.reg.Recent()
		for i := len(recent) - 1; i >= 0; i-- {
			add(recent[i])
		}
	}
	return out
}

func (m *Manager) selectRows(s *ddl.Select) (Result, error) {
	now := m.clk.Now()
	st := m.state.Load()
	if s.From == "" {
		t, err := views.Values(st.cat, s, m.versionString())
		if err != nil {
			return Result{}, err
		}
		return result(t, ""), nil
	}
	var t views.Table
	switch s.From {
	case "pg_session_wlmstat":
		t = views.SessionWlmstat(st.cat, m.reg.Sessions(), now)
	case "gs_wlm_session_statistics":
		t = views.SessionStatistics(st.cat, m.statements(now, true, false), now)
	case "gs_wlm_session_history":
		t = views.SessionStatistics(st.cat, m.statements(now, false, true), now)
	case "audit":
		t = views.Audit(m.audit.Entries())
	default:
		code := ddl.CodeUndefinedTable
		if strings.HasPrefix(s.From, "pg_") || s.Schema == "information_schema" {
			code = ddl.CodeNotSupported
		}
		e := ddl.Errorf(code, s.FromPos, "relation %q is not available in the sluice admin console", s.From)
		e.Hint = "Views: " + strings.Join(views.Names, ", ") + "; and SHOW " + strings.ToUpper(strings.Join(views.Lists, " | ")) + "."
		return Result{}, e
	}
	out, err := views.Project(t, s)
	if err != nil {
		return Result{}, err
	}
	return result(out, ""), nil
}

func (m *Manager) versionString() string {
	v := m.version0
	if v == "" {
		v = "dev"
	}
	return fmt.Sprintf("sluice %s admin console (PostgreSQL protocol 3.0)", v)
}

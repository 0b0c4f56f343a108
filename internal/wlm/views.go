package wlm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
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

// reading is one consistent reading of what the views show: one
// catalog generation, the sessions and statements read once, one time.
// Statements are read on first use.
type reading struct {
	m        *Manager
	now      time.Time
	st       *state
	sessions []*session.Session
	running  []views.Statement
	ended    []views.Statement
	read     bool // running and ended are read
}

func (m *Manager) reading() *reading {
	return &reading{m: m, now: m.clk.Now(), st: m.state.Load(), sessions: m.reg.Sessions()}
}

func (r *reading) statements() {
	if !r.read {
		r.running, r.ended = r.m.statements(r.now, true, false), r.m.statements(r.now, false, true)
		r.read = true
	}
}

// table returns the view called name (views.Names), or false.
func (r *reading) table(name string) (views.Table, bool) {
	cat := r.st.cat
	switch name {
	case "sessions":
		return views.Sessions(r.sessions, r.now), true
	case "statements":
		r.statements()
		return views.Statements(cat, append(r.running[:len(r.running):len(r.running)], r.ended...), r.now), true
	case "pools":
		return views.Pools(cat, r.sessions, r.m.admissionCounts()), true
	case "rules":
		return views.Rules(cat, r.m.Stats().RuleFirings), true
	case "links":
		return views.Links(cat, r.st.viewRoutes(), r.st.links), true
	case "users":
		return views.Users(cat, r.sessions), true
	case "routes":
		return views.Routes(r.st.viewRoutes()), true
	case "settings":
		return views.Settings(cat), true
	case "audit":
		return views.Audit(r.m.audit.Entries()), true
	case "firings":
		return views.Firings(r.m.firings.Entries()), true
	case "budget":
		st, _ := r.m.BudgetView()
		return views.Budget(st), true
	case "whatif":
		apps, _ := r.m.WhatIf()
		return views.WhatIf(apps, whatif.DefaultRTTs), true
	case "pg_session_wlmstat":
		return views.SessionWlmstat(cat, r.sessions, r.now), true
	case "gs_wlm_session_statistics":
		r.statements()
		return views.SessionStatistics(cat, r.running, r.now), true
	case "gs_wlm_session_history":
		r.statements()
		return views.SessionStatistics(cat, r.ended, r.now), true
	case "pg_resource_pool":
		return views.ResourcePool(cat), true
	case "gs_respool_exception_info":
		return views.RespoolExceptionInfo(cat), true
	case "pg_total_user_resource_info":
		r.statements()
		return views.TotalUserResourceInfo(cat, r.sessions, r.running), true
	}
	return views.Table{}, false
}

// SetBudgetView makes fn the source of SHOW BUDGET and of the budget
// metrics: the fleet's shared low-priority budget calls it when it
// starts. fn must be safe for concurrent use; nil removes it.
func (m *Manager) SetBudgetView(fn func() views.BudgetState) {
	if fn == nil {
		m.budgetView.Store(nil)
		return
	}
	m.budgetView.Store(&fn)
}

// BudgetView returns the shared budget's state; false without one (no
// fleet), with the zero state.
func (m *Manager) BudgetView() (views.BudgetState, bool) {
	fn := m.budgetView.Load()
	if fn == nil {
		return views.BudgetState{}, false
	}
	return (*fn)(), true
}

// ViewTables returns the views of names that exist (views.Names; other
// names are skipped), all from one reading: one catalog generation, the
// sessions and statements read once, one time.
func (m *Manager) ViewTables(names []string) map[string]views.Table {
	r := m.reading()
	out := map[string]views.Table{}
	for _, n := range names {
		if t, ok := r.table(n); ok {
			out[n] = t
		}
	}
	return out
}

func (m *Manager) show(s *ddl.Show) (Result, error) {
	st := m.state.Load()
	if s.Cluster {
		return Result{}, ddl.Errorf(ddl.CodeNotSupported, s.Position(), "SHOW CLUSTER is answered by the admin console, which gathers the fleet's instances")
	}
	name := s.Name
	if name == "all" {
		name = "settings"
	}
	if s.Name == "whatif" && s.RTT != "" {
		rtts, err := whatif.ParseRTTs(s.RTT)
		if err != nil {
			return Result{}, ddl.Errorf(ddl.CodeInvalidParameter, s.RTTPos, "SHOW WHATIF: %s", err)
		}
		apps, _ := m.WhatIf()
		return result(views.WhatIf(apps, rtts), "SHOW"), nil
	}
	if slices.Contains(views.Lists, s.Name) {
		t, _ := m.reading().table(name)
		return result(t, "SHOW"), nil
	}
	v, ok := st.cat.Settings.Show(s.Name)
	if !ok {
		e := ddl.Errorf(ddl.CodeUndefinedObject, s.NamePos, "unrecognized configuration parameter %q", s.Name)
		e.Hint = "SHOW takes a setting (" + strings.Join(catalog.SettingNames(), ", ") + ") or one of " + strings.ToUpper(strings.Join(views.Lists, ", ")) + "."
		return Result{}, e
	}
	return result(views.Table{Columns: []string{s.Name}, Rows: [][]string{{v}}}, "SHOW"), nil
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
	st := m.state.Load()
	if s.From == "" {
		t, err := views.Values(st.cat, s, m.versionString())
		if err != nil {
			return Result{}, err
		}
		return result(t, ""), nil
	}
	t, ok := m.reading().table(s.From)
	if !ok || s.Schema != "" && s.Schema != "public" {
		code := ddl.CodeUndefinedTable
		if strings.HasPrefix(s.From, "pg_") || s.Schema == "information_schema" || s.Schema == "pg_catalog" {
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

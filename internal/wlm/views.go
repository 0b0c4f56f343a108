package wlm

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
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
func (m *Runtime) RoutesByLink() map[string][]string {
	return views.RoutesByLink(m.state.Load().viewRoutes())
}

// reading is one consistent reading of what the views show: one
// catalog generation, the sessions and statements read once, one time.
// Statements are read on first use.
type reading struct {
	m        *core
	now      time.Time
	st       *state
	sessions []*session.Session
	running  []views.Statement
	ended    []views.Statement
	read     bool // running and ended are read
}

func (m *core) reading() *reading {
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
		return views.Rules(cat, r.m.eval.stats().RuleFirings), true
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
	case "network":
		if t, ok, err := r.m.sourced(name, r.now, ""); ok && err == nil {
			return t, true
		}
		return views.Network(nil), true
	case "budget", "whatif":
		if t, ok, err := r.m.sourced(name, r.now, ""); ok && err == nil {
			return t, true
		}
		if name == "budget" {
			return views.Budget(views.BudgetState{}), true
		}
		return views.WhatIf(nil, whatif.DefaultRTTs), true
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

// Source is a view the workload manager shows but does not compute
// itself: the fleet's shared budget (views.BudgetSource), the what-if
// table (views.WhatIfSource), and whatever else another part of the
// instance owns. Views.Register gives it a
// name from views.Names; SHOW, SELECT and ViewTables then answer that
// name from it.
type Source interface {
	// Table returns the view at now. param is the view's parameter, ""
	// for none (SHOW WHATIF RTT '1ms,5ms' passes "1ms,5ms"); an error
	// about it is the statement's error. It must be safe for concurrent
	// use and must not call back into the Manager.
	View(now time.Time, param string) (views.Table, error)
}

// sources is the registered Sources by view name; replaced, never
// modified.
type sources map[string]Source

// Register makes src the source of the view name (one of views.Names);
// nil removes it. A view with no source shows no rows.
func (m *Views) Register(name string, src Source) {
	m.srcMu.Lock()
	defer m.srcMu.Unlock()
	next := sources{}
	if cur := m.sources.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	if src == nil {
		delete(next, name)
	} else {
		next[name] = src
	}
	m.sources.Store(&next)
}

// sourced returns the view name from its registered Source with param,
// and whether one is registered.
func (m *core) sourced(name string, now time.Time, param string) (views.Table, bool, error) {
	cur := m.sources.Load()
	if cur == nil || (*cur)[name] == nil {
		return views.Table{}, false, nil
	}
	t, err := (*cur)[name].View(now, param)
	return t, true, err
}

// ViewTables returns the views of names that exist (views.Names; other
// names are skipped), all from one reading: one catalog generation, the
// sessions and statements read once, one time.
func (m *Views) ViewTables(names []string) map[string]views.Table {
	r := m.reading()
	out := map[string]views.Table{}
	for _, n := range names {
		if t, ok := r.table(n); ok {
			out[n] = t
		}
	}
	return out
}

func (m *core) show(s *ddl.Show) (Result, error) {
	st := m.state.Load()
	if s.Cluster {
		return Result{}, ddl.Errorf(sqlstate.FeatureNotSupported, s.Position(), "SHOW CLUSTER is answered by the admin console, which gathers the fleet's instances")
	}
	name := s.Name
	if name == "all" {
		name = "settings"
	}
	if s.Name == "whatif" && s.RTT != "" {
		t, ok, err := m.sourced("whatif", m.clk.Now(), s.RTT)
		if err == nil && !ok {
			_, err = whatif.ParseRTTs(s.RTT)
			t = views.WhatIf(nil, whatif.DefaultRTTs)
		}
		if err != nil {
			return Result{}, ddl.Errorf(sqlstate.InvalidParameterValue, s.RTTPos, "SHOW WHATIF: %s", err)
		}
		return result(t, "SHOW"), nil
	}
	if slices.Contains(views.Lists, s.Name) {
		t, _ := m.reading().table(name)
		return result(t, "SHOW"), nil
	}
	v, ok := st.cat.Settings.Show(s.Name)
	if !ok {
		e := ddl.Errorf(sqlstate.UndefinedObject, s.NamePos, "unrecognized configuration parameter %q", s.Name)
		e.Hint = "SHOW takes a setting (" + strings.Join(catalog.SettingNames(), ", ") + ") or one of " + strings.ToUpper(strings.Join(views.Lists, ", ")) + "."
		return Result{}, e
	}
	return result(views.Table{Columns: []string{s.Name}, Rows: [][]string{{v}}}, "SHOW"), nil
}

// statements returns the running statements, oldest first, then the
// recently ended ones, newest first, with the evaluator's bandwidth.
func (m *core) statements(now time.Time, running, ended bool) []views.Statement {
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

func (m *core) selectRows(s *ddl.Select) (Result, error) {
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
		code := sqlstate.UndefinedTable
		if strings.HasPrefix(s.From, "pg_") || s.Schema == "information_schema" || s.Schema == "pg_catalog" {
			code = sqlstate.FeatureNotSupported
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

func (m *core) versionString() string {
	v := m.version0
	if v == "" {
		v = "dev"
	}
	return fmt.Sprintf("sluice %s admin console (PostgreSQL protocol 3.0)", v)
}

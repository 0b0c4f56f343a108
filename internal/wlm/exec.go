package wlm

import (
	"context"

	"github.com/sluicelab/sluice/internal/redact"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Exec parses sql and runs its statements in order, stopping at the
// first error. It returns the result of the last statement; an empty
// text returns a zero Result. Errors are *ddl.Error with a SQLSTATE (and
// a position within sql when one token is to blame).
func (m *Service) Exec(ctx context.Context, sql string) (Result, error) {
	sts, err := ddl.Parse(sql)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, st := range sts {
		if res, err = m.ExecStatement(ctx, st); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// ExecStatement runs one statement, parsed or built (the HTTP API builds
// them from JSON; positions are then whatever the builder put there, and
// errors carry them back). Each statement that changes the catalog is
// applied to a copy, validated and saved before it replaces the catalog:
// it takes effect entirely or not at all. Every statement but SHOW and
// SELECT is recorded in the audit log, with the Actor of ctx (WithActor)
// and its outcome.
func (m *Service) ExecStatement(ctx context.Context, st ddl.Statement) (Result, error) {
	switch s := st.(type) {
	case *ddl.Show:
		return m.show(s)
	case *ddl.Select:
		return m.selectRows(s)
	}
	res, err := m.execChange(ctx, st)
	m.record(ctx, auditText(st, redact.PostgreSQL), err)
	return res, err
}

// execChange runs a statement that changes the catalog or a route.
func (m *core) execChange(ctx context.Context, st ddl.Statement) (Result, error) {
	var (
		tag     string
		notices []string
		err     error
	)
	switch s := st.(type) {
	case *ddl.Create:
		tag = catalog.Tag("CREATE", s.Kind)
		notices, err = m.change(ctx, func(c *Catalog) ([]string, error) { return catalog.Create(c, s) })
	case *ddl.Alter:
		tag = catalog.Tag("ALTER", s.Kind)
		notices, err = m.change(ctx, func(c *Catalog) ([]string, error) { return nil, catalog.Alter(c, s) })
	case *ddl.Drop:
		tag = catalog.Tag("DROP", s.Kind)
		notices, err = m.change(ctx, func(c *Catalog) ([]string, error) { return catalog.Drop(c, s, m.routeUsesLocked()) })
	case *ddl.Set:
		tag = "SET"
		if e := catalog.CheckSetting(s.Name, s.NamePos); e != nil {
			return Result{}, e
		}
		notices, err = m.change(ctx, func(c *Catalog) ([]string, error) { return nil, catalog.Set(c, s.Name, s.NamePos, s.Value) })
	case *ddl.Reset:
		tag = "RESET"
		if e := catalog.CheckSetting(s.Name, s.NamePos); s.Name != "all" && e != nil {
			return Result{}, e
		}
		notices, err = m.change(ctx, func(c *Catalog) ([]string, error) { return nil, catalog.Reset(c, s) })
	case *ddl.AlterRoute:
		tag = "ALTER ROUTE"
		err = m.alterRoute(s)
	default:
		return Result{}, ddl.Errorf(sqlstate.FeatureNotSupported, st.Position(), "statement not supported")
	}
	if err != nil {
		return Result{}, err
	}
	return Result{Tag: tag, Notices: notices}, nil
}

// routeUsesLocked returns what DROP must know of the current routes;
// m.mu is held.
func (m *core) routeUsesLocked() map[string]catalog.RouteUse {
	st := m.state.Load()
	out := make(map[string]catalog.RouteUse, len(st.routes))
	for name, r := range st.routes {
		out[name] = catalog.RouteUse{Link: r.linkName(), Pool: r.Pool}
	}
	return out
}

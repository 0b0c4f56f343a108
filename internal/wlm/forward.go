package wlm

import (
	"context"

	"github.com/sluicelab/sluice/internal/redact"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// ForwardUser takes the workload-management part out of a statement sent
// on a data route: when sql is CREATE USER or ALTER USER with a RESOURCE
// POOL clause (see ddl.SplitUserPool for what qualifies in dialect d), it
// binds the user to the pool with BindUser and returns the rest of the
// statement, for the database, and true. Any other text returns sql
// unchanged and false.
//
// When the binding is refused, took is true and err is a *ddl.Error: the
// caller must not send the statement on as written (its RESOURCE POOL
// clause is no SQL the database knows), but report err to the client.
// The binding is made before the database runs the rest; if the
// database then refuses the rest, or a transaction around it rolls back,
// the binding stays (a binding names a user, whether or not the database
// has one; DROP USER on the console removes it).
func (m *Service) ForwardUser(ctx context.Context, sql string, d ddl.Dialect) (rest string, took bool, err error) {
	s, ok := ddl.SplitUserPool(sql, d)
	if !ok {
		return sql, false, nil
	}
	err = m.bindUser(ctx, s.User, s.Pool)
	m.record(ctx, redact.SQL(sql, redactDialect(d)), err)
	if err != nil {
		return "", true, err
	}
	return s.Rest, true, nil
}

// BindUser binds user to pool, creating the binding or replacing it,
// whichever the catalog needs: the data-route counterpart of the
// console's CREATE USER and ALTER USER, where the database, not the
// catalog, decides whether the user exists. pool is read as the console
// reads the RESOURCE POOL clause: a Word is folded to lower case, a
// String kept as written, and default_pool or DEFAULT leave the user
// bound to no pool.
//
// Errors are *ddl.Error, as for the console's statements: 42704 when the
// pool does not exist ("resource pool "p" does not exist", at pool.Pos),
// 0A000 when the binding would make an abort rule reachable on a route
// that cannot cancel, 58030 when the catalog file cannot be saved. On
// error nothing changes. The binding is recorded in the audit log as
// ALTER USER user RESOURCE POOL pool, with the Actor of ctx.
func (m *Service) BindUser(ctx context.Context, user string, pool ddl.Value) error {
	err := m.bindUser(ctx, user, pool)
	m.record(ctx, "ALTER USER "+quoteIdent(user)+" RESOURCE POOL "+valueText(pool), err)
	return err
}

// bindUser is BindUser without the audit record.
func (m *core) bindUser(ctx context.Context, user string, pool ddl.Value) error {
	_, err := m.change(ctx, func(c *Catalog) ([]string, error) {
		return nil, catalog.BindUser(c, user, pool)
	})
	return err
}

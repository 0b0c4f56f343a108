package admin

// This file answers the fleet's statements: SHOW INSTANCES, SHOW
// CLUSTER list, and the session commands that name another instance.

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// fleetStatement runs SHOW INSTANCES and SHOW CLUSTER list; ok is false
// for any other statement.
func (c *conn) fleetStatement(ctx context.Context, st ddl.Statement) (answer, bool, error) {
	s, isShow := st.(*ddl.Show)
	if !isShow || !s.Cluster && s.Name != "instances" {
		return answer{}, false, nil
	}
	f := c.s.fleet
	if f == nil {
		return answer{}, true, ddl.Errorf(sqlstate.FeatureNotSupported, st.Position(), "this console has no fleet")
	}
	if !s.Cluster {
		return tableAnswer(fleet.InstancesTable(f.Instances(ctx)), "SHOW", nil), true, nil
	}
	if !slices.Contains(views.Lists, s.Name) || s.Name == "all" {
		e := ddl.Errorf(sqlstate.UndefinedObject, s.NamePos, "SHOW CLUSTER takes a list, not %q", s.Name)
		e.Hint = "SHOW CLUSTER " + strings.ToUpper(strings.Join(slices.DeleteFunc(slices.Clone(views.Lists), func(n string) bool { return n == "all" }), " | ")) + "."
		return answer{}, true, e
	}
	tabs, notices := f.Tables(ctx, []string{s.Name})
	return tableAnswer(tabs[s.Name], "SHOW", notices), true, nil
}

// tableAnswer is t as text rows with the tag, or "SELECT n" when tag is
// "".
func tableAnswer(t views.Table, tag string, notices []string) answer {
	a := textAnswer(wlm.Result{Tag: tag, Columns: t.Columns, Rows: t.Rows})
	a.Notices = notices
	if a.Columns == nil {
		a.Columns = []string{}
	}
	return a
}

// forward runs a session command naming another instance there.
func (c *conn) forward(ctx context.Context, s *ddl.SessionCommand) (answer, error) {
	f := c.s.fleet
	if f == nil {
		return answer{}, ddl.Errorf(sqlstate.FeatureNotSupported, s.InstancePos, "this console has no fleet: ON INSTANCE names no one")
	}
	ans, err := f.Forward(ctx, s.Instance, s.Session, s.Terminate)
	var re *fleet.RemoteError
	switch {
	case errors.Is(err, fleet.ErrUnknownInstance):
		e := ddl.Errorf(sqlstate.UndefinedObject, s.InstancePos, "instance %q is not a live member of the fleet", s.Instance)
		e.Hint = "SHOW INSTANCES lists them."
		return answer{}, e
	case errors.As(err, &re):
		return answer{}, ddl.Errorf(sqlstate.SystemError, s.InstancePos, "%v", err)
	case err != nil:
		return answer{}, ddl.Errorf(sqlstate.ConnectionFailure, s.InstancePos, "instance %s: %v", s.Instance, err)
	}
	var notices []string
	if ans.Notice != "" {
		notices = append(notices, "instance "+s.Instance+": "+ans.Notice)
	}
	return c.sessionAnswer(s, ans.Done, ans.Missing, notices)
}

// clusterTables returns the tables of the cluster-wide views q names
// (fleet.ClusterViews, fleet.InstancesView), with a notice for each
// instance that did not answer; nil without a fleet.
func (c *conn) clusterTables(ctx context.Context, q *ddl.Query) (map[string]views.Table, []string) {
	f := c.s.fleet
	if f == nil {
		return nil, nil
	}
	var want []string
	out := map[string]views.Table{}
	for _, n := range q.Names {
		if local, ok := fleet.ClusterViews[n]; ok && !slices.Contains(want, local) {
			want = append(want, local)
		}
		if n == fleet.InstancesView {
			out[n] = fleet.InstancesTable(f.Instances(ctx))
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	tabs, notices := f.Tables(ctx, want)
	for _, n := range q.Names {
		if local, ok := fleet.ClusterViews[n]; ok {
			if t, ok := tabs[local]; ok {
				out[n] = t
			}
		}
	}
	return out, notices
}

// isView reports whether the console's SQL can read view name: one of
// views.Names, and with a fleet, the cluster-wide views.
func (c *conn) isView(name string) bool {
	if slices.Contains(views.Names, name) {
		return true
	}
	if c.s.fleet == nil {
		return false
	}
	_, ok := fleet.ClusterViews[name]
	return ok || name == fleet.InstancesView
}

package stack

import (
	"context"

	"github.com/sluicelab/sluice/internal/fleet/budget"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// startFleetBudget runs this instance's part of the fleet's shared
// low-priority budget (cluster_low_priority_bandwidth) until Close,
// under the membership lease, and makes SHOW BUDGET and the budget
// metrics show it. New calls it once, after the membership started;
// with a file or in-memory catalog it does nothing. The budget is idle
// while cluster_low_priority_bandwidth is 0.
func (s *Stack) startFleetBudget() error {
	if s.etcd == nil || s.cfg.Etcd == nil || s.members == nil {
		return nil
	}
	b, err := budget.New(budget.Options{
		Client: s.etcd, Key: s.cfg.Etcd.Key, Name: s.Name(), Lease: s.Lease(), Links: s.mgr.Runtime(),
		Budget: func() int64 { return s.mgr.Service().Catalog().Settings.ClusterLowPriorityBandwidth },
		Clock:  s.clk,
		Logger: s.log.With("component", "budget"),
	})
	if err != nil {
		return err
	}
	s.budget.Store(b)
	s.mgr.Views().Register("budget", views.BudgetSource(func() views.BudgetState { return budgetView(b.State()) }))
	s.goRun("shared low-priority budget", func() error { return b.Run(s.lctx) }, context.Canceled)
	return nil
}

// budgetView is st as SHOW BUDGET shows it: the listed peers, with this
// instance's row replaced by its current state.
func budgetView(st budget.State) views.BudgetState {
	v := views.BudgetState{Budget: st.Budget, Unreachable: !st.Unreachable.IsZero()}
	self := views.BudgetRow{Instance: st.Name, Self: true, Allocator: st.Allocator, Mode: st.Mode, Want: st.Want, Rate: st.Rate, Version: st.Applied}
	seen := false
	for _, p := range st.Peers {
		if p.Name == st.Name {
			v.Rows, seen = append(v.Rows, self), true
			continue
		}
		v.Rows = append(v.Rows, views.BudgetRow{Instance: p.Name, Allocator: p.Allocator, Mode: p.Mode, Want: p.Want, Rate: p.Rate, Version: p.Applied})
	}
	if !seen {
		v.Rows = append(v.Rows, self)
	}
	return v
}

// BudgetState is the fleet budget's state as the views show it, false
// while it has not started (or there is no fleet). Safe for concurrent
// use.
func (s *Stack) BudgetState() (views.BudgetState, bool) {
	b := s.budget.Load()
	if b == nil {
		return views.BudgetState{}, false
	}
	return budgetView(b.State()), true
}

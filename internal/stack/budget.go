package stack

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/fleet/budget"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// BudgetOptions are what StartBudget needs from the fleet: the etcd
// client the stack dialled, the prefix's key builder, the instance's
// name and lease.
type BudgetOptions struct {
	Client *clientv3.Client
	Key    func(parts ...string) string
	Name   string
	// Lease is the instance's membership lease; 0 gives the budget a
	// lease of its own.
	Lease clientv3.LeaseID
	// Tuning for tests and benches; zero values take the budget
	// package's defaults.
	Period, GrantTTL, LeaseTTL time.Duration
}

// StartBudget runs this instance's part of the fleet's shared
// low-priority budget (cluster_low_priority_bandwidth) until Close, and
// makes SHOW BUDGET and the budget metrics show it. It is called once,
// when the stack has an etcd client.
func (s *Stack) StartBudget(o BudgetOptions) error {
	b, err := budget.New(budget.Options{
		Client: o.Client, Key: o.Key, Name: o.Name, Lease: o.Lease, Links: s.mgr,
		Budget: func() int64 { return s.mgr.Catalog().Settings.ClusterLowPriorityBandwidth },
		Period: o.Period, GrantTTL: o.GrantTTL, LeaseTTL: o.LeaseTTL,
		Clock:  s.clk,
		Logger: s.log.With("component", "budget"),
	})
	if err != nil {
		return err
	}
	s.mgr.SetBudgetView(func() views.BudgetState { return budgetView(b.State()) })
	s.goLoop(func() {
		if err := b.Run(s.lctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("shared low-priority budget stopped", "err", err)
		}
	})
	return nil
}

// startFleetBudget runs the shared low-priority budget of the etcd
// catalog's fleet, under the membership lease, when the stack has one;
// with a file or in-memory catalog it does nothing. The budget is idle
// while cluster_low_priority_bandwidth is 0.
func (s *Stack) startFleetBudget() error {
	if s.etcd == nil || s.cfg.Etcd == nil || s.members == nil {
		return nil
	}
	return s.StartBudget(BudgetOptions{Client: s.etcd, Key: s.cfg.Etcd.Key, Name: s.Name(), Lease: s.Lease()})
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

package views

import "time"

// BudgetState is what SHOW BUDGET shows: the fleet's shared
// low-priority budget as this instance sees it.
type BudgetState struct {
	// Budget is cluster_low_priority_bandwidth in bytes/s; 0 is off.
	Budget int64
	// Rows are the instances that report a demand, by name; this
	// instance's row is current, the others' as of the last listing.
	Rows []BudgetRow
	// Unreachable reports that etcd does not answer this instance.
	Unreachable bool
}

// BudgetRow is one instance of SHOW BUDGET.
type BudgetRow struct {
	Instance  string
	Self      bool   // this instance
	Allocator bool   // the elected allocator
	Mode      string // off, waiting, grant or fallback
	Want      int64  // demand, bytes/s
	Rate      int64  // what its Low class runs at, bytes/s
	Version   uint64 // the grant version it applies, 0 for none
}

// BudgetSource shows a fleet's budget as the budget view, a Source of
// the workload manager's. The function must be safe for concurrent use.
type BudgetSource func() BudgetState

// View returns the budget view; the view takes no parameter.
func (f BudgetSource) View(time.Time, string) (Table, error) { return Budget(f()), nil }

// Budget is SHOW BUDGET: one row per instance, want and rate in bytes/s.
// Without a fleet (no etcd) it has no rows.
func Budget(s BudgetState) Table {
	t := newTable("instance, self, allocator, mode, want int, rate int, grant_version int, budget int, etcd")
	etcd := "ok"
	if s.Unreachable {
		etcd = "unreachable"
	}
	for _, r := range s.Rows {
		e := ""
		if r.Self {
			e = etcd
		}
		t.Rows = append(t.Rows, []string{r.Instance, yesNo(r.Self), yesNo(r.Allocator), r.Mode,
			itoa(r.Want), itoa(r.Rate), itoa(int64(r.Version)), itoa(s.Budget), e})
	}
	return t
}

package views

// This file holds GaussDB's resource-pool and per-user views, with
// GaussDB's column names. sluice fills the columns it has a value for
// (names, exception rules, weights, bytes and bandwidth); the memory, CPU,
// disk and I/O columns GaussDB also has are present and NULL.

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
)

// ResourcePool is pg_resource_pool: one row per resource pool.
// respool_name, active_statements (-1 unlimited), except_rule
// (comma-separated) and weight come from the catalog; the other columns
// are GaussDB's, NULL here.
func ResourcePool(cat *catalog.Catalog) Table {
	t := newTable("respool_name, mem_percent int, cpu_affinity int, control_group, active_statements int, max_dop int, " +
		"memory_limit, parentid int, io_limits int, io_priority, nodegroup, is_foreign, short_acc, except_rule, weight int")
	for _, name := range catalog.SortedKeys(cat.Pools) {
		p := cat.Pools[name]
		t.Rows = append(t.Rows, []string{name, "", "", "", activeStatements(p.ActiveStatements), "", "", "", "", "", "", "", "", strings.Join(p.ExceptRules, ","), strconv.Itoa(p.Weight)})
	}
	return t
}

// RespoolExceptionInfo is gs_respool_exception_info: one row per
// threshold and action of each exception rule of each pool (name is the
// rule, rule the threshold's name or "action", value its value as
// written in CREATE EXCEPT RULE), pools and rules by name. A disabled
// threshold (-1) has no row.
func RespoolExceptionInfo(cat *catalog.Catalog) Table {
	t := newTable("respool_name, name, rule, value")
	for _, pool := range catalog.SortedKeys(cat.Pools) {
		for _, rule := range cat.Pools[pool].ExceptRules {
			r := cat.Rules[rule]
			if r == nil {
				continue
			}
			if r.Bandwidth != catalog.Unlimited {
				t.Rows = append(t.Rows, []string{pool, rule, "bandwidth", catalog.FormatFloat(r.Bandwidth)})
			}
			if r.ElapsedTime != catalog.Unlimited {
				t.Rows = append(t.Rows, []string{pool, rule, "elapsedtime", catalog.FormatFloat(r.ElapsedTime)})
			}
			if r.Queued() {
				t.Rows = append(t.Rows, []string{pool, rule, "blocktime", catalog.FormatFloat(r.BlockTime)})
			}
			t.Rows = append(t.Rows, []string{pool, rule, "action", string(r.Action)})
		}
	}
	return t
}

// TotalUserResourceInfo is pg_total_user_resource_info: one row per user
// bound in the catalog or with an open session, by name. send_bytes and
// recv_bytes sum the user's open sessions (as the client sees them: sent
// to the server, received from it); bandwidth_mbps sums the bandwidth of
// its running statements, in MB/s. GaussDB's memory, CPU, space and I/O
// columns are NULL.
func TotalUserResourceInfo(cat *catalog.Catalog, sessions []*session.Session, running []Statement) Table {
	t := newTable("username, used_memory int, total_memory int, used_cpu real, total_cpu int, used_space int, total_space int, " +
		"used_temp_space int, total_temp_space int, used_spill_space int, total_spill_space int, read_kbytes int, write_kbytes int, " +
		"read_counts int, write_counts int, read_speed real, write_speed real, send_bytes int, recv_bytes int, bandwidth_mbps real")
	type usage struct {
		up, down int64
		bw       float64
	}
	by := map[string]*usage{}
	get := func(u string) *usage {
		if by[u] == nil {
			by[u] = &usage{}
		}
		return by[u]
	}
	for u := range cat.Users {
		get(u)
	}
	for _, s := range sessions {
		u := get(s.User())
		u.up += s.BytesUp()
		u.down += s.BytesDown()
	}
	for _, r := range running {
		get(r.Snapshot.User).bw += r.Bandwidth
	}
	names := slices.Sorted(maps.Keys(by))
	for _, n := range names {
		u := by[n]
		t.Rows = append(t.Rows, []string{n, "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", itoa(u.up), itoa(u.down), fmtMBps(u.bw)})
	}
	return t
}

package views

import (
	"strings"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Names are the views SELECT reads: sluice's lists (SHOW ALL is
// settings), the audit trail, and GaussDB's views, with GaussDB's names.
var Names = []string{"sessions", "statements", "pools", "rules", "links", "users", "routes", "settings", "audit", "firings", "budget", "whatif", "network",
	"pg_session_wlmstat", "gs_wlm_session_statistics", "gs_wlm_session_history",
	"pg_resource_pool", "gs_respool_exception_info", "pg_total_user_resource_info"}

// Project returns the columns of t that s selects (named columns, with
// their aliases, or *), and at most s.Limit rows when s.Limit is not
// negative. Selecting a function or a literal from a view is 0A000, an
// unknown column 42703, each at the target's position.
func Project(t Table, s *ddl.Select) (Table, error) {
	var idx []int
	var cols []string
	for _, tg := range s.Targets {
		switch {
		case tg.Star:
			for i, c := range t.Columns {
				idx = append(idx, i)
				cols = append(cols, c)
			}
		case tg.Func || tg.Value != nil:
			return Table{}, ddl.Errorf(sqlstate.FeatureNotSupported, tg.Pos, "only column names and * may be selected from %s", s.From)
		default:
			i := indexOf(t.Columns, tg.Name)
			if i < 0 {
				e := ddl.Errorf(sqlstate.UndefinedColumn, tg.Pos, "column %q does not exist", tg.Name)
				e.Hint = "Columns of " + s.From + ": " + strings.Join(t.Columns, ", ") + "."
				return Table{}, e
			}
			idx = append(idx, i)
			name := tg.Name
			if tg.Alias != "" {
				name = tg.Alias
			}
			cols = append(cols, name)
		}
	}
	rows := t.Rows
	if s.Limit >= 0 && int64(len(rows)) > s.Limit {
		rows = rows[:s.Limit]
	}
	out := Table{Columns: cols, Types: make([]Type, len(idx)), Rows: make([][]string, len(rows))}
	for j, i := range idx {
		out.Types[j] = t.TypeOf(i)
	}
	for r, row := range rows {
		nr := make([]string, len(idx))
		for j, i := range idx {
			nr[j] = row[i]
		}
		out.Rows[r] = nr
	}
	return out, nil
}

func indexOf(cols []string, name string) int {
	for i, c := range cols {
		if c == name {
			return i
		}
	}
	return -1
}

// Values answers a SELECT without FROM: literals, version() (whose text
// is version) and current_setting(name) of cat's settings.
func Values(cat *catalog.Catalog, s *ddl.Select, version string) (Table, error) {
	var cols, row []string
	for _, tg := range s.Targets {
		var col, val string
		switch {
		case tg.Star:
			return Table{}, ddl.Errorf(sqlstate.SyntaxError, tg.Pos, "SELECT * with no tables specified is not valid")
		case tg.Value != nil:
			col, val = "?column?", tg.Value.Text
		case tg.Func && tg.Name == "version" && len(tg.Args) == 0:
			col, val = "version", version
		case tg.Func && tg.Name == "current_setting" && len(tg.Args) == 1:
			v, ok := cat.Settings.Show(strings.ToLower(tg.Args[0].Text))
			if !ok {
				return Table{}, ddl.Errorf(sqlstate.UndefinedObject, tg.Args[0].Pos, "unrecognized configuration parameter %q", tg.Args[0].Text)
			}
			col, val = "current_setting", v
		case tg.Func:
			return Table{}, ddl.Errorf(sqlstate.FeatureNotSupported, tg.Pos, "function %s() is not supported by the sluice admin console", tg.Name)
		default:
			return Table{}, ddl.Errorf(sqlstate.UndefinedColumn, tg.Pos, "column %q does not exist", tg.Name)
		}
		if tg.Alias != "" {
			col = tg.Alias
		}
		cols = append(cols, col)
		row = append(row, val)
	}
	rows := [][]string{row}
	if s.Limit == 0 {
		rows = nil
	}
	return Table{Columns: cols, Rows: rows}, nil
}

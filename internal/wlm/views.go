package wlm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// table is a computed view: column names and text rows.
type table struct {
	cols []string
	rows [][]string
}

func (t table) result(tag string) Result {
	if tag == "" {
		tag = "SELECT " + strconv.Itoa(len(t.rows))
	}
	return Result{Tag: tag, Columns: t.cols, Rows: t.rows}
}

// lists are the SHOW names that return a list instead of a setting.
var lists = []string{"sessions", "statements", "pools", "rules", "links", "users", "routes", "all"}

func (m *Manager) show(s *ddl.Show) (Result, error) {
	now := m.clk.Now()
	st := m.state.Load()
	var t table
	switch s.Name {
	case "sessions":
		t = m.sessionsTable(st, now)
	case "statements":
		t = m.statementsTable(st, now)
	case "pools":
		t = m.poolsTable(st)
	case "rules":
		t = m.rulesTable(st)
	case "links":
		t = m.linksTable(st)
	case "users":
		t = m.usersTable(st)
	case "routes":
		t = routesTable(st)
	case "all":
		t.cols = []string{"name", "setting", "description"}
		for _, name := range catalog.SettingNames() {
			v, _ := st.cat.Settings.Show(name)
			t.rows = append(t.rows, []string{name, v, catalog.SettingDescription(name)})
		}
	default:
		v, ok := st.cat.Settings.Show(s.Name)
		if !ok {
			e := ddl.Errorf(ddl.CodeUndefinedObject, s.NamePos, "unrecognized configuration parameter %q", s.Name)
			e.Hint = "SHOW takes a setting (" + strings.Join(catalog.SettingNames(), ", ") + ") or one of " + strings.ToUpper(strings.Join(lists, ", ")) + "."
			return Result{}, e
		}
		t.cols = []string{s.Name}
		t.rows = [][]string{{v}}
	}
	return t.result("SHOW"), nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02 15:04:05.000Z07:00")
}

func fmtSeconds(d time.Duration) string {
	return strconv.FormatFloat(math.Round(d.Seconds()*1000)/1000, 'f', 3, 64)
}

func fmtMBps(bps float64) string { return strconv.FormatFloat(bps/1e6, 'f', 2, 64) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// classOf returns the class a statement of pool is sent in.
func (st *state) classOf(pool string, penalized bool) link.Class {
	if penalized {
		return link.Low
	}
	if p := st.cat.Pools[pool]; p != nil {
		return p.Priority
	}
	return link.Normal
}

func (m *Manager) sessionsTable(st *state, now time.Time) table {
	t := table{cols: []string{"id", "route", "user", "database", "pool", "client", "bytes_up", "bytes_down", "statements", "started", "penalised"}}
	for _, s := range m.reg.Sessions() {
		t.rows = append(t.rows, []string{
			itoa(int64(s.ID)), s.Info.Route, s.User(), s.Database(), s.Pool(), s.Info.Client,
			itoa(s.BytesUp()), itoa(s.BytesDown()), itoa(s.Statements()), fmtTime(s.Opened), yesNo(s.Penalized()),
		})
	}
	return t
}

// statementRow is one statement prepared for the statement views.
type statementRow struct {
	st    *session.Statement
	snap  session.Snapshot
	class link.Class
	age   time.Duration
	bps   float64
}

// statements returns the running statements, oldest first, then the
// recently ended ones, newest first.
func (m *Manager) statements(st *state, now time.Time, running, ended bool) []statementRow {
	var out []statementRow
	add := func(s *session.Statement) {
		snap := s.Snapshot()
		end := snap.Ended
		if end.IsZero() {
			end = now
		}
		out = append(out, statementRow{
			st: s, snap: snap, class: st.classOf(snap.Pool, snap.Penalized),
			age: end.Sub(snap.Started), bps: m.eval.statementBandwidth(s, &snap, now),
		})
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

// rowsText writes a statement's row count: empty while it runs or when
// the server did not report one.
func rowsText(s *session.Snapshot) string {
	rows := s.Rows
	if rows < 0 || s.Outcome == session.Running {
		return ""
	}
	return itoa(rows)
}

func (m *Manager) statementsTable(st *state, now time.Time) table {
	t := table{cols: []string{"id", "session", "user", "pool", "state", "penalised", "class", "elapsed", "bytes_up", "bytes_down", "bandwidth", "rows", "sql", "except_info"}}
	for _, r := range m.statements(st, now, true, true) {
		s := r.snap
		t.rows = append(t.rows, []string{
			itoa(int64(s.ID)), itoa(int64(s.SessionID)), s.User, s.Pool, s.Outcome.String(), yesNo(s.Penalized),
			r.class.String(), fmtSeconds(r.age), itoa(s.BytesUp), itoa(s.BytesDown), fmtMBps(r.bps),
			rowsText(&s), s.SQL, strings.Join(s.Except, "; "),
		})
	}
	return t
}

func (m *Manager) poolsTable(st *state) table {
	t := table{cols: []string{"name", "except_rule", "weight", "network_priority", "emulation", "users", "sessions"}}
	sessions := map[string]int{}
	for _, s := range m.reg.Sessions() {
		sessions[s.Pool()]++
	}
	for _, name := range catalog.SortedKeys(st.cat.Pools) {
		p := st.cat.Pools[name]
		t.rows = append(t.rows, []string{
			name, strings.Join(p.ExceptRules, ","), strconv.Itoa(p.Weight), p.Priority.String(),
			catalog.FormatEmulation(p.Emulation), strconv.Itoa(len(st.cat.UsersOfPool(name))), strconv.Itoa(sessions[name]),
		})
	}
	return t
}

func threshold(v float64, unit string) string {
	if v == Unlimited {
		return "-1"
	}
	return catalog.FormatFloat(v) + unit
}

func (m *Manager) rulesTable(st *state) table {
	t := table{cols: []string{"name", "bandwidth", "elapsedtime", "action", "pools", "firings"}}
	stats := m.Stats()
	for _, name := range catalog.SortedKeys(st.cat.Rules) {
		r := st.cat.Rules[name]
		n := stats.Firings[FiringKey{name, Abort}] + stats.Firings[FiringKey{name, Penalty}]
		t.rows = append(t.rows, []string{
			name, threshold(r.Bandwidth, "MB/s"), threshold(r.ElapsedTime, "s"), string(r.Action),
			strings.Join(st.cat.PoolsUsingRule(name), ","), strconv.FormatUint(n, 10),
		})
	}
	return t
}

func (m *Manager) linksTable(st *state) table {
	t := table{cols: []string{"name", "capacity", "queue_size", "emulation", "routes", "bytes_high", "bytes_normal", "bytes_low", "waiting", "queued"}}
	for _, name := range catalog.SortedKeys(st.cat.Links) {
		d := st.cat.Links[name]
		var routes []string
		for _, rn := range catalog.SortedKeys(st.routes) {
			if st.routes[rn].linkName() == name {
				routes = append(routes, rn)
			}
		}
		queue := "default"
		if d.QueueSize > 0 {
			queue = units.FormatBytes(d.QueueSize)
		}
		var by [link.NumClasses]int64
		var waiting, queued int64
		if l := st.links[name]; l != nil {
			ls := l.Stats()
			for _, dir := range ls.Directions {
				for c := range dir.Classes {
					by[c] += dir.Classes[c].Bytes
					waiting += dir.Classes[c].Waiting
				}
				queued += dir.QueueBytes()
			}
		}
		t.rows = append(t.rows, []string{
			name, units.FormatRate(d.Capacity), queue, catalog.FormatEmulation(d.Emulation), strings.Join(routes, ","),
			itoa(by[link.High]), itoa(by[link.Normal]), itoa(by[link.Low]), itoa(waiting), itoa(queued),
		})
	}
	return t
}

func (m *Manager) usersTable(st *state) table {
	t := table{cols: []string{"user", "resource_pool", "sessions"}}
	sessions := map[string]int{}
	for _, s := range m.reg.Sessions() {
		sessions[s.User()]++
	}
	for _, name := range catalog.SortedKeys(st.cat.Users) {
		t.rows = append(t.rows, []string{name, st.cat.Users[name].Pool, strconv.Itoa(sessions[name])})
	}
	return t
}

func routesTable(st *state) table {
	t := table{cols: []string{"name", "protocol", "link", "pool", "can_cancel", "emulation"}}
	for _, name := range catalog.SortedKeys(st.routes) {
		r := st.routes[name]
		t.rows = append(t.rows, []string{name, r.Protocol, r.linkName(), r.Pool, yesNo(r.CanCancel), catalog.FormatEmulation(r.em)})
	}
	return t
}

// views are the tables SELECT reads, with GaussDB's names.
var views = []string{"pg_session_wlmstat", "gs_wlm_session_statistics", "gs_wlm_session_history"}

// sessionWlmstat is pg_session_wlmstat: one row per open session.
// send_bytes and recv_bytes are the session's totals as the client sees
// them (sent to the server, received from it).
func (m *Manager) sessionWlmstat(st *state, now time.Time) table {
	t := table{cols: []string{"datname", "sessionid", "usename", "appname", "client_addr", "resource_pool", "priority", "status", "elapsed_time", "send_bytes", "recv_bytes", "except_info", "query"}}
	for _, s := range m.reg.Sessions() {
		status, query, elapsed, except := "idle", "", "", ""
		pen := false
		if act := s.Active(); len(act) > 0 {
			snap := act[len(act)-1].Snapshot()
			status, query = "active", snap.SQL
			elapsed = fmtSeconds(now.Sub(snap.Started))
			except = strings.Join(snap.Except, "; ")
			pen = snap.Penalized
		}
		t.rows = append(t.rows, []string{
			s.Database(), itoa(int64(s.ID)), s.User(), s.Application(), s.Info.Client, s.Pool(),
			st.classOf(s.Pool(), pen).String(), status, elapsed, itoa(s.BytesUp()), itoa(s.BytesDown()), except, query,
		})
	}
	return t
}

// sessionStatistics is gs_wlm_session_statistics (running statements)
// or gs_wlm_session_history (ended ones). duration is in milliseconds as
// in GaussDB; bandwidth in MB/s.
func (m *Manager) sessionStatistics(st *state, now time.Time, history bool) table {
	t := table{cols: []string{"datname", "sessionid", "queryid", "usename", "application_name", "client_addr", "resource_pool", "priority", "start_time", "finish_time", "duration", "status", "penalized", "send_bytes", "recv_bytes", "bandwidth", "rows", "except_info", "query"}}
	for _, r := range m.statements(st, now, !history, history) {
		s := r.snap
		sess := r.st.Session
		t.rows = append(t.rows, []string{
			sess.Database(), itoa(int64(s.SessionID)), itoa(int64(s.ID)), s.User, sess.Application(), sess.Info.Client,
			s.Pool, r.class.String(), fmtTime(s.Started), fmtTime(s.Ended), itoa(r.age.Milliseconds()), s.Outcome.String(),
			yesNo(s.Penalized), itoa(s.BytesUp), itoa(s.BytesDown), fmtMBps(r.bps), rowsText(&s),
			strings.Join(s.Except, "; "), s.SQL,
		})
	}
	return t
}

func (m *Manager) selectRows(s *ddl.Select) (Result, error) {
	now := m.clk.Now()
	st := m.state.Load()
	if s.From == "" {
		return m.selectValues(st, s)
	}
	var t table
	switch s.From {
	case "pg_session_wlmstat":
		t = m.sessionWlmstat(st, now)
	case "gs_wlm_session_statistics":
		t = m.sessionStatistics(st, now, false)
	case "gs_wlm_session_history":
		t = m.sessionStatistics(st, now, true)
	default:
		code := ddl.CodeUndefinedTable
		if strings.HasPrefix(s.From, "pg_") || s.Schema == "information_schema" {
			code = ddl.CodeNotSupported
		}
		e := ddl.Errorf(code, s.FromPos, "relation %q is not available in the sluice admin console", s.From)
		e.Hint = "Views: " + strings.Join(views, ", ") + "; and SHOW " + strings.ToUpper(strings.Join(lists, " | ")) + "."
		return Result{}, e
	}
	// Projection.
	var idx []int
	var cols []string
	for _, tg := range s.Targets {
		switch {
		case tg.Star:
			for i, c := range t.cols {
				idx = append(idx, i)
				cols = append(cols, c)
			}
		case tg.Func || tg.Value != nil:
			return Result{}, ddl.Errorf(ddl.CodeNotSupported, tg.Pos, "only column names and * may be selected from %s", s.From)
		default:
			i := indexOf(t.cols, tg.Name)
			if i < 0 {
				e := ddl.Errorf(ddl.CodeUndefinedColumn, tg.Pos, "column %q does not exist", tg.Name)
				e.Hint = "Columns of " + s.From + ": " + strings.Join(t.cols, ", ") + "."
				return Result{}, e
			}
			idx = append(idx, i)
			name := tg.Name
			if tg.Alias != "" {
				name = tg.Alias
			}
			cols = append(cols, name)
		}
	}
	rows := t.rows
	if s.Limit >= 0 && int64(len(rows)) > s.Limit {
		rows = rows[:s.Limit]
	}
	out := table{cols: cols, rows: make([][]string, len(rows))}
	for r, row := range rows {
		nr := make([]string, len(idx))
		for j, i := range idx {
			nr[j] = row[i]
		}
		out.rows[r] = nr
	}
	return out.result(""), nil
}

func indexOf(cols []string, name string) int {
	for i, c := range cols {
		if c == name {
			return i
		}
	}
	return -1
}

// selectValues answers a SELECT without FROM: literals, version() and
// current_setting(name).
func (m *Manager) selectValues(st *state, s *ddl.Select) (Result, error) {
	var cols, row []string
	for _, tg := range s.Targets {
		var col, val string
		switch {
		case tg.Star:
			return Result{}, ddl.Errorf(ddl.CodeSyntax, tg.Pos, "SELECT * with no tables specified is not valid")
		case tg.Value != nil:
			col, val = "?column?", tg.Value.Text
		case tg.Func && tg.Name == "version" && len(tg.Args) == 0:
			col, val = "version", m.versionString()
		case tg.Func && tg.Name == "current_setting" && len(tg.Args) == 1:
			v, ok := st.cat.Settings.Show(strings.ToLower(tg.Args[0].Text))
			if !ok {
				return Result{}, ddl.Errorf(ddl.CodeUndefinedObject, tg.Args[0].Pos, "unrecognized configuration parameter %q", tg.Args[0].Text)
			}
			col, val = "current_setting", v
		case tg.Func:
			return Result{}, ddl.Errorf(ddl.CodeNotSupported, tg.Pos, "function %s() is not supported by the sluice admin console", tg.Name)
		default:
			return Result{}, ddl.Errorf(ddl.CodeUndefinedColumn, tg.Pos, "column %q does not exist", tg.Name)
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
	return table{cols: cols, rows: rows}.result(""), nil
}

func (m *Manager) versionString() string {
	v := m.version0
	if v == "" {
		v = "dev"
	}
	return fmt.Sprintf("sluice %s admin console (PostgreSQL protocol 3.0)", v)
}

package views

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
)

// Table is a computed view: column names, their SQL types and rows of
// text as SHOW prints them, each row as long as Columns. Types is as long
// as Columns, or nil when every column is Text. An empty value of an
// Integer or Real column is NULL in SQL.
type Table struct {
	Columns []string
	Types   []Type
	Rows    [][]string
}

// Type is the SQL type of a view's column.
type Type uint8

// Column types.
const (
	Text    Type = iota // TEXT
	Integer             // INTEGER (64-bit)
	Real                // REAL (float64)
)

// String returns the type as SQLite declares it.
func (t Type) String() string {
	switch t {
	case Integer:
		return "INTEGER"
	case Real:
		return "REAL"
	}
	return "TEXT"
}

// TypeOf returns the type of column i of t.
func (t *Table) TypeOf(i int) Type {
	if i < len(t.Types) {
		return t.Types[i]
	}
	return Text
}

// newTable returns an empty table of the columns spec lists, separated by
// commas: a bare name is Text, "name int" Integer, "name real" Real.
func newTable(spec string) Table {
	var t Table
	for _, c := range strings.Split(spec, ",") {
		f := strings.Fields(c)
		typ := Text
		if len(f) == 2 {
			switch f[1] {
			case "int":
				typ = Integer
			case "real":
				typ = Real
			default:
				panic("views: bad column type in " + c)
			}
		}
		t.Columns = append(t.Columns, f[0])
		t.Types = append(t.Types, typ)
	}
	return t
}

// Lists are the SHOW names that return a list instead of a setting.
var Lists = []string{"sessions", "statements", "pools", "rules", "links", "users", "routes", "audit", "firings", "budget", "whatif", "network", "all"}

// Route is a proxy route as the views show it.
type Route struct {
	Name     string
	Protocol string
	Link     string // the link it attaches to, never ""
	Pool     string // default pool, "" for none
	// CanCancel reports whether the route can cancel a statement.
	CanCancel bool
	// Emulation is the route's own path emulation.
	Emulation catalog.Emulation
}

// Statement is a statement prepared for the statement views.
type Statement struct {
	Session  *session.Session
	Snapshot session.Snapshot
	// Bandwidth is its bytes both ways per second: over the evaluator's
	// window while it runs, else over its life.
	Bandwidth float64
}

// Class returns the link class a statement of pool is sent in: Low once
// penalised, else the pool's network priority, else Normal (no pool, or
// a pool the catalog no longer has).
func Class(cat *catalog.Catalog, pool string, penalized bool) link.Class {
	if penalized {
		return link.Low
	}
	if p := cat.Pools[pool]; p != nil {
		return p.Priority
	}
	return link.Normal
}

// Elapsed returns how long a statement has run at now, or ran if it
// ended: its execution time, from its admission (session.Snapshot
// ExecStarted); 0 while it waits for admission and for one that never
// ran.
func Elapsed(s *session.Snapshot, now time.Time) time.Duration {
	start := s.ExecStarted()
	if start.IsZero() {
		return 0
	}
	end := s.Ended
	if end.IsZero() {
		end = now
	}
	return max(end.Sub(start), 0)
}

// StatementRef names a statement as the HTTP API and the dashboard write
// it in JSON: its id, its session's id, and the route, user and pool it
// runs under.
type StatementRef struct {
	ID      uint64 `json:"id"`
	Session uint64 `json:"session"`
	Route   string `json:"route"`
	User    string `json:"user"`
	Pool    string `json:"pool"`
}

// Ref returns the StatementRef of s.
func Ref(s *session.Snapshot) StatementRef {
	return StatementRef{ID: s.ID, Session: s.SessionID, Route: s.Route, User: s.User, Pool: s.Pool}
}

// State is a statement's state as the views show it: "waiting" while it
// is held for admission, else its outcome ("running", "ok", ...).
func State(s *session.Snapshot) string {
	if s.Waiting && s.Outcome == session.Running {
		return "waiting"
	}
	return s.Outcome.String()
}

// Admission is a pool's admission counters: statements running under its
// active_statements and statements waiting for a slot.
type Admission struct {
	Running, Waiting int
}

// activeStatements writes a slot limit as GaussDB does: -1 unlimited.
func activeStatements(n int) string {
	if n <= 0 {
		return "-1"
	}
	return strconv.Itoa(n)
}

// RoutesByLink returns the names of routes by the link they attach to,
// each list in order.
func RoutesByLink(routes []Route) map[string][]string {
	out := map[string][]string{}
	for _, r := range routes {
		out[r.Link] = append(out[r.Link], r.Name)
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

// SessionsBy counts sessions by key (their pool or their user).
func SessionsBy(sessions []*session.Session, key func(*session.Session) string) map[string]int {
	n := map[string]int{}
	for _, s := range sessions {
		n[key(s)]++
	}
	return n
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

// Sessions is SHOW SESSIONS: one row per open session. unsent_bytes is
// what the kernel holds of the session's client socket, written by sluice
// and not yet sent (TCP_INFO notsent; 0 where the proxy cannot tell).
// kind is what the session is for (session.Kind: client, replication,
// basebackup, logical). coordinator is, for a shard connection of a
// distributed query (session.Session.Link), the id of the coordinator's
// session; empty (NULL) otherwise. state is SessionState's. slot is the
// pool whose active_statements slot the session holds, empty when none;
// idle_in_transaction is how long, in seconds, it has sat idle inside a
// transaction holding that slot (what the pool's idle_in_transaction
// bounds), NULL when it does not.
func Sessions(sessions []*session.Session, now time.Time) Table {
	t := newTable("id int, route, user, database, pool, client, bytes_up int, bytes_down int, unsent_bytes int, statements int, started, penalised, kind, coordinator int, state, slot, idle_in_transaction real")
	for _, s := range sessions {
		coord := ""
		if c := s.Coordinator(); c != nil {
			coord = itoa(int64(c.ID))
		}
		slot := s.Slot()
		idle := ""
		if d, ok := slot.IdleInTransaction(now); ok {
			idle = fmtSeconds(d)
		}
		t.Rows = append(t.Rows, []string{
			itoa(int64(s.ID)), s.Info.Route, s.User(), s.Database(), s.Pool(), s.Info.Client,
			itoa(s.BytesUp()), itoa(s.BytesDown()), itoa(s.UnsentBytes()), itoa(s.Statements()), fmtTime(s.Opened), yesNo(s.Penalized()),
			s.Kind().String(), coord, SessionState(s, slot), slot.Pool, idle,
		})
	}
	return t
}

// SessionState is a session's state as the views show it: "waiting"
// while a statement of it is held for admission, "active" while one
// runs, "idle in transaction" while it sits idle inside a transaction
// (known for sessions under admission only: slot.IdleSince), else
// "idle".
func SessionState(s *session.Session, slot session.Slot) string {
	state := "idle"
	for _, st := range s.Active() {
		if st.Waiting() {
			return "waiting"
		}
		state = "active"
	}
	if state == "idle" && !slot.IdleSince.IsZero() {
		return "idle in transaction"
	}
	return state
}

// IdleHolders counts by pool the sessions that sit idle inside a
// transaction while holding a slot of the pool.
func IdleHolders(sessions []*session.Session) map[string]int {
	n := map[string]int{}
	for _, s := range sessions {
		if sl := s.Slot(); sl.Pool != "" && !sl.IdleSince.IsZero() {
			n[sl.Pool]++
		}
	}
	return n
}

// parentText writes a shard statement's parent id, empty (NULL) for a
// statement without one.
func parentText(s *session.Snapshot) string {
	if s.ParentID == 0 {
		return ""
	}
	return itoa(int64(s.ParentID))
}

// Nodes writes a distributed statement's bytes per node, "route:up/down"
// joined by commas: its own route first (its own bytes), then each route
// of its shard statements in order of their first statement, a route
// that appears twice merged. Empty for a statement without shard
// statements.
func Nodes(route string, s *session.Snapshot) string {
	if len(s.Nodes) == 0 {
		return ""
	}
	type nb struct {
		route    string
		up, down int64
	}
	list := []nb{{route, s.BytesUp, s.BytesDown}}
next:
	for _, n := range s.Nodes {
		for i := range list {
			if list[i].route == n.Route {
				list[i].up += n.BytesUp
				list[i].down += n.BytesDown
				continue next
			}
		}
		list = append(list, nb{n.Route, n.BytesUp, n.BytesDown})
	}
	var b strings.Builder
	for i, n := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n.route)
		b.WriteByte(':')
		b.WriteString(itoa(n.up))
		b.WriteByte('/')
		b.WriteString(itoa(n.down))
	}
	return b.String()
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

// Statements is SHOW STATEMENTS, of the statements given (the running
// ones oldest first, then the recently ended ones newest first). state is
// "waiting" while a statement is held for admission; elapsed (execution)
// and block_time (held) are in seconds.
//
// A distributed statement (a coordinator's, with shard statements on
// other routes) shows its own bytes in bytes_up and bytes_down, its
// own plus its shard statements' in total_bytes_up and
// total_bytes_down, and every node's in nodes (see Nodes); its
// bandwidth_mbps is of the total. A shard statement names its
// coordinator statement in parent. For any other statement parent is
// empty (NULL), the totals equal its own bytes and nodes is empty.
func Statements(cat *catalog.Catalog, stmts []Statement, now time.Time) Table {
	t := newTable("id int, session int, route, user, database, pool, state, penalised, class, elapsed real, bytes_up int, bytes_down int, bandwidth_mbps real, rows int, sql, except_info, block_time real, parent int, total_bytes_up int, total_bytes_down int, nodes")
	for _, r := range stmts {
		s := &r.Snapshot
		t.Rows = append(t.Rows, []string{
			itoa(int64(s.ID)), itoa(int64(s.SessionID)), r.Session.Info.Route, s.User, r.Session.Database(), s.Pool, State(s), yesNo(s.Penalized),
			Class(cat, s.Pool, s.Penalized).String(), fmtSeconds(Elapsed(s, now)), itoa(s.BytesUp), itoa(s.BytesDown), fmtMBps(r.Bandwidth),
			rowsText(s), s.SQL, strings.Join(s.Except, "; "), fmtSeconds(s.BlockTime(now)),
			parentText(s), itoa(s.TotalUp), itoa(s.TotalDown), Nodes(r.Session.Info.Route, s),
		})
	}
	return t
}

// Pools is SHOW POOLS, with the open sessions counted by pool and the
// admission counters of adm (running: statements holding a slot of the
// pool's active_statements; waiting: statements held for one; both 0 for
// a pool without a limit, whose statements are not counted).
// active_statements is -1 when unlimited, queue_timeout and
// idle_in_transaction 0 when none. idle_holders counts the sessions that
// sit idle inside a transaction while they hold a slot of the pool (SHOW
// SESSIONS names them, with how long).
func Pools(cat *catalog.Catalog, sessions []*session.Session, adm map[string]Admission) Table {
	t := newTable("name, except_rule, weight int, network_priority, emulation, users int, sessions int, active_statements int, queue_timeout, running int, waiting int, idle_in_transaction, idle_holders int")
	n := SessionsBy(sessions, (*session.Session).Pool)
	idle := IdleHolders(sessions)
	for _, name := range catalog.SortedKeys(cat.Pools) {
		p := cat.Pools[name]
		a := adm[name]
		t.Rows = append(t.Rows, []string{
			name, strings.Join(p.ExceptRules, ","), strconv.Itoa(p.Weight), p.Priority.String(),
			catalog.FormatEmulation(p.Emulation), strconv.Itoa(len(cat.UsersOfPool(name))), strconv.Itoa(n[name]),
			activeStatements(p.ActiveStatements), units.FormatDuration(p.QueueTimeout), strconv.Itoa(a.Running), strconv.Itoa(a.Waiting),
			units.FormatDuration(p.IdleInTransaction), strconv.Itoa(idle[name]),
		})
	}
	return t
}

func threshold(v float64, unit string) string {
	if v == catalog.Unlimited {
		return "-1"
	}
	return catalog.FormatFloat(v) + unit
}

// blockThreshold writes a rule's blocktime: -1 when unset, else seconds.
func blockThreshold(v float64) string {
	if v <= 0 {
		return "-1"
	}
	return catalog.FormatFloat(v) + "s"
}

// Rules is SHOW RULES; firings returns how often a rule has fired.
// blocktime is -1 when the rule has none.
func Rules(cat *catalog.Catalog, firings func(rule string) uint64) Table {
	t := newTable("name, bandwidth, elapsedtime, action, pools, firings int, blocktime")
	for _, name := range catalog.SortedKeys(cat.Rules) {
		r := cat.Rules[name]
		t.Rows = append(t.Rows, []string{
			name, threshold(r.Bandwidth, "MB/s"), threshold(r.ElapsedTime, "s"), string(r.Action),
			strings.Join(cat.PoolsUsingRule(name), ","), strconv.FormatUint(firings(name), 10), blockThreshold(r.BlockTime),
		})
	}
	return t
}

// Links is SHOW LINKS: each catalog link with the routes attached to it
// and the counters of its runtime link (zero without one).
func Links(cat *catalog.Catalog, routes []Route, links map[string]*link.Link) Table {
	t := newTable("name, capacity, queue_size, emulation, routes, bytes_high int, bytes_normal int, bytes_low int, waiting int, queued int, max_active_statements int")
	byLink := RoutesByLink(routes)
	for _, name := range catalog.SortedKeys(cat.Links) {
		d := cat.Links[name]
		queue := "default"
		if d.QueueSize > 0 {
			queue = units.FormatBytes(d.QueueSize)
		}
		var by [link.NumClasses]int64
		var waiting, queued int64
		if l := links[name]; l != nil {
			ls := l.Stats()
			for _, dir := range ls.Directions {
				for c := range dir.Classes {
					by[c] += dir.Classes[c].Bytes
					waiting += dir.Classes[c].Waiting
				}
				queued += dir.QueueBytes()
			}
		}
		t.Rows = append(t.Rows, []string{
			name, units.FormatRate(d.Capacity), queue, catalog.FormatEmulation(d.Emulation), strings.Join(byLink[name], ","),
			itoa(by[link.High]), itoa(by[link.Normal]), itoa(by[link.Low]), itoa(waiting), itoa(queued), activeStatements(d.MaxActiveStatements),
		})
	}
	return t
}

// Users is SHOW USERS, with the open sessions counted by user.
func Users(cat *catalog.Catalog, sessions []*session.Session) Table {
	t := newTable("user, resource_pool, sessions int")
	n := SessionsBy(sessions, (*session.Session).User)
	for _, name := range catalog.SortedKeys(cat.Users) {
		t.Rows = append(t.Rows, []string{name, cat.Users[name].Pool, strconv.Itoa(n[name])})
	}
	return t
}

// Routes is SHOW ROUTES, in the order given.
func Routes(routes []Route) Table {
	t := newTable("name, protocol, link, pool, can_cancel, emulation")
	for _, r := range routes {
		t.Rows = append(t.Rows, []string{r.Name, r.Protocol, r.Link, r.Pool, yesNo(r.CanCancel), catalog.FormatEmulation(r.Emulation)})
	}
	return t
}

// Settings is SHOW ALL: every setting with its value and description.
func Settings(cat *catalog.Catalog) Table {
	t := newTable("name, setting, description")
	for _, name := range catalog.SettingNames() {
		v, _ := cat.Settings.Show(name)
		t.Rows = append(t.Rows, []string{name, v, catalog.SettingDescription(name)})
	}
	return t
}

// SessionWlmstat is pg_session_wlmstat: one row per open session.
// send_bytes and recv_bytes are the session's totals as the client sees
// them (sent to the server, received from it).
func SessionWlmstat(cat *catalog.Catalog, sessions []*session.Session, now time.Time) Table {
	t := newTable("datname, sessionid int, usename, appname, client_addr, resource_pool, priority, status, elapsed_time real, send_bytes int, recv_bytes int, except_info, query")
	for _, s := range sessions {
		status, query, elapsed, except := "idle", "", "", ""
		pen := false
		if act := s.Active(); len(act) > 0 {
			snap := act[len(act)-1].Snapshot()
			status, query = "active", snap.SQL
			if snap.Waiting {
				status = "waiting"
			}
			elapsed = fmtSeconds(Elapsed(&snap, now))
			except = strings.Join(snap.Except, "; ")
			pen = snap.Penalized
		}
		t.Rows = append(t.Rows, []string{
			s.Database(), itoa(int64(s.ID)), s.User(), s.Application(), s.Info.Client, s.Pool(),
			Class(cat, s.Pool(), pen).String(), status, elapsed, itoa(s.BytesUp()), itoa(s.BytesDown()), except, query,
		})
	}
	return t
}

// SessionStatistics is gs_wlm_session_statistics (of running
// statements) or gs_wlm_session_history (of ended ones), of the
// statements given. duration is in milliseconds as in GaussDB;
// bandwidth_mbps in MB/s. duration is the execution time (from
// admission) and block_time the time held for admission, both in
// milliseconds as GaussDB's; status is "waiting" while held. parent,
// total_send_bytes, total_recv_bytes and nodes are SHOW STATEMENTS'
// parent, total_bytes_up, total_bytes_down and nodes.
func SessionStatistics(cat *catalog.Catalog, stmts []Statement, now time.Time) Table {
	t := newTable("datname, sessionid int, queryid int, usename, application_name, client_addr, resource_pool, priority, start_time, finish_time, duration int, status, penalized, send_bytes int, recv_bytes int, bandwidth_mbps real, rows int, except_info, query, block_time int, parent int, total_send_bytes int, total_recv_bytes int, nodes")
	for _, r := range stmts {
		s := &r.Snapshot
		sess := r.Session
		t.Rows = append(t.Rows, []string{
			sess.Database(), itoa(int64(s.SessionID)), itoa(int64(s.ID)), s.User, sess.Application(), sess.Info.Client,
			s.Pool, Class(cat, s.Pool, s.Penalized).String(), fmtTime(s.Started), fmtTime(s.Ended), itoa(Elapsed(s, now).Milliseconds()), State(s),
			yesNo(s.Penalized), itoa(s.BytesUp), itoa(s.BytesDown), fmtMBps(r.Bandwidth), rowsText(s),
			strings.Join(s.Except, "; "), s.SQL, itoa(s.BlockTime(now).Milliseconds()),
			parentText(s), itoa(s.TotalUp), itoa(s.TotalDown), Nodes(sess.Info.Route, s),
		})
	}
	return t
}

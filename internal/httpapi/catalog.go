package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// Emulation is a set of path-emulation options, spelled as the console
// takes them ("delay": "10ms", "loss": "gemodel 1% 25%"), rendered
// through the catalog's one formatter (catalog.EmulationOptions) so that
// every option the console shows is here too; unset options are absent.
// Link and Pool write its entries beside their own fields.
type Emulation map[string]string

func emulationJSON(e wlm.Emulation) Emulation {
	o := Emulation{}
	for _, opt := range catalog.EmulationOptions(e) {
		o[opt.Name] = opt.Value
	}
	return o
}

// withEmulation marshals v, a struct, as a JSON object with e's entries
// added to its fields.
func withEmulation(v any, e Emulation) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(e) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, val := range e {
		if m[k], err = json.Marshal(val); err != nil {
			return nil, err
		}
	}
	return json.Marshal(m)
}

// Link is a link as /api/links shows it. Capacity is a rate ("125MB/s")
// or "unlimited"; queue_size is absent for the default. Routes, Bytes
// (by direction, then class), Waiting and Queued are read-only.
type Link struct {
	Name      string `json:"name"`
	Capacity  string `json:"capacity"`
	QueueSize string `json:"queue_size,omitempty"`
	// MaxActiveStatements bounds the statements of the link's sessions
	// running at once; -1 unlimited.
	MaxActiveStatements int                         `json:"max_active_statements"`
	Emulation           Emulation                   `json:"-"`
	Routes              []string                    `json:"routes"`
	Bytes               map[string]map[string]int64 `json:"bytes"`
	Waiting             int64                       `json:"waiting_bytes"`
	Queued              int64                       `json:"device_queue_bytes"`
}

// Rule is an exception rule. Bandwidth is in MB/s, ElapsedTime and
// BlockTime in seconds, -1 for unlimited. Pools and Firings are
// read-only.
type Rule struct {
	Name        string   `json:"name"`
	Bandwidth   float64  `json:"bandwidth"`
	ElapsedTime float64  `json:"elapsedtime"`
	BlockTime   float64  `json:"blocktime"`
	Action      string   `json:"action"`
	Pools       []string `json:"pools"`
	Firings     uint64   `json:"firings"`
}

// Pool is a resource pool. ExceptRule may be given as an array or a
// comma-separated string. ActiveStatements is -1 when unlimited,
// QueueTimeout absent when there is none. Users, Sessions, Running and
// Waiting (statements holding a slot, and held waiting for one) are
// read-only.
type Pool struct {
	Name             string   `json:"name"`
	ExceptRule       []string `json:"except_rule"`
	Weight           int      `json:"weight"`
	NetworkPriority  string   `json:"network_priority"`
	ActiveStatements int      `json:"active_statements"`
	QueueTimeout     string   `json:"queue_timeout,omitempty"`
	// IdleInTransaction is absent when there is none.
	IdleInTransaction string    `json:"idle_in_transaction,omitempty"`
	Emulation         Emulation `json:"-"`
	Users             []string  `json:"users"`
	Sessions          int       `json:"sessions"`
	Running           int       `json:"running"`
	Waiting           int       `json:"waiting"`
}

// MarshalJSON writes l with its emulation options among its fields.
func (l Link) MarshalJSON() ([]byte, error) {
	type fields Link
	return withEmulation(fields(l), l.Emulation)
}

// MarshalJSON writes p with its emulation options among its fields.
func (p Pool) MarshalJSON() ([]byte, error) {
	type fields Pool
	return withEmulation(fields(p), p.Emulation)
}

// User is a user's binding to a resource pool ("" for none). Sessions is
// read-only.
type User struct {
	Name         string `json:"name"`
	ResourcePool string `json:"resource_pool"`
	Sessions     int    `json:"sessions"`
}

// Setting is a global setting as SHOW writes it.
type Setting struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	Description string `json:"description"`
}

// kind describes one catalog collection of the API.
type kind struct {
	path     string   // "links"
	kind     ddl.Kind // ddl.Link
	readOnly []string // output fields ignored on input
	// find returns every object in name order, or the one named only
	// ("" for all); nil when there is none.
	find func(s *Server, only string) []any
}

var kinds = []kind{
	{path: "links", kind: ddl.Link, readOnly: []string{"routes", "bytes", "waiting_bytes", "device_queue_bytes"}, find: (*Server).links},
	{path: "rules", kind: ddl.Rule, readOnly: []string{"pools", "firings"}, find: (*Server).rules},
	{path: "pools", kind: ddl.Pool, readOnly: []string{"users", "sessions", "running", "waiting"}, find: (*Server).pools},
	{path: "users", kind: ddl.User, readOnly: []string{"sessions"}, find: (*Server).users},
}

// list returns every object of k in name order, empty (not nil) for none.
func (k kind) list(s *Server) []any {
	if xs := k.find(s, ""); xs != nil {
		return xs
	}
	return []any{}
}

// one returns the object of k named name; ok is false when it does not
// exist.
func (k kind) one(s *Server, name string) (v any, ok bool) {
	xs := k.find(s, name)
	if len(xs) == 0 {
		return nil, false
	}
	return xs[0], true
}

// options returns the body's fields other than name and the read-only
// ones as k's options. alter makes null DEFAULT; create leaves null
// fields out.
func (k kind) options(rq *request, b body, alter bool) ([]ddl.Option, error) {
	if k.kind == ddl.User {
		return userOptions(rq, b, k.readOnly)
	}
	return rq.options(b, alter, append(k.readOnly, "name")...)
}

// each returns view of every entry of m, in key order, when only is "";
// else of the entry only alone, or nothing when m lacks it.
func each[V any](m map[string]V, only string, view func(name string, v V) any) []any {
	names := catalog.SortedKeys(m)
	if only != "" {
		names = nil
		if _, ok := m[only]; ok {
			names = []string{only}
		}
	}
	var out []any
	for _, name := range names {
		out = append(out, view(name, m[name]))
	}
	return out
}

// sessionsBy counts the open sessions by key (their pool or user).
func (s *Server) sessionsBy(key func(*session.Session) string) map[string]int {
	return views.SessionsBy(s.rt.Registry().Sessions(), key)
}

// links returns every link, or the one named only.
func (s *Server) links(only string) []any {
	routes := s.rt.RoutesByLink()
	return each(s.cat.Catalog().Links, only, func(name string, d *wlm.LinkDef) any {
		l := Link{Name: name, Capacity: units.FormatRate(d.Capacity), Emulation: emulationJSON(d.Emulation),
			Routes: routes[name], Bytes: map[string]map[string]int64{}, MaxActiveStatements: slotLimit(d.MaxActiveStatements)}
		if l.Routes == nil {
			l.Routes = []string{}
		}
		if d.QueueSize > 0 {
			l.QueueSize = units.FormatBytes(d.QueueSize)
		}
		if rl := s.rt.Link(name); rl != nil {
			st := rl.Stats()
			for i, ds := range st.Directions {
				by := map[string]int64{}
				for c := range ds.Classes {
					by[link.Class(c).String()] = ds.Classes[c].Bytes
					l.Waiting += ds.Classes[c].Waiting
				}
				l.Bytes[link.Direction(i).String()] = by
				l.Queued += ds.QueueBytes()
			}
		}
		return l
	})
}

func (s *Server) rules(only string) []any {
	cat := s.cat.Catalog()
	stats := s.ruleStats.Stats()
	return each(cat.Rules, only, func(name string, r *wlm.Rule) any {
		return Rule{
			Name: name, Bandwidth: r.Bandwidth, ElapsedTime: r.ElapsedTime, BlockTime: blockTime(r.BlockTime), Action: string(r.Action),
			Pools: append([]string{}, cat.PoolsUsingRule(name)...), Firings: stats.RuleFirings(name),
		}
	})
}

func (s *Server) pools(only string) []any {
	cat := s.cat.Catalog()
	sessions := s.sessionsBy((*session.Session).Pool)
	adm := s.adm.AdmissionStats()
	return each(cat.Pools, only, func(name string, p *wlm.Pool) any {
		out := Pool{
			Name: name, ExceptRule: append([]string{}, p.ExceptRules...), Weight: p.Weight, NetworkPriority: p.Priority.String(),
			ActiveStatements: slotLimit(p.ActiveStatements),
			Emulation:        emulationJSON(p.Emulation), Users: append([]string{}, cat.UsersOfPool(name)...), Sessions: sessions[name],
			Running: adm[name].Running, Waiting: adm[name].Waiting,
		}
		if p.QueueTimeout > 0 {
			out.QueueTimeout = units.FormatDuration(p.QueueTimeout)
		}
		if p.IdleInTransaction > 0 {
			out.IdleInTransaction = units.FormatDuration(p.IdleInTransaction)
		}
		return out
	})
}

// slotLimit writes a slot limit as the console does: -1 unlimited.
func slotLimit(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// blockTime writes a rule's blocktime as the console does: -1 unset.
func blockTime(v float64) float64 {
	if v <= 0 {
		return -1
	}
	return v
}

func (s *Server) users(only string) []any {
	sessions := s.sessionsBy((*session.Session).User)
	return each(s.cat.Catalog().Users, only, func(name string, u *wlm.UserDef) any {
		return User{Name: name, ResourcePool: u.Pool, Sessions: sessions[name]}
	})
}

// actor is who a request's catalog changes are recorded as: surface
// http, the client's address, and user "token" when the API has a token
// (which authorize has checked), "" otherwise.
func (s *Server) actor(r *http.Request) wlm.Actor {
	a := wlm.Actor{Surface: wlm.SurfaceHTTP, Addr: r.RemoteAddr}
	if s.token != "" {
		a.User = "token"
	}
	if inst := r.Header.Get(fleet.InstanceHeader); inst != "" && fleet.CheckName(inst) == nil {
		// Another instance of the fleet, forwarding a command.
		a.User = "instance:" + inst
	}
	return a
}

// exec runs one statement built by rq.
func (s *Server) exec(ctx context.Context, rq *request, st ddl.Statement) (wlm.Result, *Error) {
	res, err := s.cat.ExecStatement(ctx, st)
	if err != nil {
		return wlm.Result{}, fromDDL(err, rq)
	}
	return res, nil
}

// apply runs st, which creates or alters the object of k named name, and
// answers status with the object as it then stands.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, k kind, name string, rq *request, st ddl.Statement, status int) {
	if _, e := s.exec(r.Context(), rq, st); e != nil {
		writeError(w, e)
		return
	}
	v, _ := k.one(s, name)
	writeJSON(w, status, v)
}

// execNoContent runs st and answers 204.
func (s *Server) execNoContent(w http.ResponseWriter, r *http.Request, rq *request, st ddl.Statement) {
	if _, e := s.exec(r.Context(), rq, st); e != nil {
		writeError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) registerCatalog(mux *http.ServeMux) {
	for _, k := range kinds {
		mux.HandleFunc("GET /api/"+k.path, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, k.list(s))
		})
		mux.HandleFunc("GET /api/"+k.path+"/{name}", func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("name")
			v, ok := k.one(s, name)
			if !ok {
				writeError(w, notFound("%s %q does not exist", noun(k), name))
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
		mux.HandleFunc("POST /api/"+k.path, func(w http.ResponseWriter, r *http.Request) { s.create(w, r, k) })
		mux.HandleFunc("PATCH /api/"+k.path+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.alter(w, r, k) })
		mux.HandleFunc("DELETE /api/"+k.path+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.drop(w, r, k) })
	}
	mux.HandleFunc("GET /api/settings", s.listSettings)
	mux.HandleFunc("PATCH /api/settings", s.setSettings)
	mux.HandleFunc("GET /api/settings/{name}", s.showSetting)
	mux.HandleFunc("PATCH /api/settings/{name}", s.setSetting)
	mux.HandleFunc("DELETE /api/settings/{name}", s.resetSetting)
}

func noun(k kind) string { return k.kind.Noun() }

// userOptions returns a user's options: resource_pool, a pool's name or
// DEFAULT for null. Only resource_pool may be set.
func userOptions(rq *request, b body, readOnly []string) ([]ddl.Option, error) {
	var opts []ddl.Option
	for _, k := range b.keys(append(readOnly, "name")...) {
		if k != "resource_pool" {
			return nil, badField(k, "unknown field %s of a user (valid: name, resource_pool)", k)
		}
		v, err := optionValue(k, b[k])
		if err != nil {
			return nil, err
		}
		opts = append(opts, rq.option(k, k, v))
	}
	return opts, nil
}

// statement starts the request of a CREATE (alter false) or an ALTER
// (alter true) of the object name of kind k: its name and the options b
// sets. A bad option is written to w and gives ok false.
func (k kind) statement(w http.ResponseWriter, b body, name string, alter bool) (rq *request, n ddl.Name, opts []ddl.Option, ok bool) {
	rq = &request{}
	n = rq.name("name", name)
	opts, err := k.options(rq, b, alter)
	if err != nil {
		writeError(w, fromDDL(err, rq))
		return nil, ddl.Name{}, nil, false
	}
	return rq, n, opts, true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, k kind) {
	b, e := readObject(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	name, ok, e := b.str("name")
	if e != nil {
		writeError(w, e)
		return
	}
	if !ok || name == "" {
		writeError(w, badField("name", "missing required field: name"))
		return
	}
	rq, n, opts, ok := k.statement(w, b, name, false)
	if !ok {
		return
	}
	s.apply(w, r, k, name, rq, &ddl.Create{Kind: k.kind, Name: n, Options: opts}, http.StatusCreated)
}

func (s *Server) alter(w http.ResponseWriter, r *http.Request, k kind) {
	name := r.PathValue("name")
	b, e := readObject(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	if n, ok, e := b.str("name"); e != nil || (ok && n != name) {
		if e == nil {
			e = badField("name", "field name %q differs from the %s in the path (%q): renaming is not supported", n, noun(k), name)
		}
		writeError(w, e)
		return
	}
	rq, n, opts, ok := k.statement(w, b, name, true)
	if !ok {
		return
	}
	if len(opts) == 0 {
		writeError(w, &Error{Status: http.StatusBadRequest, Message: "nothing to change: the body sets no field"})
		return
	}
	s.apply(w, r, k, name, rq, &ddl.Alter{Kind: k.kind, Name: n, Options: opts}, http.StatusOK)
}

func (s *Server) drop(w http.ResponseWriter, r *http.Request, k kind) {
	rq := &request{}
	st := &ddl.Drop{Kind: k.kind, Names: []ddl.Name{rq.name("name", r.PathValue("name"))}}
	switch c := r.URL.Query().Get("cascade"); c {
	case "", "false", "0":
	case "true", "1":
		st.Cascade = true
	default:
		writeError(w, badField("cascade", "query parameter cascade: bad value %q (want true or false)", c))
		return
	}
	s.execNoContent(w, r, rq, st)
}

func (s *Server) settingsList(ctx context.Context) ([]Setting, *Error) {
	res, e := s.exec(ctx, &request{}, &ddl.Show{Name: "all"})
	if e != nil {
		return nil, e
	}
	out := make([]Setting, 0, len(res.Rows))
	for _, row := range res.Rows {
		if len(row) >= 3 {
			out = append(out, Setting{Name: row[0], Value: row[1], Description: row[2]})
		}
	}
	return out, nil
}

func (s *Server) listSettings(w http.ResponseWriter, r *http.Request) {
	list, e := s.settingsList(r.Context())
	respond(w, http.StatusOK, list, e)
}

func (s *Server) setting(ctx context.Context, name string) (Setting, *Error) {
	list, e := s.settingsList(ctx)
	if e != nil {
		return Setting{}, e
	}
	for _, x := range list {
		if x.Name == name {
			return x, nil
		}
	}
	names := make([]string, len(list))
	for i, x := range list {
		names[i] = x.Name
	}
	return Setting{}, notFound("setting %q does not exist (settings: %s)", name, strings.Join(names, ", "))
}

func (s *Server) showSetting(w http.ResponseWriter, r *http.Request) {
	x, e := s.setting(r.Context(), r.PathValue("name"))
	respond(w, http.StatusOK, x, e)
}

// set runs SET name = 'value' (or TO DEFAULT for null), blaming field.
func (s *Server) set(ctx context.Context, name, field string, raw []byte) *Error {
	v, e := optionValue(field, raw)
	if e != nil {
		return e
	}
	rq := &request{}
	namePos := rq.pos("name")
	st := &ddl.Set{Name: strings.ToLower(name), NamePos: namePos, Value: v.ddl(rq.pos(field))}
	_, e = s.exec(ctx, rq, st)
	if e != nil && e.Field == "name" && field != "value" {
		e.Field = field
	}
	return e
}

// setSetting is PATCH /api/settings/{name} with {"value": ...}; a null
// value restores the default.
func (s *Server) setSetting(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, e := readObject(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	if ks := b.keys("value", "name", "description"); len(ks) > 0 {
		writeError(w, badField(ks[0], "unknown field %s of a setting (valid: value)", ks[0]))
		return
	}
	v, ok := b["value"]
	if !ok {
		writeError(w, badField("value", "missing required field: value"))
		return
	}
	if e := s.set(r.Context(), name, "value", v); e != nil {
		writeError(w, e)
		return
	}
	x, e := s.setting(r.Context(), name)
	respond(w, http.StatusOK, x, e)
}

// setSettings is PATCH /api/settings with {"name": value, ...}. The
// settings are set one by one in name order, as several SET statements
// would be; the first failure stops, and those before it stay set.
func (s *Server) setSettings(w http.ResponseWriter, r *http.Request) {
	b, e := readObject(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	if len(b) == 0 {
		writeError(w, &Error{Status: http.StatusBadRequest, Message: "nothing to change: the body sets no setting"})
		return
	}
	for _, k := range b.keys() {
		if e := s.set(r.Context(), k, k, b[k]); e != nil {
			if e.Status == http.StatusNotFound {
				e.Status, e.Field = http.StatusBadRequest, k
			}
			writeError(w, e)
			return
		}
	}
	s.listSettings(w, r)
}

func (s *Server) resetSetting(w http.ResponseWriter, r *http.Request) {
	rq := &request{}
	st := &ddl.Reset{Name: strings.ToLower(r.PathValue("name")), NamePos: rq.pos("name")}
	s.execNoContent(w, r, rq, st)
}

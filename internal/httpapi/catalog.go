package httpapi

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm"
)

// Emulation is a set of path-emulation options, spelled as the console
// takes them; unset options are absent.
type Emulation struct {
	Delay        string `json:"delay,omitempty"`
	Jitter       string `json:"jitter,omitempty"`
	Distribution string `json:"distribution,omitempty"`
	Correlation  string `json:"correlation,omitempty"`
	Rate         string `json:"rate,omitempty"`
	Burst        string `json:"burst,omitempty"`
	Loss         string `json:"loss,omitempty"`
	RTO          string `json:"rto,omitempty"`
	Window       string `json:"window,omitempty"`
	Seed         string `json:"seed,omitempty"`
}

func emulationJSON(e wlm.Emulation) Emulation {
	var o Emulation
	dur := func(d *wlm.Duration) string {
		if d == nil {
			return ""
		}
		return units.FormatDuration(time.Duration(*d))
	}
	o.Delay, o.Jitter, o.RTO = dur(e.Delay), dur(e.Jitter), dur(e.RTO)
	if e.Distribution != nil {
		o.Distribution = e.Distribution.String()
	}
	if e.Correlation != nil {
		o.Correlation = strconv.FormatFloat(*e.Correlation, 'f', -1, 64)
	}
	if e.Rate != nil {
		o.Rate = units.FormatRate(*e.Rate)
	}
	if e.Burst != nil {
		o.Burst = units.FormatBytes(*e.Burst)
	}
	if e.Loss != nil {
		o.Loss = strconv.FormatFloat(*e.Loss*100, 'f', -1, 64) + "%"
	}
	if e.Window != nil {
		o.Window = units.FormatBytes(*e.Window)
	}
	if e.Seed != nil {
		o.Seed = strconv.FormatInt(*e.Seed, 10)
	}
	return o
}

// Link is a link as /api/links shows it. Capacity is a rate ("125MB/s")
// or "unlimited"; queue_size is absent for the default. Routes, Bytes
// (by direction, then class), Waiting and Queued are read-only.
type Link struct {
	Name      string `json:"name"`
	Capacity  string `json:"capacity"`
	QueueSize string `json:"queue_size,omitempty"`
	Emulation
	Routes  []string                    `json:"routes"`
	Bytes   map[string]map[string]int64 `json:"bytes"`
	Waiting int64                       `json:"waiting_bytes"`
	Queued  int64                       `json:"device_queue_bytes"`
}

// Rule is an exception rule. Bandwidth is in MB/s and ElapsedTime in
// seconds, -1 for unlimited. Pools and Firings are read-only.
type Rule struct {
	Name        string   `json:"name"`
	Bandwidth   float64  `json:"bandwidth"`
	ElapsedTime float64  `json:"elapsedtime"`
	Action      string   `json:"action"`
	Pools       []string `json:"pools"`
	Firings     uint64   `json:"firings"`
}

// Pool is a resource pool. ExceptRule may be given as an array or a
// comma-separated string. Users and Sessions are read-only.
type Pool struct {
	Name            string   `json:"name"`
	ExceptRule      []string `json:"except_rule"`
	Weight          int      `json:"weight"`
	NetworkPriority string   `json:"network_priority"`
	Emulation
	Users    []string `json:"users"`
	Sessions int      `json:"sessions"`
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
	sql      string   // "LINK"
	readOnly []string // output fields ignored on input
	list     func(s *Server) []any
	one      func(s *Server, name string) (any, bool)
}

var kinds = []kind{
	{path: "links", sql: "LINK", readOnly: []string{"routes", "bytes", "waiting_bytes", "device_queue_bytes"},
		list: func(s *Server) []any { return s.links("") }, one: func(s *Server, n string) (any, bool) { return first(s.links(n)) }},
	{path: "rules", sql: "EXCEPT RULE", readOnly: []string{"pools", "firings"},
		list: func(s *Server) []any { return s.rules("") }, one: func(s *Server, n string) (any, bool) { return first(s.rules(n)) }},
	{path: "pools", sql: "RESOURCE POOL", readOnly: []string{"users", "sessions"},
		list: func(s *Server) []any { return s.pools("") }, one: func(s *Server, n string) (any, bool) { return first(s.pools(n)) }},
	{path: "users", sql: "USER", readOnly: []string{"sessions"},
		list: func(s *Server) []any { return s.users("") }, one: func(s *Server, n string) (any, bool) { return first(s.users(n)) }},
}

func first(xs []any) (any, bool) {
	if len(xs) == 0 {
		return nil, false
	}
	return xs[0], true
}

func sorted[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// links returns every link, or the one named only.
func (s *Server) links(only string) []any {
	cat := s.mgr.Catalog()
	routes := map[string][]string{}
	all := s.mgr.Routes()
	for _, rn := range sorted(all) {
		r := all[rn]
		ln := r.Link
		if ln == "" {
			ln = wlm.DefaultLink
		}
		routes[ln] = append(routes[ln], rn)
	}
	var out []any
	for _, name := range sorted(cat.Links) {
		if only != "" && name != only {
			continue
		}
		d := cat.Links[name]
		l := Link{Name: name, Capacity: units.FormatRate(d.Capacity), Emulation: emulationJSON(d.Emulation),
			Routes: routes[name], Bytes: map[string]map[string]int64{}}
		if l.Routes == nil {
			l.Routes = []string{}
		}
		if d.QueueSize > 0 {
			l.QueueSize = units.FormatBytes(d.QueueSize)
		}
		if rl := s.mgr.Link(name); rl != nil {
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
		out = append(out, l)
	}
	return out
}

func (s *Server) rules(only string) []any {
	cat := s.mgr.Catalog()
	stats := s.mgr.Stats()
	var out []any
	for _, name := range sorted(cat.Rules) {
		if only != "" && name != only {
			continue
		}
		r := cat.Rules[name]
		pools := []string{}
		for _, pn := range sorted(cat.Pools) {
			if contains(cat.Pools[pn].ExceptRules, name) {
				pools = append(pools, pn)
			}
		}
		out = append(out, Rule{
			Name: name, Bandwidth: r.Bandwidth, ElapsedTime: r.ElapsedTime, Action: string(r.Action), Pools: pools,
			Firings: stats.Firings[wlm.FiringKey{Rule: name, Action: wlm.Abort}] + stats.Firings[wlm.FiringKey{Rule: name, Action: wlm.Penalty}],
		})
	}
	return out
}

func (s *Server) pools(only string) []any {
	cat := s.mgr.Catalog()
	sessions := map[string]int{}
	for _, ss := range s.mgr.Registry().Sessions() {
		sessions[ss.Pool()]++
	}
	var out []any
	for _, name := range sorted(cat.Pools) {
		if only != "" && name != only {
			continue
		}
		p := cat.Pools[name]
		users := []string{}
		for _, un := range sorted(cat.Users) {
			if cat.Users[un].Pool == name {
				users = append(users, un)
			}
		}
		rules := append([]string{}, p.ExceptRules...)
		out = append(out, Pool{
			Name: name, ExceptRule: rules, Weight: p.Weight, NetworkPriority: p.Priority.String(),
			Emulation: emulationJSON(p.Emulation), Users: users, Sessions: sessions[name],
		})
	}
	return out
}

func (s *Server) users(only string) []any {
	cat := s.mgr.Catalog()
	sessions := map[string]int{}
	for _, ss := range s.mgr.Registry().Sessions() {
		sessions[ss.User()]++
	}
	var out []any
	for _, name := range sorted(cat.Users) {
		if only != "" && name != only {
			continue
		}
		out = append(out, User{Name: name, ResourcePool: cat.Users[name].Pool, Sessions: sessions[name]})
	}
	return out
}

// exec runs one built statement.
func (s *Server) exec(ctx context.Context, st *statement) (wlm.Result, *Error) {
	res, err := s.mgr.Exec(ctx, st.String())
	if err != nil {
		return wlm.Result{}, fromDDL(err, st)
	}
	return res, nil
}

func (s *Server) registerCatalog(mux *http.ServeMux) {
	for _, k := range kinds {
		mux.HandleFunc("GET /api/"+k.path, func(w http.ResponseWriter, r *http.Request) {
			list := k.list(s)
			if list == nil {
				list = []any{}
			}
			writeJSON(w, http.StatusOK, list)
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

func noun(k kind) string {
	switch k.path {
	case "rules":
		return "except rule"
	case "pools":
		return "resource pool"
	case "users":
		return "user"
	}
	return "link"
}

// userOptions writes a user's clauses: RESOURCE POOL 'pool' or DEFAULT.
// Only resource_pool may be set.
func userOptions(st *statement, b body, readOnly []string) (bool, *Error) {
	wrote := false
	for _, k := range b.keys(append(readOnly, "name")...) {
		if k != "resource_pool" {
			return false, badField(k, "unknown field %s of a user (valid: name, resource_pool)", k)
		}
		v, err := optionValue(k, b[k])
		if err != nil {
			return false, err
		}
		st.raw(" RESOURCE POOL ")
		if v.null {
			st.field(k, "DEFAULT")
		} else {
			st.field(k, quoteLiteral(v.text))
		}
		wrote = true
	}
	return wrote, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, k kind) {
	raw, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	b, e := decodeBody(raw)
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
	st := &statement{}
	st.raw("CREATE "+k.sql+" ").field("name", quoteIdent(name))
	if k.path == "users" {
		_, e = userOptions(st, b, k.readOnly)
	} else {
		_, e = st.withOptions(b, false, append(k.readOnly, "name")...)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	if _, e := s.exec(r.Context(), st); e != nil {
		writeError(w, e)
		return
	}
	v, _ := k.one(s, name)
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) alter(w http.ResponseWriter, r *http.Request, k kind) {
	name := r.PathValue("name")
	raw, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	b, e := decodeBody(raw)
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
	st := &statement{}
	st.raw("ALTER "+k.sql+" ").field("name", quoteIdent(name))
	var wrote bool
	if k.path == "users" {
		wrote, e = userOptions(st, b, k.readOnly)
	} else {
		wrote, e = st.withOptions(b, true, append(k.readOnly, "name")...)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	if !wrote {
		writeError(w, &Error{Status: http.StatusBadRequest, Message: "nothing to change: the body sets no field"})
		return
	}
	if _, e := s.exec(r.Context(), st); e != nil {
		writeError(w, e)
		return
	}
	v, _ := k.one(s, name)
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) drop(w http.ResponseWriter, r *http.Request, k kind) {
	name := r.PathValue("name")
	st := &statement{}
	st.raw("DROP "+k.sql+" ").field("name", quoteIdent(name))
	switch c := r.URL.Query().Get("cascade"); c {
	case "", "false", "0":
	case "true", "1":
		st.raw(" CASCADE")
	default:
		writeError(w, badField("cascade", "query parameter cascade: bad value %q (want true or false)", c))
		return
	}
	if _, e := s.exec(r.Context(), st); e != nil {
		writeError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) settingsList(ctx context.Context) ([]Setting, *Error) {
	res, e := s.exec(ctx, (&statement{}).raw("SHOW ALL"))
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
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, list)
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
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, x)
}

// set runs SET name = 'value' (or TO DEFAULT for null), blaming field.
func (s *Server) set(ctx context.Context, name, field string, raw []byte) *Error {
	v, e := optionValue(field, raw)
	if e != nil {
		return e
	}
	st := &statement{}
	st.raw("SET ").field("name", quoteIdent(name))
	if v.null {
		st.raw(" TO ").field(field, "DEFAULT")
	} else {
		st.raw(" = ").field(field, quoteLiteral(v.text))
	}
	_, e = s.exec(ctx, st)
	if e != nil && e.Field == "name" && field != "value" {
		e.Field = field
	}
	return e
}

// setSetting is PATCH /api/settings/{name} with {"value": ...}; a null
// value restores the default.
func (s *Server) setSetting(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	raw, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	b, e := decodeBody(raw)
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
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, x)
}

// setSettings is PATCH /api/settings with {"name": value, ...}. The
// settings are set one by one in name order, as several SET statements
// would be; the first failure stops, and those before it stay set.
func (s *Server) setSettings(w http.ResponseWriter, r *http.Request) {
	raw, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	b, e := decodeBody(raw)
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
	st := &statement{}
	st.raw("RESET ").field("name", quoteIdent(r.PathValue("name")))
	if _, e := s.exec(r.Context(), st); e != nil {
		writeError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

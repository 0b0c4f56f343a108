package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// DefaultTimeout bounds one instance's answer to a cluster-wide view or
// a forwarded session command.
const DefaultTimeout = 2 * time.Second

// InstanceHeader names, on a request one instance sends another, the
// instance that sends it: the receiver's audit trail records it as the
// actor.
const InstanceHeader = "X-Sluice-Instance"

// maxAnswer bounds the body of another instance's answer, in bytes.
const maxAnswer = 64 << 20

// InstanceColumn is the column every cluster-wide row begins with.
const InstanceColumn = "instance"

// Local is this instance's own views (wlm.Views.ViewTables).
type Local interface {
	ViewTables(names []string) map[string]views.Table
}

// ClusterOptions configure NewCluster.
type ClusterOptions struct {
	// Self returns this instance's record as of now. Required.
	Self func() Member
	// Members is the membership; nil without etcd, when the cluster is
	// this instance alone.
	Members *Membership
	// Local computes this instance's views. Required.
	Local Local
	// Token is the bearer token sent to the other instances' HTTP APIs
	// (fleet_token, else http.token); "" sends none. A secret: never
	// logged.
	Token string
	// Timeout bounds each instance's answer; 0 means DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil means a client of the Cluster's own.
	Client *http.Client
	// Clock times the timeouts; nil means clock.Real.
	Clock clock.Clock
	// Logger receives the instances that did not answer, at DEBUG; nil
	// discards it.
	Logger *slog.Logger
}

// Cluster answers the cluster-wide views and forwards session commands
// to the instance that holds the session. It keeps no state of its own
// beyond its options and is safe for concurrent use.
type Cluster struct {
	self    func() Member
	members atomic.Pointer[Membership] // nil until SetMembers
	local   Local
	token   string
	timeout time.Duration
	client  *http.Client
	clk     clock.Clock
	log     *slog.Logger
}

// NewCluster returns a Cluster of o.
func NewCluster(o ClusterOptions) (*Cluster, error) {
	if o.Self == nil || o.Local == nil {
		return nil, errors.New("fleet: ClusterOptions.Self and ClusterOptions.Local are required")
	}
	c := &Cluster{self: o.Self, local: o.Local, token: o.Token, timeout: o.Timeout, client: o.Client, clk: o.Clock, log: o.Logger}
	c.members.Store(o.Members)
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.client == nil {
		c.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}}
	}
	if c.clk == nil {
		c.clk = clock.Real{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// View is what the admin console and the HTTP API ask of the fleet:
// the membership and the cluster-wide views. *Cluster implements it;
// implementations are safe for concurrent use.
type View interface {
	// Name is this instance's name.
	Name() string
	// Instances returns the live instances.
	Instances(ctx context.Context) []Instance
	// Tables returns the views of names of every live instance, merged
	// (first column instance), and a notice for each instance that did
	// not answer.
	Tables(ctx context.Context, names []string) (map[string]views.Table, []string)
	// Forward runs a session command on another instance.
	Forward(ctx context.Context, instance string, id uint64, terminate bool) (SessionAnswer, error)
}

var _ View = (*Cluster)(nil)

// SetMembers gives the Cluster its membership once the instance has
// joined; before, it is this instance alone.
func (c *Cluster) SetMembers(m *Membership) { c.members.Store(m) }

// Name is this instance's name.
func (c *Cluster) Name() string { return c.self().Name }

// Instances returns the live instances by name: this one as it stands
// now, the others as their records were last read, each with what is
// left of its lease when etcd answers within the timeout.
func (c *Cluster) Instances(ctx context.Context) []Instance {
	me := c.self()
	var ttls map[string]float64
	var out []Instance
	members := c.members.Load()
	if members != nil {
		tctx, cancel := clock.WithTimeout(ctx, c.clk, c.timeout, errTimeout)
		ttls = members.TTLs(tctx)
		cancel()
		for _, in := range members.Members() {
			if in.Name != me.Name {
				out = append(out, in)
			}
		}
	}
	self := Instance{Member: me, Self: true, LastSeen: c.clk.Now()}
	if members != nil {
		for _, in := range members.Members() {
			if in.Name == me.Name {
				self.Incarnation = in.Incarnation
				if self.StartedAt.IsZero() {
					self.StartedAt = in.StartedAt
				}
			}
		}
	}
	out = append(out, self)
	for i := range out {
		if t, ok := ttls[out[i].Name]; ok {
			out[i].TTLLeft = &t
		}
		out[i].Stale = out[i].StaleSince != nil
	}
	sortInstances(out)
	return out
}

// InstancesTable is SHOW INSTANCES of in: times in RFC 3339 (UTC),
// lease_ttl_left in seconds (NULL when etcd did not answer).
func InstancesTable(in []Instance) views.Table {
	t := views.Table{
		Columns: []string{"instance", "self", "version", "admin_addr", "http_addr", "routes", "catalog_revision", "catalog_stale", "catalog_stale_since", "started_at", "lease_ttl_left", "last_seen"},
		Types:   []views.Type{views.Text, views.Text, views.Text, views.Text, views.Text, views.Text, views.Integer, views.Text, views.Text, views.Text, views.Real, views.Text},
	}
	for _, i := range in {
		var routes bytes.Buffer
		for k, r := range i.Routes {
			if k > 0 {
				routes.WriteString(", ")
			}
			fmt.Fprintf(&routes, "%s %s %s", r.Name, r.Protocol, r.Listen)
		}
		stale := ""
		if i.StaleSince != nil {
			stale = fmtTime(*i.StaleSince)
		}
		ttl := ""
		if i.TTLLeft != nil {
			ttl = strconv.FormatFloat(*i.TTLLeft, 'f', 0, 64)
		}
		t.Rows = append(t.Rows, []string{
			i.Name, yesNo(i.Self), i.Version, i.AdminAddr, i.HTTPAddr, routes.String(), strconv.FormatUint(i.Revision, 10),
			yesNo(i.Stale), stale, fmtTime(i.StartedAt), ttl, fmtTime(i.LastSeen),
		})
	}
	return t
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// errTimeout is the cause of a request that ran out of the timeout.
var errTimeout = errors.New("no answer within the fleet timeout")

// Part is one instance's tables, or why they are missing.
type Part struct {
	Instance string
	Tables   map[string]views.Table
	Err      error // non-nil: the instance did not answer
}

// Tables returns the views of names (views.Names) of every live
// instance, each merged into one table whose first column is instance
// (Merge), and a notice for each instance that did not answer within
// the timeout, whose rows are missing. The other instances are asked
// concurrently, each over its HTTP API (GET /api/views).
func (c *Cluster) Tables(ctx context.Context, names []string) (map[string]views.Table, []string) {
	me := c.self().Name
	parts := []Part{{Instance: me, Tables: c.local.ViewTables(names)}}
	if members := c.members.Load(); members != nil {
		var others []Instance
		for _, in := range members.Members() {
			if in.Name != me {
				others = append(others, in)
			}
		}
		parts = append(parts, make([]Part, len(others))...)
		var wg sync.WaitGroup
		for i, in := range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tabs, err := c.fetchViews(ctx, in.Member, names)
				parts[1+i] = Part{Instance: in.Name, Tables: tabs, Err: err}
			}()
		}
		wg.Wait()
	}
	out := map[string]views.Table{}
	for _, n := range names {
		if t, ok := Merge(n, parts); ok {
			out[n] = t
		}
	}
	return out, Notices(parts)
}

// Merge joins view name of every part that has it into one table: the
// column instance, then the columns of the first part that has the view
// (this instance's, when it comes first); the rows by instance name, each
// instance's in its own order. A part's table with other columns (an
// instance of another version) is matched by column name, a column it
// lacks left empty (NULL when numeric). It reports false when no part
// has the view.
func Merge(name string, parts []Part) (views.Table, bool) {
	var ref *views.Table
	for i := range parts {
		if t, ok := parts[i].Tables[name]; ok && parts[i].Err == nil {
			ref = &t
			break
		}
	}
	if ref == nil {
		return views.Table{}, false
	}
	out := views.Table{Columns: append([]string{InstanceColumn}, ref.Columns...), Types: []views.Type{views.Text}}
	for i := range ref.Columns {
		out.Types = append(out.Types, ref.TypeOf(i))
	}
	order := make([]int, 0, len(parts))
	for i := range parts {
		if parts[i].Err == nil {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return parts[order[a]].Instance < parts[order[b]].Instance })
	for _, i := range order {
		t, ok := parts[i].Tables[name]
		if !ok {
			continue
		}
		idx := make([]int, len(ref.Columns))
		for k, col := range ref.Columns {
			idx[k] = -1
			for j, c := range t.Columns {
				if c == col {
					idx[k] = j
					break
				}
			}
		}
		for _, row := range t.Rows {
			r := make([]string, 1, len(out.Columns))
			r[0] = parts[i].Instance
			for _, j := range idx {
				v := ""
				if j >= 0 && j < len(row) {
					v = row[j]
				}
				r = append(r, v)
			}
			out.Rows = append(out.Rows, r)
		}
	}
	return out, true
}

// Notices names each part that did not answer, in instance order: its
// rows are missing from the cluster-wide views.
func Notices(parts []Part) []string {
	var out []string
	for _, p := range parts {
		if p.Err != nil {
			out = append(out, fmt.Sprintf("instance %s did not answer (%v); its rows are missing", p.Instance, p.Err))
		}
	}
	sort.Strings(out)
	return out
}

// ViewsAnswer is the body of GET /api/views: the views asked for, by
// name, of the instance that answers.
type ViewsAnswer struct {
	Instance string               `json:"instance"`
	Tables   map[string]WireTable `json:"tables"`
}

// WireTable is a views.Table in JSON: Types are the SQL type names
// (TEXT, INTEGER, REAL), as long as Columns.
type WireTable struct {
	Columns []string   `json:"columns"`
	Types   []string   `json:"types"`
	Rows    [][]string `json:"rows"`
}

// ToWire converts t.
func ToWire(t views.Table) WireTable {
	w := WireTable{Columns: t.Columns, Types: make([]string, len(t.Columns)), Rows: t.Rows}
	for i := range t.Columns {
		w.Types[i] = t.TypeOf(i).String()
	}
	if w.Rows == nil {
		w.Rows = [][]string{}
	}
	return w
}

// FromWire converts w back; an unknown type name is TEXT.
func FromWire(w WireTable) views.Table {
	t := views.Table{Columns: w.Columns, Types: make([]views.Type, len(w.Columns)), Rows: w.Rows}
	for i := range w.Columns {
		if i < len(w.Types) {
			switch w.Types[i] {
			case "INTEGER":
				t.Types[i] = views.Integer
			case "REAL":
				t.Types[i] = views.Real
			}
		}
	}
	return t
}

// fetchViews asks member for the views of names, within the timeout.
func (c *Cluster) fetchViews(ctx context.Context, m Member, names []string) (map[string]views.Table, error) {
	if m.HTTPAddr == "" {
		return nil, errors.New("it has no HTTP API")
	}
	q := url.Values{"name": names}
	var ans ViewsAnswer
	if err := c.call(ctx, m, http.MethodGet, "/api/views?"+q.Encode(), &ans); err != nil {
		return nil, err
	}
	out := make(map[string]views.Table, len(ans.Tables))
	for n, w := range ans.Tables {
		out[n] = FromWire(w)
	}
	return out, nil
}

// call sends one request to m's HTTP API, within the timeout, and
// decodes its JSON answer into v. An answer other than 2xx is an error
// carrying the answer's message.
func (c *Cluster) call(ctx context.Context, m Member, method, path string, v any) error {
	rctx, cancel := clock.WithTimeout(ctx, c.clk, c.timeout, errTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, "http://"+m.HTTPAddr+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set(InstanceHeader, c.self().Name)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if cause := context.Cause(rctx); cause != nil && errors.Is(cause, errTimeout) {
			err = fmt.Errorf("http %s: %w (%s)", m.HTTPAddr, errTimeout, c.timeout)
		} else {
			err = fmt.Errorf("http %s: %w", m.HTTPAddr, errors.Unwrap(err))
		}
		c.log.Debug("fleet: instance did not answer", "instance", m.Name, "err", err)
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("http %s: reading the answer: %w", m.HTTPAddr, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(body, &e)
		if e.Error == "" {
			e.Error = http.StatusText(resp.StatusCode)
		}
		return &RemoteError{Instance: m.Name, Status: resp.StatusCode, Message: e.Error}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("http %s: bad answer: %w", m.HTTPAddr, err)
	}
	return nil
}

// RemoteError is another instance's refusal of a request.
type RemoteError struct {
	Instance string
	Status   int
	Message  string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("instance %s answered %d: %s", e.Instance, e.Status, e.Message)
}

// ErrUnknownInstance is a session command naming an instance that is
// not a live member.
var ErrUnknownInstance = errors.New("no such live instance")

// SessionAnswer is the body of POST /api/sessions/{id}/cancel and
// /terminate: whether there was something to act on, whether no session
// had the id there, and a notice (a route that cannot cancel).
type SessionAnswer struct {
	Instance string `json:"instance"`
	Session  uint64 `json:"session"`
	Done     bool   `json:"done"`
	// Missing is true when Done is false because no session of the
	// instance has the id; false from an instance that does not say.
	Missing bool   `json:"missing,omitempty"`
	Notice  string `json:"notice,omitempty"`
}

// Forward sends CANCEL STATEMENT (terminate false) or TERMINATE SESSION
// of session id to the live instance named instance, which runs it and
// records it in its audit trail (surface http, this instance as the
// actor). It is for other instances: the caller runs its own sessions'
// commands itself. An instance that is not a live member is
// ErrUnknownInstance.
func (c *Cluster) Forward(ctx context.Context, instance string, id uint64, terminate bool) (SessionAnswer, error) {
	var target *Member
	if members := c.members.Load(); members != nil {
		for _, in := range members.Members() {
			if in.Name == instance {
				target = &in.Member
				break
			}
		}
	}
	if target == nil {
		return SessionAnswer{}, fmt.Errorf("instance %q: %w", instance, ErrUnknownInstance)
	}
	if target.HTTPAddr == "" {
		return SessionAnswer{}, fmt.Errorf("instance %s has no HTTP API to forward to", instance)
	}
	what := "cancel"
	if terminate {
		what = "terminate"
	}
	var ans SessionAnswer
	err := c.call(ctx, *target, http.MethodPost, "/api/sessions/"+strconv.FormatUint(id, 10)+"/"+what, &ans)
	return ans, err
}

// ClusterViews maps each cluster-wide view the console's SQL reads to
// the view of every instance it gathers: cluster_<name> for every name
// of views.Names, and GaussDB's pgxc_ forms of its session views.
var ClusterViews = clusterViews()

func clusterViews() map[string]string {
	m := map[string]string{
		"pgxc_session_wlmstat":          "pg_session_wlmstat",
		"pgxc_wlm_session_statistics":   "gs_wlm_session_statistics",
		"pgxc_wlm_session_history":      "gs_wlm_session_history",
		"pgxc_total_user_resource_info": "pg_total_user_resource_info",
	}
	for _, n := range views.Names {
		m["cluster_"+n] = n
	}
	return m
}

// InstancesView is the name of SHOW INSTANCES as the console's SQL
// reads it.
const InstancesView = "instances"

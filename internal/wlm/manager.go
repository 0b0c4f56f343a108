package wlm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/admission"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/store"
)

// errClosed is the error of a change after Close.
var errClosed = errors.New("workload manager is closed")

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Clock is the time source; nil means clock.Real.
	Clock clock.Clock
	// Logger receives rule firings and warnings; nil discards them.
	Logger *slog.Logger
	// Registry holds the sessions whose statements the evaluator checks;
	// nil means a private empty registry (useful to run DDL only).
	Registry *session.Registry
	// CatalogPath is the catalog file. "" keeps the catalog in memory. A
	// missing file is created with the default catalog; a file that cannot
	// be read or decoded makes NewManager fail. Ignored when Store is set.
	CatalogPath string
	// Store keeps the catalog; nil means store.NewFile(CatalogPath), or
	// store.Memory without a path.
	Store Store
	// SoftwareVersion is the sluice version SELECT version() reports; ""
	// means "dev".
	SoftwareVersion string
	// AuditSize is how many catalog changes the audit log keeps (SHOW
	// AUDIT); 0 means DefaultAuditSize.
	AuditSize int
	// Audit, if not nil, is the audit log the Manager records in (then
	// AuditSize is unused): a log it shares with another surface that
	// records its own changes, such as the Toxiproxy-compatible API.
	Audit *AuditLog
	// Firings, if not nil, is the history the exception rules' firings
	// are recorded in (the firings view); nil means one in memory of
	// DefaultFiringsSize. Its owner closes it.
	Firings *FiringLog
}

// Route is a proxy route as the workload manager sees it.
type Route struct {
	// Link is the link the route attaches to; "" means DefaultLink.
	Link string
	// Protocol is postgres, mysql or tcp; informational.
	Protocol string
	// Pool is the resource pool of sessions whose user has no binding;
	// "" means none.
	Pool string
	// Emulation holds path-emulation options spelled as in the console
	// (delay: "10ms", rate: "1Gbit", ...); they override the link's for
	// the route's sessions, option by option. SetRoute validates them.
	Emulation map[string]string
	// CanCancel reports whether the route can cancel a statement (a
	// PostgreSQL route always can, a MySQL route only with credentials for
	// KILL QUERY, a tcp route never). Abort rules are refused while a
	// route that cannot cancel exists; see Manager.
	CanCancel bool
}

func (r Route) linkName() string {
	if r.Link == "" {
		return DefaultLink
	}
	return r.Link
}

// Binding is how one session's traffic is treated: the decision of the
// workload manager that the proxy applies to every chunk. Bind makes one;
// the zero value is no pool, link.Normal (its zero), no link and no
// emulation. A Binding is a value: safe to copy and to read from any
// goroutine; the *link.Link it points to is safe for concurrent use.
type Binding struct {
	// Pool is the session's resource pool, "" for none.
	Pool string
	// Class is the pool's network priority (link.Normal without a pool).
	// A penalised statement is sent in link.Low whatever Class says; the
	// proxy reads session.Session.Penalized for that.
	Class link.Class
	// Link is the runtime link the session shares; nil means the proxy
	// server's own unlimited link (Bind returns nil only when the route
	// is unknown and DefaultLink is missing: never, in a valid catalog).
	Link *link.Link
	// Up and Down are the path emulation of each direction (client to
	// server, server to client): the link's options, overridden by the
	// route's, overridden by the pool's, each option only where set. The
	// zero netem.Params adds nothing.
	Up, Down netem.Params
}

// Result is the outcome of one statement.
type Result struct {
	// Tag is the PostgreSQL command tag ("CREATE EXCEPT RULE", "SET",
	// "SHOW", "SELECT 3").
	Tag string
	// Columns and Rows are set for statements that return rows (SHOW,
	// SELECT); every value is text.
	Columns []string
	Rows    [][]string
	// Notices are informational messages ("... does not exist,
	// skipping").
	Notices []string
}

// Manager owns the catalog, the runtime links made from it, admission
// and the exception-rule evaluator, and hands each of its users the one
// role it needs: Service (the catalog), Runtime (bindings, routes,
// links), Admission, Rules (the evaluator) and Views. Every role is safe
// for concurrent use; they share one core, whose lock order is in the
// package documentation.
type Manager struct {
	c *core
	// The roles: each a view of c with its own methods.
	service   Service
	runtime   Runtime
	admission Admission
	rules     Rules
	views     Views
}

// Service is the catalog service: it runs the console's statements
// (DDL, SET, SHOW, SELECT over the views), stores the catalog and
// reloads it, follows a shared store's revisions and keeps the audit
// log. Each change publishes a new immutable generation of the catalog
// with its runtime links; the Runtime reads the latest.
type Service struct{ *core }

// Runtime binds sessions to pools, classes, links and emulation from the
// latest generation, holds the proxy's routes and the links' fleet caps,
// and cancels or terminates sessions.
type Runtime struct{ *core }

// Admission admits statements to their pool's active_statements and
// measures how long they wait.
type Admission struct{ *core }

// Rules is the exception-rule evaluator: it samples running statements
// and applies the rules that fire.
type Rules struct{ *core }

// Views answers the views (views.Names) from one reading of the catalog,
// the sessions and the registered Sources.
type Views struct{ *core }

// Service returns the catalog service.
func (m *Manager) Service() *Service { return &m.service }

// Runtime returns the binding runtime.
func (m *Manager) Runtime() *Runtime { return &m.runtime }

// Admission returns the admission controller.
func (m *Manager) Admission() *Admission { return &m.admission }

// Rules returns the exception-rule evaluator.
func (m *Manager) Rules() *Rules { return &m.rules }

// Views returns the view reader.
func (m *Manager) Views() *Views { return &m.views }

// core is the state the roles share.
type core struct {
	clk      clock.Clock
	log      *slog.Logger
	version0 string // software version for SELECT version()
	reg      *session.Registry
	store    Store
	audit    *AuditLog  // own lock, taken with no other held
	firings  *FiringLog // own lock, taken with no other held

	eval   *evaluator            // reads state through its policy func; own lock
	adm    *admission.Controller // own lock, a leaf; configured under mu
	blocks *blockStats           // own lock, a leaf

	version atomic.Uint64
	state   atomic.Pointer[state]       // replaced, never modified
	sources atomic.Pointer[sources]     // Views.Register's; written under srcMu
	dist    atomic.Pointer[distPattern] // Coordinator's parsed pattern; nil until first use
	closed  atomic.Bool

	shared bool // the store is written by other instances too (etcd)

	srcMu sync.Mutex // serialises Views.Register; a leaf

	mu  sync.Mutex     // serialises changes of state; never held with the evaluator's lock
	rev store.Revision // guarded by mu; the store's revision of state's catalog

	applied atomic.Uint64 // rev, for readers without mu; written under mu, after the swap
	stale   atomic.Int64  // unix nanoseconds since the store is unreachable; 0 when it answers
	// lowCaps is guarded by mu: per link, a cap on the Low class's rate
	// in bytes/s set by SetLowPriorityCaps (a fleet's shared budget);
	// nil or a missing link means no cap.
	lowCaps map[string]int64
}

// sharedStore is implemented by a Store that other instances write too
// (store.Etcd): there a conflict is another instance's committed change,
// which a statement must not silently run over.
type sharedStore interface{ Shared() bool }

// state is one immutable generation of the manager's configuration.
type state struct {
	cat    *Catalog
	routes map[string]route
	links  map[string]*link.Link // one per catalog link
}

// route is a Route with its emulation options parsed.
type route struct {
	Route
	em Emulation
}

// NewManager loads the catalog (if o.CatalogPath is set) and creates its
// runtime links.
func NewManager(o ManagerOptions) (*Manager, error) {
	m := &core{
		clk:      o.Clock,
		version0: o.SoftwareVersion,
		log:      o.Logger,
		reg:      o.Registry,
		store:    o.Store,
		audit:    o.Audit,
		firings:  o.Firings,
	}
	if m.audit == nil {
		m.audit = NewAuditLog(o.AuditSize)
	}
	if m.firings == nil {
		m.firings, _ = NewFiringLog(0, "", m.log) // in memory: no error
	}
	if m.clk == nil {
		m.clk = clock.Real{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.reg == nil {
		m.reg = session.NewRegistry(session.Options{})
	}
	if m.store == nil {
		m.store = &store.Memory{}
		if o.CatalogPath != "" {
			m.store = store.NewFile(o.CatalogPath)
		}
	}
	if s, ok := m.store.(sharedStore); ok {
		m.shared = s.Shared()
	}
	ctx := context.Background()
	cat, rev, err := m.store.Load(ctx)
	if err != nil {
		return nil, err
	}
	if cat == nil {
		cat = catalog.New()
		rev, err = m.store.Save(ctx, cat, rev)
		if errors.Is(err, store.ErrConflict) {
			// Another instance stored the first catalog meanwhile.
			cat, rev, err = m.store.Load(ctx)
			if err == nil && cat == nil {
				err = errors.New("catalog: deleted while it was created")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	m.setRevLocked(rev)
	st := &state{cat: cat, routes: map[string]route{}, links: map[string]*link.Link{}}
	for name := range cat.Links {
		st.links[name] = link.New(name, m.linkConfigLocked(cat, name), m.clk)
	}
	m.state.Store(st)
	m.version.Store(1)
	m.adm = admission.New(admission.Options{Clock: m.clk})
	m.adm.Configure(admissionLimits(cat))
	m.blocks = newBlockStats()
	m.eval = newEvaluator(m.clk, m.log, m.reg, func() policy { return m.state.Load() })
	m.eval.audit = m.audit
	m.eval.history = m.firings
	return &Manager{c: m, service: Service{m}, runtime: Runtime{m}, admission: Admission{m}, rules: Rules{m}, views: Views{m}}, nil
}

// Run evaluates exception rules until ctx ends, then returns ctx.Err().
// Every SampleInterval it samples the bytes of every running statement;
// a statement's rules are checked when due (see the package
// documentation), waking up at the exact due time when that comes before
// the next sample. Only one Run may be active at a time.
func (m *Rules) Run(ctx context.Context) error { return m.eval.run(ctx) }

// Evaluate runs one pass of the evaluator at now: it samples every
// running statement and checks the rules that are due, applying the
// actions of those that fire. It returns the earliest time a rule will be
// due next (zero if none). Run calls it; tests may call it directly to
// step the evaluator in virtual time.
func (m *Rules) Evaluate(ctx context.Context, now time.Time) (nextDue time.Time) {
	return m.eval.evaluate(ctx, now)
}

// Stats returns a copy of the evaluator's counters.
func (m *Rules) Stats() Stats { return m.eval.stats() }

// Close closes the runtime links. It is safe to call more than once.
func (m *Manager) Close() error { return m.c.close() }

func (m *core) close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.state.Load().links {
		l.Close()
	}
	return nil
}

// Catalog returns the current catalog. The caller must not modify it.
func (m *Service) Catalog() *Catalog { return m.state.Load().cat }

// Registry returns the session registry the manager watches.
func (m *Runtime) Registry() *session.Registry { return m.reg }

// Version increases on every change of the catalog or of the routes, so
// a live session re-binds only when it differs from the one it bound
// with. It is one atomic load.
func (m *Runtime) Version() uint64 { return m.version.Load() }

// Link returns the runtime link name, or nil if the catalog has none.
func (m *Runtime) Link(name string) *link.Link { return m.state.Load().links[name] }

// SetRoute adds or replaces a route. It fails with 42704 if the route's
// link or pool does not exist and with 22023 for a bad emulation option. A route that cannot cancel while abort
// rules are reachable is accepted with a logged warning: those aborts
// will fail (the check that refuses them applies to DDL).
func (m *Runtime) SetRoute(name string, r Route) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.setRouteLocked(name, r, false)
}

// setRouteLocked is SetRoute with m.mu held. With refuseAbort, a route
// that makes an abort rule reachable while a route cannot cancel is
// refused with 0A000, as the console's statements are, instead of
// logged.
func (m *core) setRouteLocked(name string, r Route, refuseAbort bool) error {
	cur := m.state.Load()
	if cur.cat.Links[r.linkName()] == nil {
		return ddl.Errorf(sqlstate.UndefinedObject, 0, "route %s: link %q does not exist", name, r.linkName())
	}
	if r.Pool != "" && cur.cat.Pools[r.Pool] == nil {
		return ddl.Errorf(sqlstate.UndefinedObject, 0, "route %s: resource pool %q does not exist", name, r.Pool)
	}
	em, err := catalog.ParseEmulation(r.Emulation)
	if err == nil {
		err = em.Validate()
	}
	if err != nil {
		e := &ddl.Error{Code: sqlstate.InvalidParameterValue}
		if !errors.As(err, &e) {
			e.Message = err.Error()
		}
		return &ddl.Error{Code: e.Code, Message: "route " + name + ": " + e.Message, Detail: e.Detail, Hint: e.Hint}
	}
	routes := maps.Clone(cur.routes)
	routes[name] = route{Route: r, em: em}
	if refuseAbort {
		if err := checkAbortRoutes(cur.cat, cur.routes, routes); err != nil {
			return err
		}
	}
	if certain, possible := abortViolations(cur.cat, routes); len(certain)+len(possible) > 0 {
		m.log.Warn("abort rules cannot be enforced on a route that cannot cancel", "route", name, "problem", append(certain, possible...)[0])
	}
	m.state.Store(&state{cat: cur.cat, routes: routes, links: cur.links})
	m.version.Add(1)
	return nil
}

// RemoveRoute forgets a route; unknown names are ignored.
func (m *Runtime) RemoveRoute(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.state.Load()
	if _, ok := cur.routes[name]; !ok {
		return
	}
	routes := maps.Clone(cur.routes)
	delete(routes, name)
	m.state.Store(&state{cat: cur.cat, routes: routes, links: cur.links})
	m.version.Add(1)
}

// Routes returns a copy of the routes.
func (m *Runtime) Routes() map[string]Route {
	st := m.state.Load()
	out := make(map[string]Route, len(st.routes))
	for k, r := range st.routes {
		out[k] = r.Route
	}
	return out
}

// Bind returns the binding of a session of user on route: the user's
// pool (or the route's default pool), the pool's class, the route's link
// and the effective path emulation (link, then route, then pool options).
// An unknown route binds to DefaultLink without route options.
func (m *Runtime) Bind(route, user string) Binding {
	st := m.state.Load()
	r := st.routes[route]
	pool := st.poolOf(r, user)
	ln := r.linkName()
	b := Binding{Pool: pool, Class: link.Normal, Link: st.links[ln]}
	em := Emulation{}
	if d := st.cat.Links[ln]; d != nil {
		em = d.Emulation
	}
	em = em.Over(r.em)
	if p := st.cat.Pools[pool]; p != nil {
		b.Class = p.Priority
		em = em.Over(p.Emulation)
	}
	b.Up = em.Params()
	b.Down = b.Up
	return b
}

// poolOf returns the pool of user on route r: the user's binding, else
// the route's default pool.
func (st *state) poolOf(r route, user string) string {
	if u := st.cat.Users[user]; u != nil && u.Pool != "" {
		return u.Pool
	}
	return r.Pool
}

// catalog and sessionPool make a state the evaluator's policy.
func (st *state) catalog() *Catalog { return st.cat }

func (st *state) sessionPool(route, user string) string { return st.poolOf(st.routes[route], user) }

// DefineLink creates link name with opts, or alters it if it exists, as
// CREATE LINK / ALTER LINK would; a configuration file's links use it.
// Option names and values are spelled as in the console.
func (m *Service) DefineLink(ctx context.Context, name string, opts map[string]string) error {
	_, err := m.changeRetrying(ctx, func(c *Catalog) ([]string, error) {
		return nil, catalog.DefineLink(c, name, opts)
	})
	m.record(ctx, "CREATE OR ALTER LINK "+quoteIdent(name)+optionsText(opts), err)
	return err
}

// Set changes a setting as SET name = value would; a configuration
// file's settings use it.
func (m *Service) Set(ctx context.Context, name, value string) error {
	_, err := m.changeRetrying(ctx, func(c *Catalog) ([]string, error) {
		return nil, catalog.Set(c, strings.ToLower(strings.TrimSpace(name)), 0, ddl.Value{Kind: ddl.String, Text: value})
	})
	m.record(ctx, "SET "+strings.ToLower(strings.TrimSpace(name))+" = "+quoteLiteral(value), err)
	return err
}

// maxConflicts bounds how many times a change is retried after the
// store reported that another writer saved first.
const maxConflicts = 5

// change applies fn to a copy of the catalog, validates it, saves it and
// swaps it in; on any error nothing changes. fn returning
// catalog.ErrUnchanged ends the change without applying it. It
// reconfigures the runtime links and bumps Version. fn returns notices.
//
// When the store reports a conflict, change loads the stored catalog and
// swaps it in; then, with a shared store, it fails with 40001 (the
// statement was decided on a catalog another instance has since
// changed, so running it again could undo what that instance did
// without anyone seeing it), and with a file or memory store, whose only
// writer is this process, it runs fn again on what it loaded.
func (m *core) change(ctx context.Context, fn func(c *Catalog) ([]string, error)) ([]string, error) {
	return m.changeWith(ctx, fn, !m.shared)
}

// changeRetrying is change that runs fn again after a conflict whatever
// the store: for the configuration's links and settings, which declare
// what the catalog must hold rather than edit what was read.
func (m *core) changeRetrying(ctx context.Context, fn func(c *Catalog) ([]string, error)) ([]string, error) {
	return m.changeWith(ctx, fn, true)
}

func (m *core) changeWith(ctx context.Context, fn func(c *Catalog) ([]string, error), retry bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if m.closed.Load() {
			return nil, errClosed
		}
		if since := m.staleSince(); !since.IsZero() {
			return nil, unavailableError(since, nil)
		}
		notices, err := m.changeLocked(ctx, fn)
		if !errors.Is(err, store.ErrConflict) || (retry && attempt == maxConflicts) {
			return notices, err
		}
		read := m.rev
		if err := m.reloadLocked(ctx); err != nil {
			return nil, saveError(err)
		}
		if !retry {
			e := ddl.Errorf(sqlstate.SerializationFailure, 0, "could not serialize access: the catalog changed since it was read; retry")
			e.Detail = fmt.Sprintf("The statement was decided on catalog revision %d; another instance committed revision %d first.", read, m.rev)
			return nil, e
		}
	}
}

// saveError is the 58030 error of a catalog that could not be saved.
func saveError(err error) *ddl.Error {
	if errors.Is(err, store.ErrUnavailable) {
		return unavailableError(time.Time{}, err)
	}
	e := ddl.Errorf(sqlstate.IOError, 0, "could not save the catalog; nothing was changed")
	e.Detail = err.Error()
	return e
}

// unavailableError is the 58030 error of a change refused because the
// shared store cannot be reached: since when the watch lost it (zero
// when the save itself failed), err the save's error (nil when the
// change was refused without trying).
func unavailableError(since time.Time, err error) *ddl.Error {
	e := ddl.Errorf(sqlstate.IOError, 0, "etcd cannot be reached: the catalog is read-only until it is back; nothing was changed")
	switch {
	case err != nil:
		e.Detail = err.Error()
	case !since.IsZero():
		e.Detail = "etcd has not answered since " + since.UTC().Format(time.RFC3339) + "."
	}
	e.Hint = "Sessions go on with the catalog in force; retry the change once etcd has a quorum again."
	return e
}

// changeLocked is one attempt of change; the error wraps
// store.ErrConflict when the store refused the save for that reason.
func (m *core) changeLocked(ctx context.Context, fn func(c *Catalog) ([]string, error)) ([]string, error) {
	cur := m.state.Load()
	next := cur.cat.Clone()
	notices, err := fn(next)
	if errors.Is(err, catalog.ErrUnchanged) {
		return notices, nil
	}
	if err != nil {
		return nil, err
	}
	if err := next.Validate(); err != nil {
		return nil, ddl.Errorf(sqlstate.InvalidParameterValue, 0, "invalid catalog: %v", err)
	}
	said, err := checkAbort(cur.cat, next, cur.routes)
	if err != nil {
		return nil, err
	}
	notices = append(notices, said...)
	rev, err := m.store.Save(ctx, next, m.rev)
	if errors.Is(err, store.ErrConflict) {
		return nil, err
	}
	if err != nil {
		return nil, saveError(err)
	}
	m.swapLocked(cur, next)
	m.setRevLocked(rev)
	return notices, nil
}

// setRevLocked records the store's revision of the catalog in force. It
// is called after the catalog is swapped in, so a reader that sees
// AppliedRevision reach a revision sees that revision's catalog (or a
// later one) in Catalog.
func (m *core) setRevLocked(rev store.Revision) {
	m.rev = rev
	m.applied.Store(uint64(rev))
}

// AppliedRevision is the store's revision of the catalog in force: the
// etcd revision that wrote it with an etcd store, the file store's count
// of saves otherwise. It is one atomic load.
func (m *Service) AppliedRevision() uint64 { return m.applied.Load() }

// StaleSince is when the shared store became unreachable, as its
// follower last reported (SetStale); the zero time when it answers, and
// always for a file or memory store. While it is set, changes are
// refused with 58030.
func (m *Service) StaleSince() time.Time { return m.staleSince() }

func (m *core) staleSince() time.Time {
	n := m.stale.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// SetStale records since when the shared store has been unreachable; the
// zero time records that it answers again. store.Etcd's Follow calls it.
func (m *Service) SetStale(since time.Time) {
	if since.IsZero() {
		m.stale.Store(0)
		return
	}
	m.stale.Store(since.UnixNano())
}

// ApplyStored makes c, which the store holds at rev, the catalog in
// force, through the same swap as a local change (links reconfigured,
// live sessions re-bind on their next chunk, no reconnect), if rev is
// newer than the applied revision; it reports whether it applied it. A
// revision already applied (this instance's own save, or one a reload
// got first) is skipped, so each change is applied once, in revision
// order, and logged at INFO ("catalog change applied", with the
// revision). c nil means the stored catalog was deleted at rev: the catalog
// in force stays and the next change writes it again. The stored catalog
// was validated by the store; routes are not checked against it.
func (m *Service) ApplyStored(c *Catalog, rev store.Revision) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return false
	}
	if c == nil {
		m.setRevLocked(0)
		return false
	}
	if rev <= m.rev {
		return false
	}
	m.swapLocked(m.state.Load(), c)
	m.setRevLocked(rev)
	m.log.Info("catalog change applied", "revision", uint64(rev))
	return true
}

// swapLocked makes next the current catalog: it reconfigures the runtime
// links (creating and closing them as next says) and bumps Version.
func (m *core) swapLocked(cur *state, next *Catalog) {
	links := make(map[string]*link.Link, len(next.Links))
	for name := range next.Links {
		l := cur.links[name]
		if l == nil {
			l = link.New(name, m.linkConfigLocked(next, name), m.clk)
		} else {
			l.Configure(m.linkConfigLocked(next, name))
		}
		links[name] = l
	}
	for name, l := range cur.links {
		if links[name] == nil {
			l.Close()
		}
	}
	m.state.Store(&state{cat: next, routes: cur.routes, links: links})
	m.adm.Configure(admissionLimits(next))
	m.version.Add(1)
}

// linkConfigLocked is cat's configuration of link name with the link's
// Low-class cap applied: the Low class runs at min(low_priority_bandwidth,
// cap), 0 meaning no limit on either side.
func (m *core) linkConfigLocked(cat *Catalog, name string) link.Config {
	cfg := cat.LinkConfig(name)
	if c, ok := m.lowCaps[name]; ok && c > 0 && (cfg.LowPriorityBandwidth == 0 || c < cfg.LowPriorityBandwidth) {
		cfg.LowPriorityBandwidth = c
	}
	return cfg
}

// SetLowPriorityCaps caps the Low class of each named link at the given
// bytes/s, on top of low_priority_bandwidth (the lower of the two
// applies), and reconfigures the live links at once; links not in caps,
// and caps <= 0, are uncapped. nil removes every cap. Caps live in
// memory only, for the fleet's shared budget; they outlast catalog
// changes and apply to links created later. Safe for concurrent use.
func (m *Runtime) SetLowPriorityCaps(caps map[string]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return
	}
	m.lowCaps = maps.Clone(caps)
	st := m.state.Load()
	for name, l := range st.links {
		l.Configure(m.linkConfigLocked(st.cat, name))
	}
}

// LinkNames returns the names of the runtime links, sorted.
func (m *Runtime) LinkNames() []string { return catalog.SortedKeys(m.state.Load().links) }

// Reload loads the stored catalog and makes it current if its revision
// differs from the one the Manager holds: what a store that sees other
// writers' changes calls when one arrives. The stored catalog was
// validated by the store; routes are not checked against it.
func (m *Service) Reload(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return errClosed
	}
	return m.reloadLocked(ctx)
}

func (m *core) reloadLocked(ctx context.Context) error {
	cat, rev, err := m.store.Load(ctx)
	if err != nil {
		return err
	}
	if cat == nil || rev == m.rev {
		m.setRevLocked(rev)
		return nil
	}
	m.swapLocked(m.state.Load(), cat)
	m.setRevLocked(rev)
	return nil
}

// abortViolations lists, for the given catalog and routes, the abort
// rules (blocktime rules excepted: their abort never reaches the server)
// that a route which cannot cancel would have to enforce. A violation is
// certain when the rule's pool is that route's own default pool: every
// unbound user's session on it is in the pool. It is only possible when
// the pool is reached through a user binding: users are not tied to
// routes, and a bound user may never connect through that route (a MySQL
// route to another server, say); those are said, not refused (see
// abortNotices), and an abort that does need the route's cancel is
// logged with the route's name when it fires.
func abortViolations(c *Catalog, routes map[string]route) (certain, possible []string) {
	var blind []string
	for name, r := range routes {
		if !r.CanCancel {
			blind = append(blind, name)
		}
	}
	if len(blind) == 0 {
		return nil, nil
	}
	sort.Strings(blind)
	bound := map[string]bool{}
	for _, u := range c.Users {
		bound[u.Pool] = true
	}
	for _, pool := range catalog.SortedKeys(c.Pools) {
		for _, rule := range c.Pools[pool].ExceptRules {
			r := c.Rules[rule]
			if r == nil || r.Action != Abort || r.Queued() {
				continue
			}
			for _, name := range blind {
				rt := routes[name]
				switch {
				case rt.Pool == pool:
					certain = append(certain, fmt.Sprintf("except rule %q of resource pool %q aborts statements, but route %q (%s), whose sessions default to that pool, cannot cancel statements", rule, pool, name, rt.Protocol))
				case bound[pool]:
					possible = append(possible, fmt.Sprintf("except rule %q of resource pool %q aborts statements; a user bound to it who connects through route %q (%s) cannot have them cancelled", rule, pool, name, rt.Protocol))
				}
			}
		}
	}
	return certain, possible
}

// checkAbortRoutes refuses a change of routes that makes an abort rule
// of c certain to need a cancel on a route that cannot cancel, unless
// that situation existed before.
func checkAbortRoutes(c *Catalog, old, next map[string]route) error {
	before, _ := abortViolations(c, old)
	after, _ := abortViolations(c, next)
	return abortError(before, after)
}

// checkAbort refuses a change that makes an abort rule certain to need a
// cancel on a route that cannot cancel, unless that situation existed
// before; it returns, as notices, the possible ones the change adds.
func checkAbort(old, next *Catalog, routes map[string]route) ([]string, error) {
	before, wasPossible := abortViolations(old, routes)
	after, possible := abortViolations(next, routes)
	if err := abortError(before, after); err != nil {
		return nil, err
	}
	return newOnes(wasPossible, possible), nil
}

// newOnes returns the entries of after that are not in before.
func newOnes(before, after []string) []string {
	was := map[string]bool{}
	for _, v := range before {
		was[v] = true
	}
	var out []string
	for _, v := range after {
		if !was[v] {
			out = append(out, v+abortHint)
		}
	}
	return out
}

// abortHint ends a notice of a possible violation.
const abortHint = " (give the route kill_user and kill_password, or use action 'penalty')"

// abortError is the 0A000 error of the first violation of after that is
// not in before, or nil.
func abortError(before, after []string) error {
	was := map[string]bool{}
	for _, v := range before {
		was[v] = true
	}
	for _, v := range after {
		if !was[v] {
			e := ddl.Errorf(sqlstate.FeatureNotSupported, 0, "%s", v)
			e.Hint = "Give the route credentials to cancel (kill_user and kill_password for MySQL), or use action 'penalty'."
			return e
		}
	}
	return nil
}

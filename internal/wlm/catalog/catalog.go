package catalog

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/distname"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/units"
)

// DefaultLink is the link that always exists: unlimited, no emulation.
// It can be altered but not dropped.
const DefaultLink = "default"

// Unlimited is the value of a rule threshold that does not apply.
const Unlimited = -1

// Action is what a firing exception rule does to a statement.
type Action string

// Actions.
const (
	// Abort cancels the statement through its protocol. It is the default.
	Abort Action = "abort"
	// Penalty moves the statement's traffic to the Low class until it ends.
	Penalty Action = "penalty"
)

// Catalog is the workload manager's configuration: links, exception
// rules, resource pools, user bindings and settings. A Catalog held by a
// Manager is never modified; statements apply to a Clone that replaces
// it.
type Catalog struct {
	Links    map[string]*LinkDef
	Rules    map[string]*Rule
	Pools    map[string]*Pool
	Users    map[string]*UserDef
	Settings Settings
}

// LinkDef is a link's definition.
type LinkDef struct {
	// Capacity is the bytes/s each direction carries; 0 is unlimited.
	Capacity int64 `json:"capacity,omitempty"`
	// QueueSize is the device FIFO in bytes; 0 means link.DefaultQueueSize.
	QueueSize int64 `json:"queue_size,omitempty"`
	// Emulation is the path emulation of every flow on the link.
	Emulation Emulation `json:"emulation"`
	// MaxActiveStatements bounds the statements of all the link's sessions
	// that run at once, whatever their pool (package admission); 0 is
	// unlimited (the console writes -1).
	MaxActiveStatements int `json:"max_active_statements,omitempty"`
}

// Rule is an exception rule. Its thresholds combine with AND: the rule
// fires when every threshold that is not Unlimited is reached.
type Rule struct {
	// Bandwidth is in MB/s (10^6 bytes per second), averaged over the last
	// 5 s of one statement; the rule's condition is bandwidth > Bandwidth.
	// Unlimited (-1) disables it.
	Bandwidth float64 `json:"bandwidth"`
	// ElapsedTime is in seconds since the statement began; the condition
	// is elapsed >= ElapsedTime, and the rule is first checked then.
	// Unlimited (-1) disables it.
	ElapsedTime float64 `json:"elapsedtime"`
	// BlockTime is in seconds a statement has been held waiting for
	// admission (a pool's active_statements, a link's
	// max_active_statements); the condition is block time >= BlockTime,
	// checked while the statement waits, first then. 0 (the zero value)
	// disables it; the console writes it -1, as the other thresholds. A
	// rule with BlockTime sets no other threshold: BlockTime applies to
	// statements that wait, the others to statements that run.
	BlockTime float64 `json:"blocktime,omitempty"`
	// Action is Abort or Penalty.
	Action Action `json:"action"`
}

// HasThreshold reports whether the rule sets a threshold.
func (r *Rule) HasThreshold() bool {
	return r.Bandwidth != Unlimited || r.ElapsedTime != Unlimited || r.BlockTime > 0
}

// Queued reports whether the rule applies to statements waiting for
// admission (it sets blocktime) rather than to running ones. An abort
// of a queued rule ends the wait in the proxy: it needs no cancel
// request.
func (r *Rule) Queued() bool { return r.BlockTime > 0 }

// Pool is a resource pool.
type Pool struct {
	// ExceptRules lists the pool's exception rules; they combine with OR.
	ExceptRules []string
	// Weight is the pool's share of a link against other pools with bytes
	// waiting in the same class, in [1, link.MaxWeight].
	Weight int
	// Priority is the network class of the pool's statements.
	Priority link.Class
	// Emulation overrides the link's and route's path emulation for the
	// pool's sessions, field by field.
	Emulation Emulation
	// ActiveStatements is how many statements (transactions) of the pool
	// run at once; the others wait in the proxy (package admission). 0 is
	// unlimited (the console writes -1, GaussDB's spelling).
	ActiveStatements int
	// QueueTimeout bounds a statement's wait for a slot; 0 is no bound.
	QueueTimeout time.Duration
	// IdleInTransaction bounds how long a session of the pool may sit
	// idle inside a transaction while it holds an admission slot (of the
	// pool's active_statements or its link's max_active_statements;
	// PgBouncer's idle_transaction_timeout): past it, sluice ends the
	// session, its server connection and its slot. 0 is no bound.
	IdleInTransaction time.Duration
}

// UserDef binds a user to a resource pool.
type UserDef struct {
	Pool string `json:"resource_pool"`
}

// Settings are the catalog's global settings.
type Settings struct {
	// LowPriorityBandwidth is the bytes/s the Low class may use on each
	// link (leaky bucket, 1 ms ticks); 0 is unlimited.
	LowPriorityBandwidth int64
	// ClusterLowPriorityBandwidth is the bytes/s the Low class may use
	// in each direction over every instance of a fleet (the instances
	// that share an etcd catalog), split between them by demand; each
	// instance's links run their Low class at min(LowPriorityBandwidth,
	// the instance's grant). 0 (the default) is off; without etcd it
	// has no effect.
	ClusterLowPriorityBandwidth int64
	// LowPriorityQueueBytes bounds Low-class bytes in a link's device
	// FIFO; -1 switches the bound off.
	LowPriorityQueueBytes int64
	// LowPriorityYield is the share of a link's capacity, in percent
	// within [1, 100], the Low class may use while Normal or High bytes
	// are on the link and for link.YieldHold after; 100 switches
	// yielding off (link.Config.LowYieldPercent).
	LowPriorityYield int
	// NetworkControl switches the links' priority scheduler on.
	NetworkControl bool
	// ExceptCheckPeriod is the interval between two checks of the rules
	// of one statement.
	ExceptCheckPeriod time.Duration
	// MetricsUserLabels is how many users the metrics label by name, in
	// [0, MaxMetricsUserLabels]; the others are user "other". 0 (the
	// default) labels none.
	MetricsUserLabels int
	// DistributedApplicationName is the application_name pattern by
	// which a shard connection names its coordinator backend (package
	// distname: "fdw %p" by default; "" turns linking off). It is valid
	// for distname.Parse.
	DistributedApplicationName string
}

// DefaultSettings returns the settings of a new catalog.
func DefaultSettings() Settings {
	return Settings{
		LowPriorityBandwidth:  link.DefaultLowPriorityBandwidth,
		LowPriorityQueueBytes: link.DefaultLowPriorityQueueBytes,
		LowPriorityYield:      link.DefaultLowYieldPercent,
		NetworkControl:        true,
		ExceptCheckPeriod:     5 * time.Second,

		DistributedApplicationName: distname.Default,
	}
}

// New returns a catalog holding only the default link and default
// settings.
func New() *Catalog {
	return &Catalog{
		Links:    map[string]*LinkDef{DefaultLink: {}},
		Rules:    map[string]*Rule{},
		Pools:    map[string]*Pool{},
		Users:    map[string]*UserDef{},
		Settings: DefaultSettings(),
	}
}

// Clone returns a deep copy of c.
func (c *Catalog) Clone() *Catalog {
	n := &Catalog{
		Links:    make(map[string]*LinkDef, len(c.Links)),
		Rules:    make(map[string]*Rule, len(c.Rules)),
		Pools:    make(map[string]*Pool, len(c.Pools)),
		Users:    make(map[string]*UserDef, len(c.Users)),
		Settings: c.Settings,
	}
	for k, v := range c.Links {
		x := *v
		n.Links[k] = &x
	}
	for k, v := range c.Rules {
		x := *v
		n.Rules[k] = &x
	}
	for k, v := range c.Pools {
		x := *v
		x.ExceptRules = slices.Clone(v.ExceptRules)
		n.Pools[k] = &x
	}
	for k, v := range c.Users {
		x := *v
		n.Users[k] = &x
	}
	return n
}

// LinkConfig returns the runtime configuration of link name.
func (c *Catalog) LinkConfig(name string) link.Config {
	d := c.Links[name]
	if d == nil {
		d = &LinkDef{}
	}
	w := make(map[string]int, len(c.Pools))
	for p, def := range c.Pools {
		w[p] = def.Weight
	}
	return link.Config{
		Capacity:              d.Capacity,
		QueueSize:             d.QueueSize,
		NetworkControl:        c.Settings.NetworkControl,
		LowPriorityBandwidth:  c.Settings.LowPriorityBandwidth,
		LowPriorityQueueBytes: c.Settings.LowPriorityQueueBytes,
		LowYieldPercent:       c.Settings.LowPriorityYield,
		Weights:               w,
	}
}

// PoolsUsingRule returns the pools whose except_rule lists rule, sorted.
func (c *Catalog) PoolsUsingRule(rule string) []string {
	var out []string
	for name, p := range c.Pools {
		if slices.Contains(p.ExceptRules, rule) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// UsersOfPool returns the users bound to pool, sorted.
func (c *Catalog) UsersOfPool(pool string) []string {
	var out []string
	for name, u := range c.Users {
		if u.Pool == pool {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Emulation is a set of path-emulation options. A nil field is unset: it
// leaves the value of the level below, in the order link, route, pool.
// Values are never modified through the pointers; setting an option
// stores a new pointer.
type Emulation struct {
	Delay        *Duration           `json:"delay,omitempty"`
	Jitter       *Duration           `json:"jitter,omitempty"`
	Distribution *netem.Distribution `json:"distribution,omitempty"`
	Correlation  *float64            `json:"correlation,omitempty"`
	Rate         *int64              `json:"rate,omitempty"`  // bytes/s per flow
	Burst        *int64              `json:"burst,omitempty"` // bytes
	Loss         *float64            `json:"loss,omitempty"`  // probability per segment
	// LossModel is a Gilbert-Elliott loss model; the option loss sets
	// either it or Loss, never both, and Over takes the two together.
	LossModel *LossModel `json:"loss_model,omitempty"`
	RTO       *Duration  `json:"rto,omitempty"`
	Window    *int64     `json:"window,omitempty"` // bytes
	Seed      *int64     `json:"seed,omitempty"`
}

// IsZero reports whether no option is set.
func (e Emulation) IsZero() bool { return e == Emulation{} }

// Over returns e with every option set in o replacing e's. Loss and
// LossModel are one option (loss): o's replace e's when o sets either.
func (e Emulation) Over(o Emulation) Emulation {
	if o.Loss != nil || o.LossModel != nil {
		e.Loss, e.LossModel = o.Loss, o.LossModel
	}
	return Emulation{
		Delay:        cmp.Or(o.Delay, e.Delay),
		Jitter:       cmp.Or(o.Jitter, e.Jitter),
		Distribution: cmp.Or(o.Distribution, e.Distribution),
		Correlation:  cmp.Or(o.Correlation, e.Correlation),
		Rate:         cmp.Or(o.Rate, e.Rate),
		Burst:        cmp.Or(o.Burst, e.Burst),
		Loss:         e.Loss,
		LossModel:    e.LossModel,
		RTO:          cmp.Or(o.RTO, e.RTO),
		Window:       cmp.Or(o.Window, e.Window),
		Seed:         cmp.Or(o.Seed, e.Seed),
	}
}

// Params returns the netem parameters e sets, zero elsewhere.
func (e Emulation) Params() netem.Params {
	var lm netem.LossModel
	if e.LossModel != nil {
		lm = netem.LossModel(*e.LossModel)
	}
	return netem.Params{
		LossModel:    lm,
		Delay:        time.Duration(valueOrZero(e.Delay)),
		Jitter:       time.Duration(valueOrZero(e.Jitter)),
		Distribution: valueOrZero(e.Distribution),
		Correlation:  valueOrZero(e.Correlation),
		Rate:         valueOrZero(e.Rate),
		Burst:        valueOrZero(e.Burst),
		Loss:         valueOrZero(e.Loss),
		RTO:          time.Duration(valueOrZero(e.RTO)),
		Window:       valueOrZero(e.Window),
		Seed:         valueOrZero(e.Seed),
	}
}

// valueOrZero returns *p, or the zero value of T when p is nil.
func valueOrZero[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// LossModel is a Gilbert-Elliott loss model (netem.LossModel with Kind
// netem.GilbertElliott). It encodes in JSON as the text the option loss
// takes: "gemodel P R 1-H 1-K", each a fraction.
type LossModel netem.LossModel

// MarshalText writes m as ParseLossModel reads it, with fractions.
func (m LossModel) MarshalText() ([]byte, error) { return []byte(m.text(FormatFloat)), nil }

// UnmarshalText reads what MarshalText writes: its numbers are
// fractions ("gemodel 0.01 0.25 1 0"), not the percentages
// ParseLossModel reads.
func (m *LossModel) UnmarshalText(b []byte) error {
	v, err := parseLossModel(string(b), units.ParsePercent)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// text writes m as "gemodel P R 1-H 1-K" with each probability written
// by f.
func (m LossModel) text(f func(float64) string) string {
	return "gemodel " + f(m.P) + " " + f(m.R) + " " + f(m.BadLoss) + " " + f(m.GoodLoss)
}

// ParseLossModel reads tc netem's spelling of a Gilbert-Elliott loss
// model, "gemodel P [R [1-H [1-K]]]" ("gilbert-elliott" is accepted for
// "gemodel"): P the probability of moving from the good state to the bad
// one, R from bad to good (absent: 1-P), 1-H the loss probability in the
// bad state (absent: 1), 1-K in the good state (absent: 0). Each is a
// percentage, as tc reads it: "gemodel 1 25" and "gemodel 1% 25%" are
// both P = 0.01, R = 0.25.
func ParseLossModel(s string) (LossModel, error) {
	return parseLossModel(s, units.ParsePercentage)
}

// parseLossModel reads "gemodel P [R [1-H [1-K]]]" with each probability
// read by prob.
func parseLossModel(s string, prob func(string) (float64, error)) (LossModel, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return LossModel{}, fmt.Errorf("empty loss model")
	}
	if k, err := netem.ParseLossKind(f[0]); err != nil || k != netem.GilbertElliott {
		return LossModel{}, fmt.Errorf("%q: want gemodel P [R [1-H [1-K]]]", s)
	}
	if len(f) < 2 || len(f) > 5 {
		return LossModel{}, fmt.Errorf("%q: gemodel takes 1 to 4 probabilities (P [R [1-H [1-K]]])", s)
	}
	var p [4]float64
	for i, t := range f[1:] {
		v, err := prob(t)
		if err != nil {
			return LossModel{}, fmt.Errorf("gemodel %s: %w", [4]string{"p", "r", "1-h", "1-k"}[i], err)
		}
		p[i] = v
	}
	m := LossModel{Kind: netem.GilbertElliott, P: p[0], R: p[1], BadLoss: p[2], GoodLoss: p[3]}
	if len(f) < 3 {
		m.R = 1 - m.P
	}
	if len(f) < 4 {
		m.BadLoss = 1
	}
	return m, nil
}

// Duration is a time.Duration that encodes in JSON as text ("10ms").
type Duration time.Duration

// MarshalText writes d as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

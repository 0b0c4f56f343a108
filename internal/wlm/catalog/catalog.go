package catalog

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
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
	// Action is Abort or Penalty.
	Action Action `json:"action"`
}

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
	// LowPriorityQueueBytes bounds Low-class bytes in a link's device
	// FIFO; -1 switches the bound off.
	LowPriorityQueueBytes int64
	// NetworkControl switches the links' priority scheduler on.
	NetworkControl bool
	// ExceptCheckPeriod is the interval between two checks of the rules
	// of one statement.
	ExceptCheckPeriod time.Duration
}

// DefaultSettings returns the settings of a new catalog.
func DefaultSettings() Settings {
	return Settings{
		LowPriorityBandwidth:  link.DefaultLowPriorityBandwidth,
		LowPriorityQueueBytes: link.DefaultLowPriorityQueueBytes,
		NetworkControl:        true,
		ExceptCheckPeriod:     5 * time.Second,
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
	RTO          *Duration           `json:"rto,omitempty"`
	Window       *int64              `json:"window,omitempty"` // bytes
	Seed         *int64              `json:"seed,omitempty"`
}

// IsZero reports whether no option is set.
func (e Emulation) IsZero() bool { return e == Emulation{} }

// Over returns e with every option set in o replacing e's.
func (e Emulation) Over(o Emulation) Emulation {
	return Emulation{
		Delay:        cmp.Or(o.Delay, e.Delay),
		Jitter:       cmp.Or(o.Jitter, e.Jitter),
		Distribution: cmp.Or(o.Distribution, e.Distribution),
		Correlation:  cmp.Or(o.Correlation, e.Correlation),
		Rate:         cmp.Or(o.Rate, e.Rate),
		Burst:        cmp.Or(o.Burst, e.Burst),
		Loss:         cmp.Or(o.Loss, e.Loss),
		RTO:          cmp.Or(o.RTO, e.RTO),
		Window:       cmp.Or(o.Window, e.Window),
		Seed:         cmp.Or(o.Seed, e.Seed),
	}
}

// Params returns the netem parameters e sets, zero elsewhere.
func (e Emulation) Params() netem.Params {
	return netem.Params{
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

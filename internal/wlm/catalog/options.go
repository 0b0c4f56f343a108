package catalog

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluicelab/sluice/internal/distname"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// badValue is the 22023 error for option name with value v.
func badValue(name string, v ddl.Value, why error) *ddl.Error {
	e := ddl.Errorf(sqlstate.InvalidParameterValue, v.Pos, "invalid value for parameter %q: %q", name, v.Text)
	if why != nil {
		e.Detail = why.Error()
	}
	return e
}

// unknownParam is the 22023 error for an option that does not exist.
func unknownParam(kind ddl.Kind, o ddl.Option, known []string) *ddl.Error {
	e := ddl.Errorf(sqlstate.InvalidParameterValue, o.NamePos, "unrecognized %s parameter %q", kind.Noun(), o.Name)
	e.Hint = "Valid parameters: " + strings.Join(known, ", ") + "."
	return e
}

func parseDuration(v ddl.Value) (time.Duration, error) {
	return units.ParseDuration(v.Text)
}

// parseSeconds reads a bare number as seconds, or a duration with a unit.
func parseSeconds(v ddl.Value) (time.Duration, error) {
	if f, err := strconv.ParseFloat(strings.TrimSpace(v.Text), 64); err == nil {
		if f < 0 || math.IsNaN(f) || f > 1e9 {
			return 0, fmt.Errorf("%q: must be between 0 and 1e9 seconds", v.Text)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return units.ParseDuration(v.Text)
}

func parseRate(v ddl.Value) (int64, error) { return units.ParseRate(v.Text) }
func parseSize(v ddl.Value) (int64, error) { return units.ParseBytes(v.Text) }

// parseFraction reads "0.1%" or a fraction in [0, 1].
func parseFraction(v ddl.Value) (float64, error) { return units.ParsePercent(v.Text) }

func parseInt(v ddl.Value, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v.Text), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want an integer", v.Text)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
	}
	return n, nil
}

func parseBool(v ddl.Value) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v.Text)) {
	case "on", "true", "yes", "1", "t", "y":
		return true, nil
	case "off", "false", "no", "0", "f", "n":
		return false, nil
	}
	return false, fmt.Errorf("%q: want on or off", v.Text)
}

// emulationOptions are the path-emulation options of links, routes and
// pools.
var emulationOptions = []string{"delay", "jitter", "distribution", "correlation", "rate", "burst", "loss", "rto", "window", "seed"}

// setEmulation applies option o to e. It reports false if o is not an
// emulation option. DEFAULT unsets the option.
func setEmulation(e *Emulation, o ddl.Option) (bool, error) {
	var err error
	switch o.Name {
	case "delay":
		e.Delay, err = optional(o, parseDurationOption)
	case "jitter":
		e.Jitter, err = optional(o, parseDurationOption)
	case "rto":
		e.RTO, err = optional(o, parseDurationOption)
	case "distribution":
		e.Distribution, err = optional(o, func(v ddl.Value) (netem.Distribution, error) { return netem.ParseDistribution(v.Text) })
	case "correlation":
		e.Correlation, err = optional(o, parseFraction)
	case "loss":
		e.Loss, e.LossModel, err = parseLoss(o)
	case "rate":
		e.Rate, err = optional(o, parseRate)
	case "burst":
		e.Burst, err = optional(o, parseSize)
	case "window":
		e.Window, err = optional(o, parseSize)
	case "seed":
		e.Seed, err = optional(o, func(v ddl.Value) (int64, error) { return parseInt(v, math.MinInt64, math.MaxInt64) })
	default:
		return false, nil
	}
	return true, err
}

// parseLoss reads option loss: a percentage per segment, as tc netem
// reads it ("1" and "1%" are both 1 %, "0.1%" is 0.001), for Bernoulli
// loss, or "gemodel P [R [1-H [1-K]]]" for a Gilbert-Elliott model
// (ParseLossModel, percentages too); DEFAULT unsets both.
func parseLoss(o ddl.Option) (*float64, *LossModel, error) {
	t := strings.TrimSpace(o.Value.Text)
	if o.Value.Kind == ddl.Default || t == "" || !unicode.IsLetter(rune(t[0])) {
		p, err := optional(o, func(v ddl.Value) (float64, error) { return units.ParsePercentage(v.Text) })
		return p, nil, err
	}
	m, err := optional(o, func(v ddl.Value) (LossModel, error) { return ParseLossModel(v.Text) })
	return nil, m, err
}

// optional parses option o with parse: nil for DEFAULT, a new pointer to
// the value otherwise, or the 22023 error naming o and its value.
func optional[T any](o ddl.Option, parse func(ddl.Value) (T, error)) (*T, error) {
	if o.Value.Kind == ddl.Default {
		return nil, nil
	}
	x, err := parse(o.Value)
	if err != nil {
		return nil, badValue(o.Name, o.Value, err)
	}
	return &x, nil
}

// setValue sets *field from option o: to zero for DEFAULT, else to what
// parse reads, or it returns the 22023 error naming o and its value and
// leaves *field at zero.
func setValue[T any](field *T, zero T, o ddl.Option, parse func(ddl.Value) (T, error)) error {
	*field = zero
	if o.Value.Kind == ddl.Default {
		return nil
	}
	x, err := parse(o.Value)
	if err != nil {
		return badValue(o.Name, o.Value, err)
	}
	*field = x
	return nil
}

// setEmulationOption sets emulation option o in e, or returns the 22023
// error of an option of kind that does not exist (known lists those that
// do).
func setEmulationOption(e *Emulation, o ddl.Option, kind ddl.Kind, known []string) error {
	ok, err := setEmulation(e, o)
	if err != nil {
		return err
	}
	if !ok {
		return unknownParam(kind, o, known)
	}
	return nil
}

func parseDurationOption(v ddl.Value) (Duration, error) {
	d, err := parseDuration(v)
	return Duration(d), err
}

// ParseEmulation parses path-emulation options spelled as in the admin
// console (delay: "10ms", rate: "1Gbit", loss: "0.1%", ...), as a
// configuration file gives them for a route. Names are case-insensitive.
func ParseEmulation(opts map[string]string) (Emulation, error) {
	var e Emulation
	names := slices.Sorted(maps.Keys(opts))
	for _, k := range names {
		o := ddl.Option{Name: strings.ToLower(strings.TrimSpace(k)), Value: ddl.Value{Kind: ddl.String, Text: opts[k]}}
		ok, err := setEmulation(&e, o)
		if err != nil {
			return Emulation{}, err
		}
		if !ok {
			return Emulation{}, ddl.Errorf(sqlstate.InvalidParameterValue, 0, "unrecognized emulation option %q (valid: %s)", k, strings.Join(emulationOptions, ", "))
		}
	}
	return e, nil
}

// EmulationOption is one option an Emulation sets, as the console
// spells it: its name (one of the emulation options) and its value
// ("10ms", "0.1%", "gemodel 1% 25%").
type EmulationOption struct{ Name, Value string }

// EmulationOptions returns the options e sets, in the console's order of
// the options: the one formatter of an emulation, which the console's
// views, the HTTP API and the dashboard render.
func EmulationOptions(e Emulation) []EmulationOption {
	var out []EmulationOption
	add := func(k, v string) { out = append(out, EmulationOption{k, v}) }
	if e.Delay != nil {
		add("delay", units.FormatDuration(time.Duration(*e.Delay)))
	}
	if e.Jitter != nil {
		add("jitter", units.FormatDuration(time.Duration(*e.Jitter)))
	}
	if e.Distribution != nil {
		add("distribution", e.Distribution.String())
	}
	if e.Correlation != nil {
		add("correlation", FormatFloat(*e.Correlation))
	}
	if e.Rate != nil {
		add("rate", units.FormatRate(*e.Rate))
	}
	if e.Burst != nil {
		add("burst", units.FormatBytes(*e.Burst))
	}
	if e.Loss != nil {
		add("loss", formatPercent(*e.Loss))
	}
	if e.LossModel != nil {
		add("loss", e.LossModel.text(formatPercent))
	}
	if e.RTO != nil {
		add("rto", units.FormatDuration(time.Duration(*e.RTO)))
	}
	if e.Window != nil {
		add("window", units.FormatBytes(*e.Window))
	}
	if e.Seed != nil {
		add("seed", strconv.FormatInt(*e.Seed, 10))
	}
	return out
}

// FormatEmulation writes the options e sets as "delay=10ms jitter=1ms",
// a value with a space quoted ("loss='gemodel 1% 25%'").
func FormatEmulation(e Emulation) string {
	var parts []string
	for _, o := range EmulationOptions(e) {
		v := o.Value
		if strings.Contains(v, " ") {
			v = "'" + v + "'"
		}
		parts = append(parts, o.Name+"="+v)
	}
	return strings.Join(parts, " ")
}

// formatPercent writes a probability as a percentage ("0.1%").
func formatPercent(p float64) string { return FormatFloat(p*100) + "%" }

// FormatFloat writes f in the fewest digits that read back as f.
func FormatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// linkOptions are the options of CREATE/ALTER LINK.
var linkOptions = append([]string{"capacity", "queue_size", "max_active_statements"}, emulationOptions...)

func setLinkOption(d *LinkDef, o ddl.Option) error {
	switch o.Name {
	case "capacity":
		return setValue(&d.Capacity, 0, o, parseRateOrUnlimited)
	case "queue_size":
		return setValue(&d.QueueSize, 0, o, parseSize)
	case "max_active_statements":
		return setValue(&d.MaxActiveStatements, 0, o, parseActiveStatements)
	}
	return setEmulationOption(&d.Emulation, o, ddl.Link, linkOptions)
}

func isUnlimitedWord(v ddl.Value) bool {
	return strings.EqualFold(strings.TrimSpace(v.Text), "unlimited") || strings.TrimSpace(v.Text) == "-1"
}

// parseRateOrUnlimited reads a rate in bytes/s; -1 or "unlimited" is 0,
// no limit.
func parseRateOrUnlimited(v ddl.Value) (int64, error) {
	if isUnlimitedWord(v) {
		return 0, nil
	}
	return parseRate(v)
}

// fieldSetting is the setting name of the field field returns: parse
// reads a value for it and format shows it. A value parse refuses
// leaves the field as it was.
func fieldSetting[T any](name, desc string, field func(*Settings) *T, parse func(ddl.Value) (T, error), format func(T) string) setting {
	return setting{
		name: name,
		desc: desc,
		def:  func(s Settings) string { return format(*field(&s)) },
		set: func(s *Settings, v ddl.Value) error {
			x, err := parse(v)
			if err != nil {
				return err
			}
			*field(s) = x
			return nil
		},
	}
}

// poolOptions are the options of CREATE/ALTER RESOURCE POOL.
var poolOptions = append([]string{"except_rule", "weight", "network_priority", "active_statements", "queue_timeout", "idle_in_transaction"}, emulationOptions...)

// MaxActiveStatements bounds active_statements and max_active_statements.
const MaxActiveStatements = 1 << 20

// parseActiveStatements reads a slot limit: -1 or "unlimited" is 0 (no
// limit), else an integer in [1, MaxActiveStatements]; 0 is refused, as
// it would admit nothing.
func parseActiveStatements(v ddl.Value) (int, error) {
	if isUnlimitedWord(v) {
		return 0, nil
	}
	n, err := parseInt(v, 0, MaxActiveStatements)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("0 would admit no statement: want -1 (unlimited) or a number from 1 to %d", MaxActiveStatements)
	}
	return int(n), nil
}

// parseTimeout reads a pool's time bound (queue_timeout,
// idle_in_transaction): seconds, or a time with its unit ('500ms'); 0 or
// -1 is none.
func parseTimeout(v ddl.Value) (time.Duration, error) {
	if strings.TrimSpace(v.Text) == "-1" {
		return 0, nil
	}
	return parseSeconds(v)
}

// gaussPoolOptions are GaussDB resource-pool parameters that govern the
// database's own resources, which a network proxy does not control.
var gaussPoolOptions = map[string]bool{
	"mem_percent": true, "cpu_affinity": true, "control_group": true,
	"max_dop": true, "memory_limit": true,
	"io_limits": true, "io_priority": true, "nodegroup": true,
	"is_foreign": true, "max_worker": true, "min_worker": true,
	"max_workers": true, "max_connections": true,
}

func setPoolOption(p *Pool, o ddl.Option) error {
	v := o.Value
	switch o.Name {
	case "except_rule":
		p.ExceptRules = nil
		if v.Kind == ddl.Default {
			return nil
		}
		seen := map[string]bool{}
		for _, r := range strings.Split(v.Text, ",") {
			r = strings.TrimSpace(r)
			if v.Kind == ddl.Word {
				r = strings.ToLower(r)
			}
			if r == "" || strings.EqualFold(r, "none") {
				continue
			}
			if !seen[r] {
				seen[r] = true
				p.ExceptRules = append(p.ExceptRules, r)
			}
		}
		return nil
	case "weight":
		return setValue(&p.Weight, link.DefaultWeight, o, func(v ddl.Value) (int, error) {
			x, err := parseInt(v, 1, link.MaxWeight)
			return int(x), err
		})
	case "network_priority":
		return setValue(&p.Priority, link.Normal, o, func(v ddl.Value) (link.Class, error) { return link.ParseClass(v.Text) })
	case "active_statements":
		return setValue(&p.ActiveStatements, 0, o, parseActiveStatements)
	case "queue_timeout":
		return setValue(&p.QueueTimeout, 0, o, parseTimeout)
	case "idle_in_transaction":
		return setValue(&p.IdleInTransaction, 0, o, parseTimeout)
	}
	if gaussPoolOptions[o.Name] {
		return ddl.Errorf(sqlstate.FeatureNotSupported, o.NamePos, "resource pool parameter %s is not supported: sluice manages network traffic, not the database's %s", o.Name, strings.ReplaceAll(o.Name, "_", " "))
	}
	return setEmulationOption(&p.Emulation, o, ddl.Pool, poolOptions)
}

// ruleOptions are the options of CREATE/ALTER EXCEPT RULE that sluice
// measures.
var ruleOptions = []string{"bandwidth", "elapsedtime", "blocktime", "action"}

// unmeasurable are GaussDB exception-rule parameters that need the
// database's executor: a proxy sees bytes and time only.
var unmeasurable = map[string]string{
	"cputime":        "CPU time",
	"allcputime":     "CPU time on all nodes",
	"cpuskewpercent": "CPU skew across nodes",
	"spillsize":      "spill to disk",
	"broadcastsize":  "broadcast size inside the cluster",
	"memsize":        "memory use",
	"cpuavgpercent":  "average CPU use",
}

// threshold is a measurable threshold of an exception rule: the field
// it sets and how a value with a unit converts to the field's base unit.
type threshold struct {
	field    func(*Rule) *float64
	withUnit func(string) (float64, error)
}

// thresholds are the measurable thresholds by option name: bandwidth in
// MB/s (10^6 bytes/s), elapsedtime in seconds.
var thresholds = map[string]threshold{
	"bandwidth": {
		field: func(r *Rule) *float64 { return &r.Bandwidth },
		withUnit: func(s string) (float64, error) {
			b, err := units.ParseRate(s)
			return float64(b) / 1e6, err
		},
	},
	"elapsedtime": {
		field: func(r *Rule) *float64 { return &r.ElapsedTime },
		withUnit: func(s string) (float64, error) {
			d, err := units.ParseDuration(s)
			return d.Seconds(), err
		},
	},
}

func setRuleOption(r *Rule, o ddl.Option) error {
	v := o.Value
	if th, ok := thresholds[o.Name]; ok {
		return setValue(th.field(r), Unlimited, o, func(v ddl.Value) (float64, error) { return parseThreshold(v, th.withUnit) })
	}
	if o.Name == "blocktime" {
		return setValue(&r.BlockTime, 0, o, parseBlockTime)
	}
	if o.Name == "action" {
		return setValue(&r.Action, Abort, o, func(v ddl.Value) (Action, error) {
			switch a := Action(strings.ToLower(strings.TrimSpace(v.Text))); a {
			case Abort, Penalty:
				return a, nil
			}
			return "", fmt.Errorf("want 'abort' or 'penalty'")
		})
	}
	if what, ok := unmeasurable[o.Name]; ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v.Text), 64); (err == nil && f == Unlimited) || v.Kind == ddl.Default {
			return nil // "no limit" is harmless
		}
		e := ddl.Errorf(sqlstate.FeatureNotSupported, o.NamePos, "exception rule parameter %s is not supported: sluice cannot measure %s, only a statement's bytes, elapsed time and block time", o.Name, what)
		e.Hint = "Use bandwidth, elapsedtime or blocktime, or set " + o.Name + " to -1."
		return e
	}
	return unknownParam(ddl.Rule, o, ruleOptions)
}

// parseBlockTime reads blocktime: -1 (unlimited) is 0, else seconds >
// 0, a bare number or a duration with a unit.
func parseBlockTime(v ddl.Value) (float64, error) {
	f, err := parseThreshold(v, func(s string) (float64, error) {
		d, err := units.ParseDuration(s)
		return d.Seconds(), err
	})
	switch {
	case err != nil:
		return 0, err
	case f == Unlimited:
		return 0, nil
	case f == 0:
		return 0, fmt.Errorf("want -1 (unlimited) or a number of seconds > 0")
	}
	return f, nil
}

// parseThreshold reads -1 (Unlimited), a bare non-negative number in the
// rule's base unit, or a value with a unit converted by withUnit.
func parseThreshold(v ddl.Value, withUnit func(string) (float64, error)) (float64, error) {
	t := strings.TrimSpace(v.Text)
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		switch {
		case f == Unlimited:
			return Unlimited, nil
		case f < 0 || math.IsNaN(f) || math.IsInf(f, 0):
			return 0, fmt.Errorf("want -1 (unlimited) or a number >= 0")
		}
		return f, nil
	}
	f, err := withUnit(t)
	if err != nil {
		return 0, err
	}
	return f, nil
}

// MaxMetricsUserLabels bounds the setting metrics_user_labels.
const MaxMetricsUserLabels = 10000

// setting describes one global setting.
type setting struct {
	name string
	desc string
	def  func(Settings) string // formats the value in s
	set  func(*Settings, ddl.Value) error
}

var settings = []setting{
	fieldSetting("distributed_application_name",
		"application_name pattern of a distributed query's shard connections naming the coordinator backend: %p its pid, %c postgres_fdw's session id, %g a Citus global pid, %a %u %d %C any text, %% a % ('' turns linking off).",
		func(s *Settings) *string { return &s.DistributedApplicationName },
		func(v ddl.Value) (string, error) {
			_, err := distname.Parse(v.Text)
			return v.Text, err
		},
		func(p string) string { return p }),
	fieldSetting("cluster_low_priority_bandwidth",
		"Rate limit of the low-priority class over every instance of a fleet sharing an etcd catalog, split by demand (bytes/s with a unit, e.g. '30MB'; 0 is off).",
		func(s *Settings) *int64 { return &s.ClusterLowPriorityBandwidth },
		parseRateOrUnlimited, units.FormatRate),
	fieldSetting("except_check_period",
		"Interval between two checks of a statement's exception rules (seconds, or with a unit).",
		func(s *Settings) *time.Duration { return &s.ExceptCheckPeriod },
		func(v ddl.Value) (time.Duration, error) {
			d, err := parseSeconds(v)
			if err != nil {
				return 0, err
			}
			if d < 100*time.Millisecond || d > 24*time.Hour {
				return 0, fmt.Errorf("must be between 100ms and 24h")
			}
			return d, nil
		},
		units.FormatDuration),
	fieldSetting("low_priority_bandwidth",
		"Rate limit of the low-priority class on each link (bytes/s with a unit, e.g. '256MB'; 0 is unlimited).",
		func(s *Settings) *int64 { return &s.LowPriorityBandwidth },
		parseRateOrUnlimited, units.FormatRate),
	fieldSetting("low_priority_yield",
		"Share of a link's capacity the low-priority class may use while normal or high-priority bytes are on the link and for 50ms after (percentage, e.g. '25%'; '100%' switches yielding off).",
		func(s *Settings) *int { return &s.LowPriorityYield },
		func(v ddl.Value) (int, error) {
			f, err := units.ParsePercentage(v.Text)
			if err != nil {
				return 0, err
			}
			pct := int(math.Round(f * 100))
			if pct < 1 {
				return 0, fmt.Errorf("must be at least 1%%, or 100%% to switch yielding off")
			}
			return pct, nil
		},
		func(pct int) string { return strconv.Itoa(pct) + "%" }),
	fieldSetting("low_priority_queue_bytes",
		"Bound on low-priority bytes in a link's device queue (size with a unit; -1 switches it off).",
		func(s *Settings) *int64 { return &s.LowPriorityQueueBytes },
		func(v ddl.Value) (int64, error) {
			if strings.TrimSpace(v.Text) == "-1" {
				return -1, nil
			}
			b, err := parseSize(v)
			if err != nil {
				return 0, err
			}
			if b == 0 {
				return 0, fmt.Errorf("must be positive, or -1 to switch the bound off")
			}
			return b, nil
		},
		func(b int64) string {
			if b < 0 {
				return "-1"
			}
			return units.FormatBytes(b)
		}),
	fieldSetting("metrics_user_labels",
		"How many users get a user label of their own in the metrics; the others are counted as user \"other\" (0: none, at most 10000).",
		func(s *Settings) *int { return &s.MetricsUserLabels },
		func(v ddl.Value) (int, error) {
			n, err := parseInt(v, 0, MaxMetricsUserLabels)
			return int(n), err
		},
		strconv.Itoa),
	fieldSetting("network_control",
		"Priority scheduling on links (on: classes, pool weights and low-priority limits; off: one FIFO).",
		func(s *Settings) *bool { return &s.NetworkControl },
		parseBool,
		func(on bool) string {
			if on {
				return "on"
			}
			return "off"
		}),
}

func findSetting(name string) *setting {
	for i := range settings {
		if settings[i].name == name {
			return &settings[i]
		}
	}
	return nil
}

// SettingNames returns the settings' names in SHOW ALL order.
func SettingNames() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.name
	}
	return out
}

// SettingDescription returns the description SHOW ALL gives setting
// name, "" for an unknown name.
func SettingDescription(name string) string {
	if x := findSetting(name); x != nil {
		return x.desc
	}
	return ""
}

// Show returns setting name as SHOW writes it; ok is false for an
// unknown name.
func (s Settings) Show(name string) (v string, ok bool) {
	x := findSetting(name)
	if x == nil {
		return "", false
	}
	return x.def(s), true
}

// Text writes setting name exactly, as the catalog file keeps it; ""
// for an unknown name.
func (s Settings) Text(name string) string {
	switch name {
	case "except_check_period":
		return s.ExceptCheckPeriod.String()
	case "low_priority_bandwidth":
		return strconv.FormatInt(s.LowPriorityBandwidth, 10)
	case "cluster_low_priority_bandwidth":
		return strconv.FormatInt(s.ClusterLowPriorityBandwidth, 10)
	case "low_priority_queue_bytes":
		return strconv.FormatInt(s.LowPriorityQueueBytes, 10)
	case "low_priority_yield":
		return strconv.Itoa(s.LowPriorityYield)
	case "network_control", "metrics_user_labels", "distributed_application_name":
		return findSetting(name).def(s)
	}
	return ""
}

// Set sets setting name to v as SET does, without the statement's error
// wrapping; an unknown name is an error.
func (s *Settings) Set(name string, v ddl.Value) error {
	x := findSetting(name)
	if x == nil {
		return fmt.Errorf("unknown setting %q", name)
	}
	return x.set(s, v)
}

// OptionNames returns the options CREATE and ALTER take for objects of
// kind k (Link, Pool or Rule), in the console's order; nil for another
// kind. The slice is the caller's.
func OptionNames(k ddl.Kind) []string {
	switch k {
	case ddl.Link:
		return slices.Clone(linkOptions)
	case ddl.Pool:
		return slices.Clone(poolOptions)
	case ddl.Rule:
		return slices.Clone(ruleOptions)
	}
	return nil
}

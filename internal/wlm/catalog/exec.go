package catalog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// ErrUnchanged, returned by a change, ends it without applying it: the
// statement had nothing to do (IF NOT EXISTS of an object that exists,
// DROP IF EXISTS of none, a binding that is already so).
var ErrUnchanged = errors.New("catalog: unchanged")

// RouteUse is what DROP must know of a proxy route: the link it is
// attached to and its default pool ("" for none).
type RouteUse struct {
	Link string
	Pool string
}

// Tag returns the PostgreSQL command tag of verb on kind k ("CREATE
// EXCEPT RULE"; a user is a ROLE).
func Tag(verb string, k ddl.Kind) string {
	if k == ddl.User {
		return verb + " ROLE"
	}
	return verb + " " + k.String()
}

func exists(k ddl.Kind, n ddl.Name) *ddl.Error {
	return ddl.Errorf(sqlstate.DuplicateObject, n.Pos, "%s %q already exists", k.Noun(), n.Name)
}

func missing(k ddl.Kind, n ddl.Name) *ddl.Error {
	return ddl.Errorf(sqlstate.UndefinedObject, n.Pos, "%s %q does not exist", k.Noun(), n.Name)
}

// has reports whether c holds an object of kind k named name.
func (c *Catalog) has(k ddl.Kind, name string) bool {
	switch k {
	case ddl.Rule:
		return c.Rules[name] != nil
	case ddl.Pool:
		return c.Pools[name] != nil
	case ddl.Link:
		return c.Links[name] != nil
	case ddl.User:
		return c.Users[name] != nil
	}
	return false
}

// Create applies CREATE to c and returns its notices. Errors are
// *ddl.Error at the token to blame; ErrUnchanged when IF NOT EXISTS
// found the object.
func Create(c *Catalog, s *ddl.Create) ([]string, error) {
	if c.has(s.Kind, s.Name.Name) {
		if s.IfNotExists {
			return []string{fmt.Sprintf("%s %q already exists, skipping", s.Kind.Noun(), s.Name.Name)}, ErrUnchanged
		}
		return nil, exists(s.Kind, s.Name)
	}
	switch s.Kind {
	case ddl.Rule:
		r := &Rule{Bandwidth: Unlimited, ElapsedTime: Unlimited, Action: Abort}
		if err := applyRule(r, s.Options); err != nil {
			return nil, err
		}
		if !r.HasThreshold() {
			e := ddl.Errorf(sqlstate.InvalidParameterValue, s.Name.Pos, "except rule %q has no threshold", s.Name.Name)
			e.Hint = "Set bandwidth (MB/s), elapsedtime (s) or blocktime (s), e.g. WITH (bandwidth=128, elapsedtime=60)."
			return nil, e
		}
		if err := blockTimeAlone(r, s.Name); err != nil {
			return nil, err
		}
		c.Rules[s.Name.Name] = r
	case ddl.Pool:
		p := &Pool{Weight: link.DefaultWeight, Priority: link.Normal}
		if err := applyPool(c, p, s.Options); err != nil {
			return nil, err
		}
		c.Pools[s.Name.Name] = p
	case ddl.Link:
		d := &LinkDef{}
		if err := applyLink(d, s.Options); err != nil {
			return nil, err
		}
		c.Links[s.Name.Name] = d
	case ddl.User:
		u := &UserDef{}
		if err := applyUser(c, u, s.Options); err != nil {
			return nil, err
		}
		c.Users[s.Name.Name] = u
	}
	return nil, nil
}

// Alter applies ALTER to c. ALTER USER with a RESOURCE POOL clause
// binds a user that has no binding yet: as in GaussDB, every user is in
// the default pool until altered.
func Alter(c *Catalog, s *ddl.Alter) error {
	if s.Kind == ddl.User && c.Users[s.Name.Name] == nil && hasOption(s.Options, "resource_pool") {
		u := &UserDef{}
		if err := applyUser(c, u, s.Options); err != nil {
			return err
		}
		c.Users[s.Name.Name] = u
		return nil
	}
	if !c.has(s.Kind, s.Name.Name) {
		e := missing(s.Kind, s.Name)
		if s.Kind == ddl.User {
			e.Hint = "Bind a user with CREATE USER name RESOURCE POOL 'pool'."
		}
		return e
	}
	switch s.Kind {
	case ddl.Rule:
		r := c.Rules[s.Name.Name]
		if err := applyRule(r, s.Options); err != nil {
			return err
		}
		if !r.HasThreshold() {
			return ddl.Errorf(sqlstate.InvalidParameterValue, s.Name.Pos, "except rule %q would have no threshold", s.Name.Name)
		}
		return blockTimeAlone(r, s.Name)
	case ddl.Pool:
		return applyPool(c, c.Pools[s.Name.Name], s.Options)
	case ddl.Link:
		return applyLink(c.Links[s.Name.Name], s.Options)
	case ddl.User:
		return applyUser(c, c.Users[s.Name.Name], s.Options)
	}
	return nil
}

func applyRule(r *Rule, opts []ddl.Option) error {
	for _, o := range opts {
		if err := setRuleOption(r, o); err != nil {
			return err
		}
	}
	return nil
}

func applyLink(d *LinkDef, opts []ddl.Option) error {
	for _, o := range opts {
		if err := setLinkOption(d, o); err != nil {
			return err
		}
	}
	return invalidEmulation(d.Emulation.Validate())
}

// invalidEmulation is err, from Emulation.Validate, as a 22023 error;
// nil for nil.
func invalidEmulation(err error) error {
	if err == nil {
		return nil
	}
	return ddl.Errorf(sqlstate.InvalidParameterValue, 0, "%v", err)
}

func applyPool(c *Catalog, p *Pool, opts []ddl.Option) error {
	for _, o := range opts {
		if err := setPoolOption(p, o); err != nil {
			return err
		}
		if o.Name == "except_rule" {
			for _, r := range p.ExceptRules {
				if c.Rules[r] == nil {
					return ddl.Errorf(sqlstate.UndefinedObject, o.Value.Pos, "except rule %q does not exist", r)
				}
			}
		}
	}
	return invalidEmulation(p.Emulation.Validate())
}

func hasOption(opts []ddl.Option, name string) bool {
	for _, o := range opts {
		if o.Name == name {
			return true
		}
	}
	return false
}

// defaultPool is GaussDB's name for "no resource pool".
const defaultPool = "default_pool"

func applyUser(c *Catalog, u *UserDef, opts []ddl.Option) error {
	for _, o := range opts {
		switch o.Name {
		case "resource_pool":
			name := o.Value.Text
			if o.Value.Kind == ddl.Word {
				name = strings.ToLower(name)
			}
			if name == defaultPool || o.Value.Kind == ddl.Default {
				u.Pool = ""
				continue
			}
			if c.Pools[name] == nil {
				return ddl.Errorf(sqlstate.UndefinedObject, o.Value.Pos, "resource pool %q does not exist", name)
			}
			u.Pool = name
		case "password":
			// Accepted for compatibility; the database checks passwords.
		}
	}
	return nil
}

// Drop applies DROP to c and returns its notices. routes are the proxy
// routes by name: a pool that is a route's default pool, or a link a
// route is attached to, cannot be dropped. ErrUnchanged when IF EXISTS
// found nothing to drop.
func Drop(c *Catalog, s *ddl.Drop, routes map[string]RouteUse) ([]string, error) {
	var notices []string
	dropped := 0
	for _, n := range s.Names {
		if !c.has(s.Kind, n.Name) {
			if s.IfExists {
				notices = append(notices, fmt.Sprintf("%s %q does not exist, skipping", s.Kind.Noun(), n.Name))
				continue
			}
			return nil, missing(s.Kind, n)
		}
		dropped++
		switch s.Kind {
		case ddl.Rule:
			if users := c.PoolsUsingRule(n.Name); len(users) > 0 {
				if !s.Cascade {
					return nil, dependents(s.Kind, n, "resource pool", users)
				}
				for _, p := range users {
					pl := c.Pools[p]
					pl.ExceptRules = slices.DeleteFunc(pl.ExceptRules, func(r string) bool { return r == n.Name })
					notices = append(notices, fmt.Sprintf("drop cascades to except_rule of resource pool %q", p))
				}
			}
			delete(c.Rules, n.Name)
		case ddl.Pool:
			for _, rn := range slices.Sorted(maps.Keys(routes)) {
				if routes[rn].Pool == n.Name {
					return nil, ddl.Errorf(sqlstate.DependentObjectsStillExist, n.Pos, "cannot drop resource pool %q because route %q uses it as its default pool", n.Name, rn)
				}
			}
			if users := c.UsersOfPool(n.Name); len(users) > 0 {
				if !s.Cascade {
					return nil, dependents(s.Kind, n, "user", users)
				}
				for _, u := range users {
					delete(c.Users, u)
					notices = append(notices, fmt.Sprintf("drop cascades to user %q", u))
				}
			}
			delete(c.Pools, n.Name)
		case ddl.Link:
			if n.Name == DefaultLink {
				return nil, ddl.Errorf(sqlstate.DependentObjectsStillExist, n.Pos, "cannot drop link %q: it always exists (alter it instead)", DefaultLink)
			}
			for _, rn := range slices.Sorted(maps.Keys(routes)) {
				if routes[rn].Link == n.Name {
					return nil, ddl.Errorf(sqlstate.DependentObjectsStillExist, n.Pos, "cannot drop link %q because route %q is attached to it", n.Name, rn)
				}
			}
			delete(c.Links, n.Name)
		case ddl.User:
			delete(c.Users, n.Name)
		}
	}
	if dropped == 0 {
		return notices, ErrUnchanged
	}
	return notices, nil
}

func dependents(k ddl.Kind, n ddl.Name, what string, names []string) *ddl.Error {
	e := ddl.Errorf(sqlstate.DependentObjectsStillExist, n.Pos, "cannot drop %s %q because other objects depend on it", k.Noun(), n.Name)
	lines := make([]string, len(names))
	for i, d := range names {
		lines[i] = fmt.Sprintf("%s %q depends on %s %q", what, d, k.Noun(), n.Name)
	}
	e.Detail = strings.Join(lines, "\n")
	e.Hint = "Use DROP ... CASCADE to drop the dependent objects too."
	return e
}

// CheckSetting returns the 42704 error SET, RESET and SHOW give for an
// unknown setting name at pos, or nil.
func CheckSetting(name string, pos int) *ddl.Error {
	if findSetting(name) != nil {
		return nil
	}
	e := ddl.Errorf(sqlstate.UndefinedObject, pos, "unrecognized configuration parameter %q", name)
	e.Hint = "Settings: " + strings.Join(SettingNames(), ", ") + "."
	return e
}

// Set applies SET name = v to c; v of kind Default restores the
// default. An unknown name is CheckSetting's error, a bad value 22023.
func Set(c *Catalog, name string, pos int, v ddl.Value) error {
	if e := CheckSetting(name, pos); e != nil {
		return e
	}
	s := findSetting(name)
	if v.Kind == ddl.Default {
		return s.set(&c.Settings, ddl.Value{Kind: ddl.String, Text: DefaultSettings().Text(s.name)})
	}
	if err := s.set(&c.Settings, v); err != nil {
		return badValue(s.name, v, err)
	}
	return nil
}

// Reset applies RESET name (or RESET ALL) to c.
func Reset(c *Catalog, s *ddl.Reset) error {
	if s.Name == "all" {
		c.Settings = DefaultSettings()
		return nil
	}
	return Set(c, s.Name, s.NamePos, ddl.Value{Kind: ddl.Default})
}

// BindUser binds user to pool in c, creating the binding or replacing
// it. pool is read as the console reads the RESOURCE POOL clause: a Word
// is folded to lower case, a String kept as written, and default_pool or
// DEFAULT leave the user bound to no pool. ErrUnchanged when the binding
// already is so.
func BindUser(c *Catalog, user string, pool ddl.Value) error {
	opts := []ddl.Option{{Name: "resource_pool", NamePos: pool.Pos, Value: pool}}
	u := c.Users[user]
	if u == nil {
		u = &UserDef{}
	}
	before := *u
	if err := applyUser(c, u, opts); err != nil {
		return err
	}
	if c.Users[user] != nil && *u == before {
		return ErrUnchanged
	}
	c.Users[user] = u
	return nil
}

// DefineLink creates link name with opts, or alters it if it exists, as
// CREATE LINK / ALTER LINK would; option names and values are spelled as
// in the console.
func DefineLink(c *Catalog, name string, opts map[string]string) error {
	d := c.Links[name]
	if d == nil {
		d = &LinkDef{}
		c.Links[name] = d
	}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		o := ddl.Option{Name: strings.ToLower(strings.TrimSpace(k)), Value: ddl.Value{Kind: ddl.String, Text: opts[k]}}
		if err := setLinkOption(d, o); err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	return nil
}

// blockTimeAlone is the 22023 error of a rule that sets blocktime with
// another threshold.
func blockTimeAlone(r *Rule, name ddl.Name) error {
	if !r.Queued() || (r.Bandwidth == Unlimited && r.ElapsedTime == Unlimited) {
		return nil
	}
	e := ddl.Errorf(sqlstate.InvalidParameterValue, name.Pos, "except rule %q: %s", name.Name, errBlockTimeAlone)
	e.Hint = "Make two rules, one with blocktime and one with bandwidth or elapsedtime, and list both in the pool's except_rule."
	return e
}

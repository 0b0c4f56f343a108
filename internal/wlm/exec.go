package wlm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Exec parses sql and runs its statements in order, stopping at the
// first error. It returns the result of the last statement; an empty
// text returns a zero Result. Errors are *ddl.Error with a SQLSTATE (and
// a position within sql when one token is to blame).
func (m *Manager) Exec(ctx context.Context, sql string) (Result, error) {
	sts, err := ddl.Parse(sql)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, st := range sts {
		if res, err = m.ExecStatement(ctx, st); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// ExecStatement runs one parsed statement. Each statement that changes
// the catalog is applied to a copy, validated and saved before it
// replaces the catalog: it takes effect entirely or not at all.
func (m *Manager) ExecStatement(ctx context.Context, st ddl.Statement) (Result, error) {
	switch s := st.(type) {
	case *ddl.Create:
		return m.create(s)
	case *ddl.Alter:
		return m.alter(s)
	case *ddl.Drop:
		return m.drop(s)
	case *ddl.Set:
		return m.set(s.Name, s.NamePos, s.Value)
	case *ddl.Reset:
		return m.reset(s)
	case *ddl.Show:
		return m.show(s)
	case *ddl.Select:
		return m.selectRows(s)
	}
	return Result{}, ddl.Errorf(ddl.CodeNotSupported, st.Position(), "statement not supported")
}

func tagOf(verb string, k ddl.Kind) string {
	if k == ddl.User {
		return verb + " ROLE"
	}
	return verb + " " + k.String()
}

func exists(k ddl.Kind, n ddl.Name) *ddl.Error {
	return ddl.Errorf(ddl.CodeDuplicateObject, n.Pos, "%s %q already exists", k.Noun(), n.Name)
}

func missing(k ddl.Kind, n ddl.Name) *ddl.Error {
	return ddl.Errorf(ddl.CodeUndefinedObject, n.Pos, "%s %q does not exist", k.Noun(), n.Name)
}

func (m *Manager) create(s *ddl.Create) (Result, error) {
	notices, err := m.changeNotices(func(c *Catalog) ([]string, error) {
		var found bool
		switch s.Kind {
		case ddl.Rule:
			found = c.Rules[s.Name.Name] != nil
		case ddl.Pool:
			found = c.Pools[s.Name.Name] != nil
		case ddl.Link:
			found = c.Links[s.Name.Name] != nil
		case ddl.User:
			found = c.Users[s.Name.Name] != nil
		}
		if found && s.IfNotExists {
			return []string{fmt.Sprintf("%s %q already exists, skipping", s.Kind.Noun(), s.Name.Name)}, errUnchanged
		}
		switch s.Kind {
		case ddl.Rule:
			if c.Rules[s.Name.Name] != nil {
				return nil, exists(s.Kind, s.Name)
			}
			r := &Rule{Bandwidth: Unlimited, ElapsedTime: Unlimited, Action: Abort}
			if err := applyRule(r, s.Options); err != nil {
				return nil, err
			}
			if r.Bandwidth == Unlimited && r.ElapsedTime == Unlimited {
				e := ddl.Errorf(ddl.CodeInvalidParameter, s.Name.Pos, "except rule %q has no threshold", s.Name.Name)
				e.Hint = "Set bandwidth (MB/s) or elapsedtime (s), e.g. WITH (bandwidth=128, elapsedtime=60)."
				return nil, e
			}
			c.Rules[s.Name.Name] = r
		case ddl.Pool:
			if c.Pools[s.Name.Name] != nil {
				return nil, exists(s.Kind, s.Name)
			}
			p := &Pool{Weight: link.DefaultWeight, Priority: link.Normal}
			if err := applyPool(c, p, s.Options); err != nil {
				return nil, err
			}
			c.Pools[s.Name.Name] = p
		case ddl.Link:
			if c.Links[s.Name.Name] != nil {
				return nil, exists(s.Kind, s.Name)
			}
			d := &LinkDef{}
			if err := applyLink(d, s.Options); err != nil {
				return nil, err
			}
			c.Links[s.Name.Name] = d
		case ddl.User:
			if c.Users[s.Name.Name] != nil {
				return nil, exists(s.Kind, s.Name)
			}
			u := &UserDef{}
			if err := applyUser(c, u, s.Options); err != nil {
				return nil, err
			}
			c.Users[s.Name.Name] = u
		}
		return nil, nil
	})
	if err != nil {
		return Result{}, err
	}
	return Result{Tag: tagOf("CREATE", s.Kind), Notices: notices}, nil
}

func (m *Manager) alter(s *ddl.Alter) (Result, error) {
	err := m.change(func(c *Catalog) ([]string, error) {
		switch s.Kind {
		case ddl.Rule:
			r := c.Rules[s.Name.Name]
			if r == nil {
				return nil, missing(s.Kind, s.Name)
			}
			if err := applyRule(r, s.Options); err != nil {
				return nil, err
			}
			if r.Bandwidth == Unlimited && r.ElapsedTime == Unlimited {
				return nil, ddl.Errorf(ddl.CodeInvalidParameter, s.Name.Pos, "except rule %q would have no threshold", s.Name.Name)
			}
		case ddl.Pool:
			p := c.Pools[s.Name.Name]
			if p == nil {
				return nil, missing(s.Kind, s.Name)
			}
			if err := applyPool(c, p, s.Options); err != nil {
				return nil, err
			}
		case ddl.Link:
			d := c.Links[s.Name.Name]
			if d == nil {
				return nil, missing(s.Kind, s.Name)
			}
			if err := applyLink(d, s.Options); err != nil {
				return nil, err
			}
		case ddl.User:
			u := c.Users[s.Name.Name]
			if u == nil {
				e := missing(s.Kind, s.Name)
				e.Hint = "Bind a user with CREATE USER name RESOURCE POOL 'pool'."
				return nil, e
			}
			if err := applyUser(c, u, s.Options); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		return Result{}, err
	}
	return Result{Tag: tagOf("ALTER", s.Kind)}, nil
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
	return d.Emulation.validate()
}

func applyPool(c *Catalog, p *Pool, opts []ddl.Option) error {
	for _, o := range opts {
		if err := setPoolOption(p, o); err != nil {
			return err
		}
		if o.Name == "except_rule" {
			for _, r := range p.ExceptRules {
				if c.Rules[r] == nil {
					return ddl.Errorf(ddl.CodeUndefinedObject, o.Value.Pos, "except rule %q does not exist", r)
				}
			}
		}
	}
	return p.Emulation.validate()
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
				return ddl.Errorf(ddl.CodeUndefinedObject, o.Value.Pos, "resource pool %q does not exist", name)
			}
			u.Pool = name
		case "password":
			// Accepted for compatibility; the database checks passwords.
		}
	}
	return nil
}

func (m *Manager) drop(s *ddl.Drop) (Result, error) {
	notices, err := m.changeNotices(func(c *Catalog) ([]string, error) {
		var notices []string
		dropped := 0
		for _, n := range s.Names {
			var found bool
			switch s.Kind {
			case ddl.Rule:
				found = c.Rules[n.Name] != nil
			case ddl.Pool:
				found = c.Pools[n.Name] != nil
			case ddl.Link:
				found = c.Links[n.Name] != nil
			case ddl.User:
				found = c.Users[n.Name] != nil
			}
			if !found {
				if s.IfExists {
					notices = append(notices, fmt.Sprintf("%s %q does not exist, skipping", s.Kind.Noun(), n.Name))
					continue
				}
				return nil, missing(s.Kind, n)
			}
			dropped++
			switch s.Kind {
			case ddl.Rule:
				if users := c.poolsUsingRule(n.Name); len(users) > 0 {
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
				for rn, r := range m.state.Load().routes {
					if r.Pool == n.Name {
						return nil, ddl.Errorf(ddl.CodeDependentObjects, n.Pos, "cannot drop resource pool %q because route %q uses it as its default pool", n.Name, rn)
					}
				}
				if users := c.usersOfPool(n.Name); len(users) > 0 {
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
					return nil, ddl.Errorf(ddl.CodeDependentObjects, n.Pos, "cannot drop link %q: it always exists (alter it instead)", DefaultLink)
				}
				for rn, r := range m.state.Load().routes {
					if r.linkName() == n.Name {
						return nil, ddl.Errorf(ddl.CodeDependentObjects, n.Pos, "cannot drop link %q because route %q is attached to it", n.Name, rn)
					}
				}
				delete(c.Links, n.Name)
			case ddl.User:
				delete(c.Users, n.Name)
			}
		}
		if dropped == 0 {
			return notices, errUnchanged
		}
		return notices, nil
	})
	if err != nil {
		return Result{}, err
	}
	return Result{Tag: tagOf("DROP", s.Kind), Notices: notices}, nil
}

func dependents(k ddl.Kind, n ddl.Name, what string, names []string) *ddl.Error {
	e := ddl.Errorf(ddl.CodeDependentObjects, n.Pos, "cannot drop %s %q because other objects depend on it", k.Noun(), n.Name)
	lines := make([]string, len(names))
	for i, d := range names {
		lines[i] = fmt.Sprintf("%s %q depends on %s %q", what, d, k.Noun(), n.Name)
	}
	e.Detail = strings.Join(lines, "\n")
	e.Hint = "Use DROP ... CASCADE to drop the dependent objects too."
	return e
}

// set runs SET name = value. DEFAULT restores the default.
func (m *Manager) set(name string, pos int, v ddl.Value) (Result, error) {
	s := findSetting(name)
	if s == nil {
		e := ddl.Errorf(ddl.CodeUndefinedObject, pos, "unrecognized configuration parameter %q", name)
		e.Hint = "Settings: " + strings.Join(settingNames(), ", ") + "."
		return Result{}, e
	}
	err := m.change(func(c *Catalog) ([]string, error) {
		if v.Kind == ddl.Default {
			def := DefaultSettings()
			return nil, s.set(&c.Settings, ddl.Value{Kind: ddl.String, Text: settingText(def, s.name)})
		}
		if err := s.set(&c.Settings, v); err != nil {
			return nil, badValue(s.name, v, err)
		}
		return nil, nil
	})
	if err != nil {
		return Result{}, err
	}
	return Result{Tag: "SET"}, nil
}

func (m *Manager) reset(s *ddl.Reset) (Result, error) {
	if s.Name == "all" {
		err := m.change(func(c *Catalog) ([]string, error) {
			c.Settings = DefaultSettings()
			return nil, nil
		})
		if err != nil {
			return Result{}, err
		}
		return Result{Tag: "RESET"}, nil
	}
	if _, err := m.set(s.Name, s.NamePos, ddl.Value{Kind: ddl.Default}); err != nil {
		return Result{}, err
	}
	return Result{Tag: "RESET"}, nil
}

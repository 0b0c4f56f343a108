package catalog

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicelab/sluice/internal/distname"
	"github.com/sluicelab/sluice/internal/link"
)

// Validate checks the catalog's invariants: the default link exists,
// every pool's rules and every user's pool exist, and every value is in
// range. Statements keep them; Validate guards loaded catalogs and every
// change before it is saved.
func (c *Catalog) Validate() error {
	if c.Links[DefaultLink] == nil {
		return fmt.Errorf("link %q is missing", DefaultLink)
	}
	for name, l := range c.Links {
		if name == "" {
			return errors.New("a link has an empty name")
		}
		if l.Capacity < 0 || l.QueueSize < 0 {
			return fmt.Errorf("link %q: negative capacity or queue_size", name)
		}
		if err := l.Emulation.Validate(); err != nil {
			return fmt.Errorf("link %q: %w", name, err)
		}
		if l.MaxActiveStatements < 0 || l.MaxActiveStatements > MaxActiveStatements {
			return fmt.Errorf("link %q: max_active_statements %d is outside [0, %d]", name, l.MaxActiveStatements, MaxActiveStatements)
		}
	}
	for name, r := range c.Rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("except rule %q: %w", name, err)
		}
	}
	for name, p := range c.Pools {
		if p.Weight < 1 || p.Weight > link.MaxWeight {
			return fmt.Errorf("resource pool %q: weight %d is outside [1, %d]", name, p.Weight, link.MaxWeight)
		}
		for _, r := range p.ExceptRules {
			if c.Rules[r] == nil {
				return fmt.Errorf("resource pool %q: except rule %q does not exist", name, r)
			}
		}
		if err := p.Emulation.Validate(); err != nil {
			return fmt.Errorf("resource pool %q: %w", name, err)
		}
		if p.ActiveStatements < 0 || p.ActiveStatements > MaxActiveStatements || p.QueueTimeout < 0 {
			return fmt.Errorf("resource pool %q: active_statements %d or queue_timeout %v out of range", name, p.ActiveStatements, p.QueueTimeout)
		}
		if p.IdleInTransaction < 0 {
			return fmt.Errorf("resource pool %q: idle_in_transaction %v out of range", name, p.IdleInTransaction)
		}
	}
	for name, u := range c.Users {
		if u.Pool != "" && c.Pools[u.Pool] == nil {
			return fmt.Errorf("user %q: resource pool %q does not exist", name, u.Pool)
		}
	}
	s := c.Settings
	if s.ExceptCheckPeriod <= 0 || s.LowPriorityBandwidth < 0 || s.ClusterLowPriorityBandwidth < 0 || s.LowPriorityQueueBytes == 0 || s.LowPriorityQueueBytes < -1 || s.LowPriorityYield < 1 || s.LowPriorityYield > 100 {
		return errors.New("settings out of range")
	}
	if _, err := distname.Parse(s.DistributedApplicationName); err != nil {
		return fmt.Errorf("setting distributed_application_name: %w", err)
	}
	return nil
}

func (r *Rule) validate() error {
	for _, t := range []struct {
		name string
		v    float64
	}{{"bandwidth", r.Bandwidth}, {"elapsedtime", r.ElapsedTime}} {
		if t.v != Unlimited && !(t.v >= 0) {
			return fmt.Errorf("%s %v: want -1 or a number >= 0", t.name, t.v)
		}
	}
	if !(r.BlockTime >= 0) || math.IsInf(r.BlockTime, 0) {
		return fmt.Errorf("blocktime %v: want -1 or a number > 0", r.BlockTime)
	}
	if !r.HasThreshold() {
		return errors.New("no threshold: set bandwidth, elapsedtime or blocktime")
	}
	if r.Queued() && (r.Bandwidth != Unlimited || r.ElapsedTime != Unlimited) {
		return errors.New(errBlockTimeAlone)
	}
	if r.Action != Abort && r.Action != Penalty {
		return fmt.Errorf("action %q: want abort or penalty", r.Action)
	}
	return nil
}

// Validate checks that the options make valid netem parameters.
func (e Emulation) Validate() error {
	return e.Params().Validate()
}

// errBlockTimeAlone says why blocktime takes no other threshold.
const errBlockTimeAlone = "blocktime applies while a statement waits for admission, bandwidth and elapsedtime while it runs: a rule with blocktime sets neither"

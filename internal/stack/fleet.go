package stack

// This file wires the fleet: the Cluster the console and the HTTP API
// answer SHOW INSTANCES and the cluster-wide views with, and, with an
// etcd client, the instance's membership under a lease.

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/fleet"
)

// catalogState is what the instance's record says of its catalog: the
// revision it applies and since when its store is unreachable (zero
// while it is reachable): the workload manager's catalog service.
type catalogState interface {
	AppliedRevision() uint64
	StaleSince() time.Time
}

// identity is the instance's name and advertised addresses, set once
// the consoles are bound.
type identity struct {
	mu        sync.Mutex
	name      string // guarded by mu; "" until set
	adminAddr string // guarded by mu
	httpAddr  string // guarded by mu
}

// newCluster makes the stack's fleet.Cluster, before the consoles that
// answer from it are made. Its record reads the identity, which
// setIdentity fills in once they are bound.
func (s *Stack) newCluster(o Options) error {
	tok := s.cfg.Fleet.Token
	if tok == "" {
		tok = s.cfg.HTTP.Token
	}
	c, err := fleet.NewCluster(fleet.ClusterOptions{
		Self: s.member, Local: s.mgr.Views(), Token: tok, Timeout: s.cfg.Fleet.Timeout,
		Clock: s.clk, Logger: s.log.With("component", "fleet"),
	})
	if err != nil {
		return err
	}
	s.cluster, s.version = c, o.Version
	if s.version == "" {
		s.version = "dev"
	}
	return nil
}

// setIdentity names the instance (instance_name, else the host name
// and the admin console's port, else the HTTP API's) and records the
// consoles' addresses as the others reach them.
func (s *Stack) setIdentity() {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	advertise := func(a net.Addr) string {
		if a == nil {
			return ""
		}
		h, p, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			h = host
		}
		return net.JoinHostPort(h, p)
	}
	name := s.cfg.Fleet.Name
	if name == "" {
		name = host
		for _, a := range []net.Addr{s.adminAddr, s.httpAddr} {
			if ta, ok := a.(*net.TCPAddr); ok {
				name = host + ":" + strconv.Itoa(ta.Port)
				break
			}
		}
	}
	s.id.mu.Lock()
	s.id.name, s.id.adminAddr, s.id.httpAddr = name, advertise(s.adminAddr), advertise(s.httpAddr)
	s.id.mu.Unlock()
}

// member is the instance's record as of now.
func (s *Stack) member() fleet.Member {
	s.id.mu.Lock()
	m := fleet.Member{Name: s.id.name, Version: s.version, AdminAddr: s.id.adminAddr, HTTPAddr: s.id.httpAddr, StartedAt: s.started}
	s.id.mu.Unlock()
	if s.srv == nil {
		return m
	}
	for _, r := range s.srv.Routes() {
		m.Routes = append(m.Routes, fleet.Route{Name: r.Name, Listen: r.Listen, Protocol: r.Protocol})
	}
	// By name, so that an unchanged set of routes is an unchanged record.
	sort.Slice(m.Routes, func(i, j int) bool { return m.Routes[i].Name < m.Routes[j].Name })
	var cs catalogState = s.mgr.Service()
	m.Revision = cs.AppliedRevision()
	if t := cs.StaleSince(); !t.IsZero() {
		m.StaleSince = &t
	}
	return m
}

// startMembership registers the instance in the fleet of the etcd
// catalog (the stack's one client, under the catalog's prefix) and
// keeps it registered until the stack closes; with a file or in-memory
// catalog it does nothing (the cluster is this instance alone). A name
// a live instance holds is refused.
func (s *Stack) startMembership(ctx context.Context) error {
	if s.etcd == nil || s.cfg.Etcd == nil {
		return nil
	}
	m, err := fleet.Join(ctx, fleet.Options{
		Client: s.etcd, Etcd: *s.cfg.Etcd, Self: s.member, TTL: s.cfg.Fleet.TTL,
		Clock: s.clk, Logger: s.log.With("component", "fleet"),
	})
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	s.members = m
	s.cluster.SetMembers(m)
	s.goRun("fleet membership", func() error { return m.Run(s.lctx) }, context.Canceled)
	return nil
}

// Lease is the lease the instance's membership record lives under, for
// the keys other loops put under it (they vanish with the instance); 0
// without etcd, or while the instance registers again after losing its
// lease.
func (s *Stack) Lease() clientv3.LeaseID {
	if s.members == nil {
		return 0
	}
	return s.members.Lease()
}

// Cluster answers SHOW INSTANCES and the cluster-wide views.
func (s *Stack) Cluster() *fleet.Cluster { return s.cluster }

// Name is the instance's name in the fleet (instance_name, else the
// host name and the admin console's port), set by New.
func (s *Stack) Name() string {
	s.id.mu.Lock()
	defer s.id.mu.Unlock()
	return s.id.name
}

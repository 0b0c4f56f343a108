package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/netlab"
	"github.com/sluicelab/sluice/internal/stack"
)

// clusterNodeNames are the cluster's namespaces, coordinator first.
func clusterNodeNames() []string { return []string{"coord", "dn1", "dn2", "dn3"} }

// clusterPort is the port every node's sluice listens on, at its node's
// address.
const clusterPort = 6432

// clusterNet is the cluster's network: a namespace per node, each
// joined to a router namespace by a veth pair, and a tbf queue on the
// router's port toward the coordinator, which every data node's answers
// cross together (an incast).
type clusterNet struct {
	tbfNet
	router *netlab.Namespace
	// nodes are the nodes' namespaces and links their links to the
	// router (A the router's end, B the node's), coordinator first.
	nodes []*netlab.Namespace
	links []*netlab.Link
}

// newClusterNet builds the network; on error it removes what it made.
func newClusterNet(ctx context.Context, rate int64, queue time.Duration) (*clusterNet, error) {
	n := &clusterNet{tbfNet: tbfNet{rate: rate, queue: queue}}
	err := n.build(ctx, func(tb *netlab.Testbed) (_ netlab.End, err error) {
		if n.router, err = tb.Router(ctx, "router"); err != nil {
			return netlab.End{}, err
		}
		for _, name := range clusterNodeNames() {
			ns, err := tb.Namespace(ctx, name)
			if err != nil {
				return netlab.End{}, err
			}
			l, err := tb.Connect(ctx, n.router, ns)
			if err != nil {
				return netlab.End{}, err
			}
			if err := ns.Route(ctx, netlab.Range, l.A.Addr); err != nil {
				return netlab.End{}, err
			}
			n.nodes, n.links = append(n.nodes, ns), append(n.links, l)
		}
		return n.links[0].A, nil
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// addr is node i's sluice's address.
func (n *clusterNet) addr(i int) string {
	return netip.AddrPortFrom(n.links[i].B.Addr, clusterPort).String()
}

// describe says what the network is.
func (n *clusterNet) describe() string {
	var nodes []string
	for i, ns := range n.nodes {
		nodes = append(nodes, fmt.Sprintf("%s (%v)", ns.Name, n.links[i].B.Addr))
	}
	return fmt.Sprintf("namespaces %s, each joined by a veth pair to the router namespace %s; "+
		"the router's port toward the coordinator sends through tbf at %s with a %v queue",
		strings.Join(nodes, ", "), n.router.Name, formatBits(n.rate), n.queue)
}

// start returns how to start node i's server: inside its namespace.
func (n *clusterNet) start(i int) func(*exec.Cmd) error { return n.nodes[i].Start }

// clusterFleet is one sluice per node, in this process, on one catalog
// in etcd: a statement run on any applies on every one.
type clusterFleet struct {
	clk    clock.Clock
	etcd   etcd.Config // the run's own prefix
	sluice []*sluice   // coordinator first
}

// newClusterFleet starts a sluice per node with the catalog under a
// prefix of its own below base's, each listening inside its node's
// namespace and fronting the node's server over its Unix socket.
func (r *kclusterRun) newClusterFleet(ctx context.Context, base etcd.Config) (_ *clusterFleet, err error) {
	tag := make([]byte, 6)
	if _, err := rand.Read(tag); err != nil {
		return nil, err
	}
	ec := base
	ec.Prefix = strings.TrimSuffix(base.Prefix, "/") + "/lab-" + hex.EncodeToString(tag)
	f := &clusterFleet{clk: r.clk, etcd: ec}
	defer func() {
		if err != nil {
			f.close(ctx)
		}
	}()
	for i, name := range clusterNodeNames() {
		cfg := &config.Config{Catalog: ec.String(), Etcd: &ec, Grace: time.Second, Fleet: config.Fleet{Name: name}}
		st, err := stack.New(ctx, stack.Options{Config: cfg, Clock: r.clk, Logger: r.log.With("instance", name)})
		if err != nil {
			return nil, fmt.Errorf("sluice on %s: %w", name, err)
		}
		s := wrapStack(st, r.log, r.db)
		f.sluice = append(f.sluice, s)
		ln, err := r.net.nodes[i].Listen(ctx, "tcp", r.net.addr(i))
		if err != nil {
			return nil, err
		}
		route := clusterCoord
		if i > 0 {
			route = fmt.Sprintf("cluster_dn%d", i)
		}
		if _, err := st.AddRoute(stack.Route{Route: config.Route{Name: route, Listen: r.net.addr(i), Upstream: r.nodes[i].Socket(), Protocol: protoPostgres},
			Listener: ln}); err != nil {
			ln.Close()
			return nil, fmt.Errorf("sluice on %s: %w", name, err)
		}
	}
	return f, nil
}

// exec runs console statements on the coordinator's sluice and waits
// until every sluice of the fleet has applied them.
func (f *clusterFleet) exec(ctx context.Context, stmts ...string) error {
	if err := f.sluice[0].exec(ctx, stmts...); err != nil {
		return err
	}
	want := f.sluice[0].st.Manager().Service().AppliedRevision()
	deadline := f.clk.Now().Add(10 * time.Second)
	for _, s := range f.sluice[1:] {
		for s.st.Manager().Service().AppliedRevision() < want {
			if f.clk.Now().After(deadline) {
				return fmt.Errorf("a sluice of the fleet did not apply catalog revision %d within 10 s", want)
			}
			if err := clock.Sleep(ctx, f.clk, 10*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// close stops the sluices and removes the run's keys from etcd.
func (f *clusterFleet) close(ctx context.Context) error {
	for _, s := range f.sluice {
		s.close()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cli, err := etcd.Dial(cctx, f.etcd)
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Delete(cctx, f.etcd.Prefix+"/", clientv3.WithPrefix())
	return err
}

// parseEtcd reads the lab's etcd option: endpoints separated by commas
// (host:port, or http:// URLs), or an etcd:// URL with a prefix.
func parseEtcd(s string) (etcd.Config, error) {
	if etcd.IsURL(s) {
		return etcd.ParseURL(s)
	}
	var eps []string
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(e), "http://"), "https://")
		if e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return etcd.Config{}, errors.New("no etcd endpoint")
	}
	return etcd.ParseURL(etcd.Scheme + strings.Join(eps, ",") + "/sluice-lab")
}

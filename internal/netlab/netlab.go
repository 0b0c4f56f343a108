package netlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Range is the address range every testbed takes its addresses from.
var Range = netip.MustParsePrefix("198.18.0.0/15")

// Testbed is a set of namespaces, links and queues; see the package
// documentation.
type Testbed struct {
	tag string // "slb<pid>": the prefix of every name

	mu     sync.Mutex // guards the fields below
	undo   []func(context.Context) error
	links  int // links made, for names and subnets
	closed bool
}

// New returns an empty testbed after removing what testbeds of dead
// processes left. It fails when ip or tc is missing or a namespace
// cannot be made (not root).
func New(ctx context.Context) (*Testbed, error) {
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("netlab: %s (iproute2) not found: %w", tool, err)
		}
	}
	t := &Testbed{tag: "slb" + strconv.Itoa(os.Getpid())}
	sweep(ctx)
	probe := t.tag + "-probe"
	if err := run(ctx, "ip", "netns", "add", probe); err != nil {
		return nil, fmt.Errorf("netlab: cannot make a network namespace (root needed): %w", err)
	}
	if err := run(ctx, "ip", "netns", "del", probe); err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	return t, nil
}

// sweep removes the namespaces of testbeds whose process is gone; a
// namespace's veth ends go with it.
func sweep(ctx context.Context) {
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		tag, _, ok := strings.Cut(name, "-")
		if !ok || !strings.HasPrefix(tag, "slb") {
			continue
		}
		pid, err := strconv.Atoi(tag[3:])
		if err != nil || pid == os.Getpid() || unix.Kill(pid, 0) == nil {
			continue
		}
		_ = run(ctx, "ip", "netns", "del", name)
	}
}

// record adds an undo step; the caller holds t.mu.
func (t *Testbed) recordLocked(f func(context.Context) error) { t.undo = append(t.undo, f) }

// Close removes everything the testbed made, newest first, and returns
// the first error; later calls return nil.
func (t *Testbed) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first error
	for i := len(t.undo) - 1; i >= 0; i-- {
		if err := t.undo[i](ctx); err != nil && first == nil {
			first = err
		}
	}
	t.undo = nil
	return first
}

var errClosed = errors.New("netlab: testbed closed")

// Namespace is a network namespace of a testbed.
type Namespace struct {
	Name string // as ip netns knows it
}

// Namespace makes a namespace with its loopback up. name is short (at
// most 8 bytes) and unique in the testbed.
func (t *Testbed) Namespace(ctx context.Context, name string) (*Namespace, error) {
	if len(name) == 0 || len(name) > 8 {
		return nil, fmt.Errorf("netlab: namespace name %q: 1 to 8 bytes", name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	ns := &Namespace{Name: t.tag + "-" + name}
	if err := run(ctx, "ip", "netns", "add", ns.Name); err != nil {
		return nil, err
	}
	t.recordLocked(func(ctx context.Context) error { return run(ctx, "ip", "netns", "del", ns.Name) })
	if err := run(ctx, "ip", "-n", ns.Name, "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	return ns, nil
}

// Router makes a namespace that forwards IPv4 between its links.
func (t *Testbed) Router(ctx context.Context, name string) (*Namespace, error) {
	ns, err := t.Namespace(ctx, name)
	if err != nil {
		return nil, err
	}
	return ns, ns.sysctl(ctx, "net.ipv4.ip_forward", "1")
}

func (n *Namespace) sysctl(ctx context.Context, key, value string) error {
	return run(ctx, "ip", "netns", "exec", n.Name, "sysctl", "-q", "-w", key+"="+value)
}

// End is one end of a link: its namespace, device and address.
type End struct {
	NS   *Namespace
	Dev  string
	Addr netip.Addr
}

// Link is a veth pair between two namespaces, on a /24 of its own.
type Link struct {
	A, B   End
	Subnet netip.Prefix
}

// Connect joins a and b with a veth pair: a gets .1 and b .2 of the
// link's /24 (198.18.k.0/24 for the testbed's k-th link), both up.
func (t *Testbed) Connect(ctx context.Context, a, b *Namespace) (*Link, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	k := t.links
	if k >= 512 {
		return nil, errors.New("netlab: more than 512 links")
	}
	t.links++
	base := Range.Addr().As4()
	base[1] += byte(k / 256)
	base[2] = byte(k % 256)
	subnet := netip.PrefixFrom(netip.AddrFrom4(base), 24)
	l := &Link{Subnet: subnet,
		A: End{NS: a, Dev: fmt.Sprintf("%s-%da", t.tag, k), Addr: subnet.Addr().Next()},
		B: End{NS: b, Dev: fmt.Sprintf("%s-%db", t.tag, k), Addr: subnet.Addr().Next().Next()}}
	if len(l.A.Dev) > 15 {
		return nil, fmt.Errorf("netlab: device name %q is too long", l.A.Dev)
	}
	if err := run(ctx, "ip", "link", "add", l.A.Dev, "netns", a.Name, "type", "veth", "peer", "name", l.B.Dev, "netns", b.Name); err != nil {
		return nil, err
	}
	t.recordLocked(func(ctx context.Context) error {
		// Gone already when its namespace went first.
		if run(ctx, "ip", "-n", a.Name, "link", "show", l.A.Dev) != nil {
			return nil
		}
		return run(ctx, "ip", "-n", a.Name, "link", "del", l.A.Dev)
	})
	for _, e := range []End{l.A, l.B} {
		if err := run(ctx, "ip", "-n", e.NS.Name, "addr", "add", netip.PrefixFrom(e.Addr, 24).String(), "dev", e.Dev); err != nil {
			return nil, err
		}
		if err := run(ctx, "ip", "-n", e.NS.Name, "link", "set", e.Dev, "up"); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Attach makes the namespace name and joins it to peer with Connect: the
// link's end A is in the new namespace, end B in peer.
func (t *Testbed) Attach(ctx context.Context, name string, peer *Namespace) (*Namespace, *Link, error) {
	ns, err := t.Namespace(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	l, err := t.Connect(ctx, ns, peer)
	if err != nil {
		return nil, nil, err
	}
	return ns, l, nil
}

// Route adds a route in n to dst through gateway via.
func (n *Namespace) Route(ctx context.Context, dst netip.Prefix, via netip.Addr) error {
	return run(ctx, "ip", "-n", n.Name, "route", "add", dst.String(), "via", via.String())
}

// Shape gives the egress of end e a rate (bytes per second) and a queue
// of the given delay at that rate: a tbf qdisc whose limit is
// rate × queue plus its burst. The burst is what the kernel needs to
// keep the rate at its timer's resolution (4 ms of the rate), at least
// 64 KiB so a segmentation-offloaded packet passes.
func (e End) Shape(ctx context.Context, rate int64, queue time.Duration) error {
	if rate <= 0 || queue <= 0 {
		return fmt.Errorf("netlab: shape %s: rate %d B/s and queue %v must be positive", e.Dev, rate, queue)
	}
	burst := max(rate*4/1000, 64<<10)
	limit := int64(float64(rate)*queue.Seconds()) + burst
	return run(ctx, "tc", "-n", e.NS.Name, "qdisc", "replace", "dev", e.Dev, "root", "tbf",
		"rate", strconv.FormatInt(rate*8, 10)+"bit", "burst", strconv.FormatInt(burst, 10), "limit", strconv.FormatInt(limit, 10))
}

// QdiscStats are a queue's counters since it was made.
type QdiscStats struct {
	Kind    string // "tbf", "noqueue", ...
	Bytes   int64  // bytes sent
	Packets int64
	Drops   int64
	Backlog int64 // bytes queued now
}

// Qdisc returns the counters of the root qdisc on e's device.
func (e End) Qdisc(ctx context.Context) (QdiscStats, error) {
	out, err := output(ctx, "tc", "-n", e.NS.Name, "-s", "-j", "qdisc", "show", "dev", e.Dev, "root")
	if err != nil {
		return QdiscStats{}, err
	}
	var qs []struct {
		Kind    string `json:"kind"`
		Bytes   int64  `json:"bytes"`
		Packets int64  `json:"packets"`
		Drops   int64  `json:"drops"`
		Backlog int64  `json:"backlog"`
	}
	if err := json.Unmarshal([]byte(out), &qs); err != nil || len(qs) == 0 {
		return QdiscStats{}, fmt.Errorf("netlab: tc qdisc show dev %s: %q: %v", e.Dev, out, err)
	}
	q := qs[0]
	return QdiscStats{Kind: q.Kind, Bytes: q.Bytes, Packets: q.Packets, Drops: q.Drops, Backlog: q.Backlog}, nil
}

// Command returns a command that runs name with args inside n.
func (n *Namespace) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Start starts cmd inside n: the process is forked from a thread that
// has joined n, so it begins in n with the credentials and attributes
// cmd carries (Command instead runs `ip netns exec`, which needs root
// in the child). The process stays in n; Wait for it as usual.
func (n *Namespace) Start(cmd *exec.Cmd) error { return n.Do(cmd.Start) }

// Do runs f on an OS thread that has joined n, so that the sockets f
// makes are n's; other goroutines are unaffected. The thread returns to
// this process's namespace afterwards, or is discarded if it cannot.
func (n *Namespace) Do(f func() error) error {
	target, err := os.Open("/run/netns/" + n.Name)
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: %w", err)
	}
	defer home.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: join %s: %w", n.Name, err)
	}
	ferr := f()
	if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, and ends with this goroutine.
		return errors.Join(ferr, fmt.Errorf("netlab: leave %s: %w", n.Name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Listen opens a listener inside n.
func (n *Namespace) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	return doMake(n, func() (net.Listener, error) { return (&net.ListenConfig{}).Listen(ctx, network, addr) })
}

// Dial connects from inside n.
func (n *Namespace) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	// The socket is made before DialContext returns, on this thread.
	return doMake(n, func() (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, network, addr) })
}

// doMake runs f inside n, as Do does, and returns what f made, also
// when leaving n then fails.
func doMake[T any](n *Namespace, f func() (T, error)) (T, error) {
	var v T
	err := n.Do(func() (err error) {
		v, err = f()
		return err
	})
	return v, err
}

func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

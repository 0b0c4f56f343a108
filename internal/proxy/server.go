package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/session"
)

// Options configure a Server.
type Options struct {
	Logger   *slog.Logger      // nil discards
	Clock    clock.Clock       // nil means clock.Real
	Registry *session.Registry // nil creates one
	// Policy binds sessions to pools, link classes, links and path
	// emulation. nil sends everything through one unlimited link at
	// normal priority with no emulation.
	Policy Policy
	// Loops is how many event loops relay the sessions that need no
	// pump of their own (see the package comment); 0 means one, a
	// negative number none (every session runs on its pumps).
	Loops int
	// Sockets, if not nil, is told which sockets each link direction
	// receives and sends on, for as long as it does: a network
	// controller watching the path on both sides (netctl.Watcher).
	Sockets SocketWatcher
	// FastPath, if not nil, relays in the kernel the PostgreSQL and MySQL sessions
	// of the first event loop whose bytes sluice need not touch (see
	// kernel.go); nil relays every byte in user space.
	FastPath KernelPath
}

// SocketWatcher watches the sockets of a link direction.
type SocketWatcher interface {
	// Attach watches recv and send, the sockets a flow of l's direction
	// dir reads its bytes from and writes them to, until detach is
	// called (more than once is harmless); either may be nil. class
	// tells, when asked from any goroutine, the class the flow's bytes
	// go at now.
	Attach(l *link.Link, dir link.Direction, recv, send rawconn.Controller, class func() link.Class) (detach func())
}

// Server runs routes. It is safe for concurrent use.
type Server struct {
	log     *slog.Logger
	clk     clock.Clock
	reg     *session.Registry
	policy  Policy
	sockets SocketWatcher // nil: none
	kernel  KernelPath    // nil: none
	unwatch func()        // ends the registry watch of the fast path (toUserSpace); nil without one

	kernelPaired  atomic.Uint64 // sessions paired in the kernel
	kernelResumes atomic.Uint64 // pairs resumed: the kernel relays
	kernelPauses  atomic.Uint64 // pairs paused: back to user space
	kernelBytes   atomic.Uint64 // bytes the kernel relayed (observed from its journal)

	linkOnce sync.Once
	link     *link.Link // used when a binding names none; see defaultLink

	parking parking // idle pumps give up their goroutines (park.go)
	loops   loops   // event loops (loop.go)

	mu       sync.Mutex
	routes   map[string]*listener        // guarded by mu
	conns    map[*relay]*listener        // guarded by mu; live sessions and the listener that accepted each
	bySess   map[*session.Session]*relay // guarded by mu; the live relays whose session is registered, by session
	late     map[string]*[2]dirLateness  // guarded by mu; by route name, then direction
	panics   map[string]uint64           // guarded by mu; recovered session panics by route name
	closing  bool                        // guarded by mu
	sessions sync.WaitGroup              // counts relays; Add under mu
}

// New returns a Server with no routes.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Registry == nil {
		o.Registry = session.NewRegistry(session.Options{})
	}
	if o.Policy == nil {
		o.Policy = staticPolicy{}
	}
	if o.Loops == 0 {
		o.Loops = 1
	}
	s := &Server{
		sockets: o.Sockets,
		kernel:  o.FastPath,
		log:     o.Logger,
		clk:     o.Clock,
		reg:     o.Registry,
		policy:  o.Policy,
		routes:  make(map[string]*listener),
		conns:   make(map[*relay]*listener),
		bySess:  make(map[*session.Session]*relay),
		late:    make(map[string]*[2]dirLateness),
		panics:  make(map[string]uint64),
	}
	s.loops.n = o.Loops
	if s.kernel != nil {
		s.unwatch = s.reg.Watch(session.WatcherFunc(s.toUserSpace))
	}
	return s
}

// defaultLink returns the unlimited link used by bindings without one.
func (s *Server) defaultLink() *link.Link {
	s.linkOnce.Do(func() { s.link = link.New("default", link.Config{}, s.clk) })
	return s.link
}

// Registry returns the session registry the server writes to.
func (s *Server) Registry() *session.Registry { return s.reg }

// listener is one bound route. route is replaced, never modified, by
// ReplaceRoute: a session keeps the *Route it was accepted with.
type listener struct {
	route    *Route // guarded by Server.mu
	ln       net.Listener
	done     chan struct{}  // closed when the accept loop has returned
	sessions sync.WaitGroup // the sessions this listener accepted; Add under Server.mu
}

// ErrClosed is returned by AddRoute after Shutdown or Close.
var ErrClosed = errors.New("proxy: server closed")

// AddRoute starts listening for r and returns the bound address (useful
// with port 0).
func (s *Server) AddRoute(r Route) (net.Addr, error) {
	if r.Name == "" {
		r.Name = r.Listen
	}
	if err := checkRoute(&r); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if _, dup := s.routes[r.Name]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("route %s: already exists", r.Name)
	}
	s.mu.Unlock()
	ln := r.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", r.Listen)
		if err != nil {
			return nil, fmt.Errorf("route %s: listen: %w", r.Name, err)
		}
	}
	// A TCP listener's connections are accepted with raw system calls:
	// through the net package, accepting and setting up each one wakes
	// the runtime's monitor thread of an idle process.
	if tl, ok := ln.(*net.TCPListener); ok {
		rl, err := rawconn.Listen(tl)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("route %s: listen: %w", r.Name, err)
		}
		ln = rl
	}
	l := &listener{route: &r, ln: ln, done: make(chan struct{})}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return nil, ErrClosed
	}
	if _, dup := s.routes[r.Name]; dup {
		s.mu.Unlock()
		ln.Close()
		return nil, fmt.Errorf("route %s: already exists", r.Name)
	}
	s.routes[r.Name] = l
	s.mu.Unlock()
	s.log.Info("route listening", "route", r.Name, "listen", ln.Addr().String(), "upstream", r.Upstream, "protocol", r.Protocol, "link", r.linkName())
	go s.accept(l)
	return ln.Addr(), nil
}

// Routes returns the routes being served.
func (s *Server) Routes() []Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Route, 0, len(s.routes))
	for _, l := range s.routes {
		r := *l.route
		r.Listen = l.ln.Addr().String()
		out = append(out, r)
	}
	return out
}

// RemoveRoute stops listening on the named route and closes its sessions.
func (s *Server) RemoveRoute(name string) error {
	s.mu.Lock()
	l, ok := s.routes[name]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("route %s: not found", name)
	}
	delete(s.routes, name)
	s.mu.Unlock()
	l.ln.Close()
	<-l.done
	s.abortSessionsOf(l)
	return nil
}

// abortSessionsOf ends every session that l accepted. l must already be
// out of s.routes with its accept loop ended, so that set only shrinks.
// It takes s.mu briefly.
func (s *Server) abortSessionsOf(l *listener) {
	s.mu.Lock()
	var victims []*relay
	for c, from := range s.conns {
		if from == l {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()
	for _, c := range victims {
		c.abort()
	}
}

// ReplaceRoute makes r the route named r.Name, on the socket the route
// already has: sessions accepted from now on use r (its upstream, front
// end, link name, timeouts); open sessions keep the route they were
// accepted with. r.Listen and r.Listener are ignored (to move a route to
// another address, DrainRoute it and AddRoute the new one). It fails for
// an unknown name, an unknown protocol or a missing front end.
func (s *Server) ReplaceRoute(r Route) error {
	if err := checkRoute(&r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.routes[r.Name]
	if !ok {
		return fmt.Errorf("route %s: not found", r.Name)
	}
	r.Listen, r.Listener = l.route.Listen, l.route.Listener
	l.route = &r
	s.log.Info("route replaced", "route", r.Name, "listen", l.ln.Addr().String(), "upstream", r.Upstream, "protocol", r.Protocol, "link", r.linkName())
	return nil
}

// DrainRoute stops accepting on the named route at once and forgets it
// (a route of the same name may be added right after), and lets the
// sessions it had accepted go on until they end or ctx ends; then it
// closes those left. It returns as soon as the listener is closed; the
// returned channel is closed once every one of those sessions has
// ended. Close and Shutdown end them too.
func (s *Server) DrainRoute(ctx context.Context, name string) (<-chan struct{}, error) {
	s.mu.Lock()
	l, ok := s.routes[name]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("route %s: not found", name)
	}
	delete(s.routes, name)
	s.mu.Unlock()
	l.ln.Close()
	<-l.done
	s.log.Info("route draining", "route", name)
	ended := make(chan struct{})
	go func() { l.sessions.Wait(); close(ended) }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ended:
			return
		case <-ctx.Done():
		}
		s.abortSessionsOf(l)
		<-ended
	}()
	return done, nil
}

// checkRoute refuses an unknown protocol and a protocol route without
// a front end.
func checkRoute(r *Route) error {
	switch r.Protocol {
	case "tcp", "postgres", "mysql":
	default:
		return fmt.Errorf("route %s: unknown protocol %q (want postgres, mysql or tcp)", r.Name, r.Protocol)
	}
	if r.Protocol != "tcp" && r.Frontend == nil {
		return fmt.Errorf("route %s: protocol %s needs a front end", r.Name, r.Protocol)
	}
	return nil
}

func (s *Server) accept(l *listener) {
	defer close(l.done)
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if !errors.Is(err, net.ErrClosed) {
				s.mu.Lock()
				name := l.route.Name
				s.mu.Unlock()
				s.log.Error("accept failed", "route", name, "err", err)
			}
			return
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			return
		}
		// Raw reads and writes from the first byte: through the net
		// package each one of the opening exchange would also wake the
		// runtime's monitor thread of an idle process. (A
		// rawconn.Listener's connections are wrapped already.)
		r := newRelay(s, l.route, rawconn.Wrap(c))
		s.conns[r] = l
		s.sessions.Add(1)
		l.sessions.Add(1)
		s.mu.Unlock()
		go r.serve(func() {
			r.mu.Lock()
			sess := r.sess
			r.mu.Unlock()
			s.mu.Lock()
			delete(s.conns, r)
			delete(s.bySess, sess)
			s.mu.Unlock()
			l.sessions.Done()
			s.sessions.Done()
		})
	}
}

// Shutdown stops accepting on every route, then waits for the sessions to
// finish until ctx is done, when it closes the rest and returns ctx.Err().
// Safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	ls := make([]*listener, 0, len(s.routes))
	for name, l := range s.routes {
		ls = append(ls, l)
		delete(s.routes, name)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.ln.Close()
		<-l.done
	}
	done := make(chan struct{})
	go func() { s.sessions.Wait(); close(done) }()
	select {
	case <-done:
		s.loops.stop()
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	victims := make([]*relay, 0, len(s.conns))
	for c := range s.conns {
		victims = append(victims, c)
	}
	s.mu.Unlock()
	for _, c := range victims {
		c.abort()
	}
	<-done
	s.loops.stop()
	return ctx.Err()
}

// Close closes every route and session at once. Safe to call twice.
func (s *Server) Close() error {
	if s.unwatch != nil {
		s.unwatch()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// dirLateness holds the release histograms of one direction of a route.
type dirLateness struct {
	precise, timed netem.Lateness
}

// lateness returns route's histograms for dir, made on first use. They
// outlive the route's sessions, and the route itself, so that counts
// never go back.
func (s *Server) lateness(route string, dir direction) *dirLateness {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.late[route]
	if l == nil {
		l = new([2]dirLateness)
		s.late[route] = l
	}
	return &l[dir]
}

// ReleaseLateness calls f with the histogram of how late the delay lines
// of each route, direction ("up": client to server, "down") and kind of
// wait ("precise" for a lone request or response, "timer" for the rest of
// a stream) have released, in the order of route names. See
// netem.Lateness.
func (s *Server) ReleaseLateness(f func(route, direction, wait string, h netem.LatenessSnapshot)) {
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.late))
	ls := make([]*[2]dirLateness, len(names))
	for i, n := range names {
		ls[i] = s.late[n]
	}
	s.mu.Unlock()
	for i, n := range names {
		for d := dirUp; d <= dirDown; d++ {
			f(n, d.String(), "precise", ls[i][d].precise.Snapshot())
			f(n, d.String(), "timer", ls[i][d].timed.Snapshot())
		}
	}
}

// countPanic counts a panic recovered in a session of route.
func (s *Server) countPanic(route string) {
	s.mu.Lock()
	s.panics[route]++
	s.mu.Unlock()
}

// SessionPanics returns, per route, how many sessions ended because one of
// their goroutines panicked. Counts outlive the route and never go back.
func (s *Server) SessionPanics() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.panics)
}

// FastPathEvents returns how many sessions the kernel fast path paired,
// and how many times pairs resumed (the kernel relays their bytes) and
// paused (back to user space).
func (s *Server) FastPathEvents() (paired, resumed, paused uint64) {
	return s.kernelPaired.Load(), s.kernelResumes.Load(), s.kernelPauses.Load()
}

// SyncRegistry returns once every byte the kernel fast path relayed
// before the call has been observed as the user-space path would have
// (the journal drained on its loop's runner), so that the session
// registry, and the views and metrics read from it, hold what a client
// has already received. It returns at once without a fast path or while no session
// is on the kernel's loop (each session's bytes are observed before it
// leaves the loop), and ctx's error if ctx ends first. Safe for
// concurrent use; it must not be called from the runner (an observer,
// a Policy method).
func (s *Server) SyncRegistry(ctx context.Context) error {
	l := s.loops.kernel.Load()
	if l == nil {
		return nil
	}
	c := make(chan struct{})
	l.mu.Lock()
	if !l.running {
		l.mu.Unlock()
		return nil
	}
	l.syncs = append(l.syncs, c)
	l.mu.Unlock()
	l.poll.Wake()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("read the kernel fast path's journal: %w", ctx.Err())
	}
}

// FastPathBytes returns how many bytes the kernel fast path relayed.
func (s *Server) FastPathBytes() uint64 { return s.kernelBytes.Load() }

// LoopSessions returns how many sessions the server's event loops have
// relayed so far, and how many of those they handed to their pumps
// (emulation, a link that makes bytes wait, an admission wait, a
// terminate or a failure) before the sessions ended.
func (s *Server) LoopSessions() (taken, handed uint64) {
	return s.loops.taken.Load(), s.loops.handed.Load()
}

// UnsentBytes returns, per route, the bytes written to client sockets that
// the kernel has not sent yet (TCP_INFO notsent), summed over the live
// sessions.
func (s *Server) UnsentBytes() map[string]int64 {
	s.mu.Lock()
	rs := make([]*relay, 0, len(s.conns))
	for r := range s.conns {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	out := make(map[string]int64)
	for _, r := range rs {
		n, err := r.unsent()
		if err == nil {
			out[r.route.Name] += int64(n)
		}
	}
	return out
}

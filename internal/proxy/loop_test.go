package proxy

// This file tests the event loop: which sessions it takes, byte
// exactness and half-close on it, and each way a session leaves it for
// its pumps.

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wlm"
)

// echoServer serves an echo upstream that half-closes after the client's
// end of stream, for any number of connections.
func echoServer(t *testing.T) string {
	return testenv.Serve(t, func(c net.Conn) {
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	})
}

// loopProxy starts a server with a tcp route named echo to upstream under
// policy (nil: none) and frontend (nil: none).
func loopProxy(t *testing.T, upstream string, policy Policy, frontend Frontend) (*Server, string) {
	t.Helper()
	srv := newTestServer(t, Options{Policy: policy})
	return srv, addTestRoute(t, srv, Route{Name: "echo", Upstream: upstream, DialTimeout: 2 * time.Second, Frontend: frontend})
}

// echoExact writes n random bytes on c while reading the echo, then
// half-closes c and reads to the end of the stream: the echo must be the
// bytes sent, whole and in order, followed by the server's half-close.
func echoExact(t *testing.T, c net.Conn, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	sent := make([]byte, n)
	for i := range sent {
		sent[i] = byte(rng.Uint32())
	}
	c.SetDeadline(clock.SocketDeadline(60 * time.Second))
	errc := make(chan error, 1)
	go func() {
		for off := 0; off < n; {
			k := min(n-off, 1+rng.IntN(200_000))
			if _, err := c.Write(sent[off : off+k]); err != nil {
				errc <- err
				return
			}
			off += k
		}
		errc <- c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if werr := <-errc; werr != nil {
		t.Fatalf("write: %v", werr)
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("echo of %d bytes came back as %d bytes, equal prefix %d", n, len(got), commonPrefix(got, sent))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestLoopRelaysExactly relays several sessions at once on the loop, each
// echoing 8 MiB (2 MiB with -short) written in random pieces (so the
// loop's writes fill the kernel's buffers and its reads pause), and checks
// every byte and the half-close both ways. None of them leaves the loop.
func TestLoopRelaysExactly(t *testing.T) {
	const sessions = 6
	size := 8 << 20
	if testing.Short() {
		size = 2 << 20
	}
	srv, addr := loopProxy(t, echoServer(t), nil, nil)
	var wg sync.WaitGroup
	for i := range sessions {
		c := testenv.Dial(t, addr)
		wg.Go(func() { echoExact(t, c, size, uint64(i)) })
	}
	wg.Wait()
	waitNoSessions(t, srv)
	if taken, handed := srv.LoopSessions(); taken != sessions || handed != 0 {
		t.Fatalf("loop took %d sessions and handed %d to pumps; want %d and 0", taken, handed, sessions)
	}
}

// TestLoopHoldsNoGoroutinePerSession: sessions on the loop, busy or idle,
// add no goroutine each (the pumps would add one to two per session).
func TestLoopHoldsNoGoroutinePerSession(t *testing.T) {
	const sessions = 50
	srv, addr := loopProxy(t, echoServer(t), nil, nil)
	warm := testenv.Dial(t, addr)
	ping(t, warm)
	g0 := runtime.NumGoroutine()
	for range sessions {
		ping(t, testenv.Dial(t, addr))
	}
	// The echo server holds one goroutine per connection; the proxy none.
	if n := runtime.NumGoroutine(); n > g0+sessions+5 {
		t.Fatalf("%d goroutines with %d more sessions, %d before", n, sessions, g0)
	}
	if taken, _ := srv.LoopSessions(); taken != sessions+1 {
		t.Fatalf("loop took %d sessions, want %d", taken, sessions+1)
	}
	if _, ok := srv.UnsentBytes()["echo"]; !ok {
		t.Fatal("no unsent-bytes figure for sessions on the loop")
	}
}

// TestLoopRelaysWithoutAllocating: a request and its answer relayed on
// the loop allocate nothing, counted over the whole process (the loop's
// goroutine included) and averaged over many round trips.
func TestLoopRelaysWithoutAllocating(t *testing.T) {
	up := testenv.Serve(t, testenv.EchoMessages(64))
	srv, addr := loopProxy(t, up, nil, nil)
	c := testenv.Dial(t, addr)
	c.SetDeadline(clock.SocketDeadline(60 * time.Second))
	msg, got := make([]byte, 64), make([]byte, 64)
	var err error
	n := testing.AllocsPerRun(500, func() {
		if _, err = c.Write(msg); err == nil {
			_, err = io.ReadFull(c, got)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if taken, handed := srv.LoopSessions(); taken != 1 || handed != 0 {
		t.Fatalf("loop took %d sessions and handed %d; want 1 and 0", taken, handed)
	}
	if n != 0 {
		t.Fatalf("%v allocations per round trip on the loop", n)
	}
}

// switchPolicy binds with no emulation until set, then with params, and
// moves its version when set.
type switchPolicy struct {
	v      atomic.Uint64
	params atomic.Pointer[netem.Params]
}

func (p *switchPolicy) Bind(route, user string) wlm.Binding {
	if e := p.params.Load(); e != nil {
		return wlm.Binding{Up: *e, Down: *e}
	}
	return wlm.Binding{}
}
func (p *switchPolicy) Version() uint64 { return p.v.Load() }
func (p *switchPolicy) set(e netem.Params) {
	p.params.Store(&e)
	p.v.Add(1)
}

// TestLoopHandsOverForEmulation: a session on the loop whose binding
// gains a delay goes to its pumps at its next chunk, and the delay then
// applies; no byte is lost on the way.
func TestLoopHandsOverForEmulation(t *testing.T) {
	const delay = 30 * time.Millisecond
	pol := new(switchPolicy)
	srv, addr := loopProxy(t, echoServer(t), pol, nil)
	c := testenv.Dial(t, addr)
	ping(t, c)
	if taken, handed := srv.LoopSessions(); taken != 1 || handed != 0 {
		t.Fatalf("before: loop took %d, handed %d", taken, handed)
	}
	pol.set(netem.Params{Delay: delay})
	start := time.Now()
	ping(t, c)
	if rtt := time.Since(start); rtt < 2*delay {
		t.Fatalf("round trip %v after the binding gained %v each way", rtt, delay)
	}
	if _, handed := srv.LoopSessions(); handed != 1 {
		t.Fatalf("loop handed %d sessions to pumps, want 1", handed)
	}
	echoExact(t, c, 2<<20, 3)
}

// onlyRelay returns srv's one relay.
func onlyRelay(t *testing.T, srv *Server) *relay {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.conns) != 1 {
		t.Fatalf("%d sessions, want 1", len(srv.conns))
	}
	for r := range srv.conns {
		return r
	}
	return nil
}

// relayConns returns the connections r and its relaying hold.
func relayConns(r *relay) []net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.pumps[0].rs
	return []net.Conn{r.client, r.upstream, rs.c.Client, rs.c.Upstream}
}

// TestLoopKeepsNoRuntimeConn: while a session is on the loop it keeps
// none of the runtime's connections that Detach closed (an idle session
// costs less); handed to its pumps, it holds live ones again and relays
// through them.
func TestLoopKeepsNoRuntimeConn(t *testing.T) {
	pol := new(switchPolicy)
	srv, addr := loopProxy(t, echoServer(t), pol, nil)
	c := testenv.Dial(t, addr)
	ping(t, c)
	r := onlyRelay(t, srv)
	for i, hc := range relayConns(r) {
		if _, ok := hc.(detachedConn); !ok {
			t.Errorf("on the loop, connection %d is a %T", i, hc)
		}
	}
	pol.set(netem.Params{Delay: time.Millisecond})
	ping(t, c)
	cs := relayConns(r)
	for i, hc := range cs {
		if _, ok := hc.(detachedConn); ok {
			t.Errorf("on the pumps, connection %d is still detached", i)
		}
	}
	if _, ok := cs[0].(detachedConn); ok || cs[0] != cs[2] {
		t.Errorf("the client socket given back %v is not the session's %v", cs[0], cs[2])
	}
	echoExact(t, c, 1<<20, 5)
}

// TestLoopTakesNoEmulatedSession: a session whose binding carries
// emulation from the start never goes on the loop.
func TestLoopTakesNoEmulatedSession(t *testing.T) {
	pol := new(switchPolicy)
	pol.set(netem.Params{Delay: time.Millisecond})
	srv, addr := loopProxy(t, echoServer(t), pol, nil)
	ping(t, testenv.Dial(t, addr))
	if taken, _ := srv.LoopSessions(); taken != 0 {
		t.Fatalf("loop took %d emulated sessions", taken)
	}
}

// holdAdmitter admits at once until hold, then makes every statement
// wait until release.
type holdAdmitter struct {
	held    atomic.Bool
	waiting chan struct{} // a statement waits (buffer of one)
	release chan struct{} // closed to admit the waiters
}

func (a *holdAdmitter) TryAdmit(*session.Statement) (func(), bool) {
	return func() {}, !a.held.Load()
}

func (a *holdAdmitter) Admit(ctx context.Context, _ *session.Statement) (func(), error) {
	if !a.held.Load() {
		return func() {}, nil
	}
	select {
	case a.waiting <- struct{}{}:
	default:
	}
	select {
	case <-a.release:
		return func() {}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// gateRewriter asks its gate to admit each chunk that begins with 'W'
// before it goes on, as the protocols' admission rewriters do at the
// first statement of a transaction.
type gateRewriter struct{ g *wire.Gate }

func (r gateRewriter) Observe([]byte) error    { return nil }
func (r gateRewriter) SetPeer(client net.Conn) { r.g.SetPeer(client) }
func (r gateRewriter) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	if len(p) > 0 && p[0] == 'W' {
		if err := r.g.Wait(ctx, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// gateFrontend opens raw sessions whose client bytes pass a gateRewriter
// on a gate of adm.
type gateFrontend struct{ adm wire.Admitter }

func (f gateFrontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	c, err := openRaw(ctx, client, register, dial)
	if err != nil {
		return c, err
	}
	g := wire.NewGate(f.adm)
	g.SetPeer(client)
	c.Up, c.Close = gateRewriter{g}, g.Close
	return c, nil
}

// TestLoopYieldsForAdmission: a statement that must wait for admission
// takes its session off the loop without stopping the loop. While it
// waits, another session on the same loop goes on; once admitted, its
// bytes go through, in order, and the session carries on on its pumps.
func TestLoopYieldsForAdmission(t *testing.T) {
	adm := &holdAdmitter{waiting: make(chan struct{}, 1), release: make(chan struct{})}
	srv, addr := loopProxy(t, echoServer(t), nil, gateFrontend{adm})
	a, b := testenv.Dial(t, addr), testenv.Dial(t, addr)
	ping(t, a)
	ping(t, b)
	if _, err := a.Write([]byte("Wone")); err != nil { // admitted at once: stays on the loop
		t.Fatal(err)
	}
	readExactly(t, a, "Wone")
	if _, handed := srv.LoopSessions(); handed != 0 {
		t.Fatalf("a statement admitted at once handed %d sessions to pumps", handed)
	}
	adm.held.Store(true)
	if _, err := a.Write([]byte("Wtwo")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-adm.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the statement never waited")
	}
	for range 20 {
		ping(t, b) // the loop still relays b
	}
	if _, err := a.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	close(adm.release)
	readExactly(t, a, "Wtwoafter")
	if _, handed := srv.LoopSessions(); handed != 1 {
		t.Fatalf("loop handed %d sessions to pumps, want 1", handed)
	}
	echoExact(t, a, 1<<20, 5)
	echoExact(t, b, 1<<20, 6)
}

// readExactly reads len(want) bytes from c within 10 s and compares them.
func readExactly(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// TestLoopTerminate: an administrator's terminate ends a session on the
// loop as it ends one on pumps: the client's socket closes.
func TestLoopTerminate(t *testing.T) {
	srv, addr := loopProxy(t, echoServer(t), nil, nil)
	c := testenv.Dial(t, addr)
	ping(t, c)
	ss := srv.Registry().Sessions()
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	ss[0].Terminate()
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after terminate", n)
	}
	waitNoSessions(t, srv)
}

// watchRecorder is a SocketWatcher that keeps the sockets attached now.
type watchRecorder struct {
	mu   sync.Mutex
	n    int
	live map[int][2]rawconn.Controller // recv, send
}

func (w *watchRecorder) Attach(_ *link.Link, _ link.Direction, recv, send rawconn.Controller, _ func() link.Class) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	id := w.n
	w.live[id] = [2]rawconn.Controller{recv, send}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.live, id)
	}
}

// TestLoopSocketsWatched: a session on the loop relays on descriptors of
// its own; the socket watcher is told them, so that what it reads is the
// session's sockets, not the closed ones the pumps had.
func TestLoopSocketsWatched(t *testing.T) {
	rec := &watchRecorder{live: map[int][2]rawconn.Controller{}}
	srv := newTestServer(t, Options{Sockets: rec})
	addr := addTestRoute(t, srv, Route{Name: "echo", Upstream: echoServer(t), DialTimeout: 2 * time.Second})
	ping(t, testenv.Dial(t, addr))
	if taken, _ := srv.LoopSessions(); taken != 1 {
		t.Fatalf("loop took %d sessions, want 1", taken)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.live) != 2 {
		t.Fatalf("%d flows watched, want the session's 2", len(rec.live))
	}
	for _, socks := range rec.live {
		for i, rc := range socks {
			if rc == nil {
				t.Fatalf("socket %d of a flow not watched", i)
			}
			var info unix.TCPInfo
			var err error
			if cerr := rc.Control(func(fd uintptr) { err = rawconn.TCPInfo(fd, &info) }); cerr != nil || err != nil {
				t.Errorf("watched socket %d: %v, %v", i, cerr, err)
			}
		}
	}
}

package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
)

// testInjector is a wire.Injector with a queue the test fills.
type testInjector struct {
	mu   sync.Mutex
	q    [][]byte // guarded by mu
	wake func()
}

func (j *testInjector) SetWake(w func()) { j.wake = w }

func (j *testInjector) Pending() []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.q) == 0 {
		return nil
	}
	b := j.q[0]
	j.q = j.q[1:]
	return b
}

// send queues b for the client and wakes the down pump.
func (j *testInjector) send(b []byte) {
	j.mu.Lock()
	j.q = append(j.q, b)
	j.mu.Unlock()
	j.wake()
}

// dropBang is a client observer that drops each '!' and answers it
// itself with "<answer>" through the injector, as a refused statement is
// answered.
type dropBang struct {
	inj *testInjector
	out []byte
}

func (dropBang) Observe([]byte) error { return nil }

func (d *dropBang) Rewrite(_ context.Context, p []byte) ([]byte, error) {
	d.out = d.out[:0]
	for _, c := range p {
		if c == '!' {
			d.inj.send([]byte("<answer>"))
			continue
		}
		d.out = append(d.out, c)
	}
	return d.out, nil
}

// injectFrontend opens raw sessions with a testInjector and a dropBang
// client observer; the last injector opened is on injectors.
type injectFrontend struct{ injectors chan *testInjector }

func (f injectFrontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	c, err := openRaw(ctx, client, register, dial)
	if err != nil {
		return c, err
	}
	inj := &testInjector{}
	f.injectors <- inj
	c.Up, c.Inject = &dropBang{inj: inj}, inj
	return c, nil
}

// injectProxy starts a server whose sweeper runs on a fake clock, with a
// route to an echo upstream through injectFrontend.
func injectProxy(t *testing.T) (*Server, *clock.Fake, net.Conn, *testInjector) {
	t.Helper()
	fake := clock.NewFake(time.Unix(0, 0))
	up := echoUpstream(t)
	srv := newTestServer(t, Options{})
	srv.parking.clk = fake
	fr := injectFrontend{injectors: make(chan *testInjector, 1)}
	c := testenv.Dial(t, addTestRoute(t, srv, Route{Name: "inject", Upstream: up, Frontend: fr}))
	return srv, fake, c, <-fr.injectors
}

// expect reads len(want) bytes from c and compares them.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte(want)) {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// TestInjectThroughDownPump: a front end's own answer reaches the client
// through the down pump, in order with the server's bytes, whether the
// down pump waits in a read, is parked, or the answer is asked for from
// the up pump's goroutine; the session goes on.
func TestInjectThroughDownPump(t *testing.T) {
	srv, fake, c, inj := injectProxy(t)
	write := func(s string) {
		t.Helper()
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	expect(t, c, "a")
	// From the up pump's goroutine, the down pump waiting in its read.
	write("!")
	expect(t, c, "<answer>")
	// The answer goes when asked, the echoes when the server sends them:
	// in any order, but each whole.
	write("b!c")
	c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	got := make([]byte, len("b<answer>c"))
	if _, err := io.ReadFull(c, got); err != nil || string(bytes.Replace(got, []byte("<answer>"), nil, 1)) != "bc" {
		t.Fatalf("read %q, %v; want b, c and <answer> whole", got, err)
	}
	// Parked: the wake-up resumes the down pump.
	sweepUntilParked(t, srv, fake, 2)
	inj.send([]byte("<parked>"))
	expect(t, c, "<parked>")
	write("d")
	expect(t, c, "d")
	// Several wake-ups before the pump runs coalesce; every answer goes.
	sweepUntilParked(t, srv, fake, 2)
	inj.send([]byte("1"))
	inj.send([]byte("2"))
	inj.send([]byte("3"))
	expect(t, c, "123")
	write("e")
	expect(t, c, "e")
	if n := srv.parking.parks.Load(); n < 4 {
		t.Fatalf("%d parks, want at least 4", n)
	}
	testenv.Eventually(t, 10*time.Second, "no read deadline left", func() bool {
		write("f")
		c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
		b := make([]byte, 1)
		_, err := io.ReadFull(c, b)
		return err == nil && b[0] == 'f'
	})
}

// waitRewriter blocks on each chunk until its context ends, as a client
// observer waiting for admission does.
type waitRewriter struct{ waiting chan struct{} }

func (waitRewriter) Observe([]byte) error { return nil }

func (w waitRewriter) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	w.waiting <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

type waitFrontend struct {
	waiting chan struct{}
	sess    chan *session.Session
}

func (f waitFrontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	c, err := openRaw(ctx, client, register, dial)
	if err != nil {
		return c, err
	}
	f.sess <- c.Session
	c.Up = waitRewriter{f.waiting}
	c.Terminated = func(session.EndReason) []byte { return []byte("terminated") }
	return c, nil
}

// TestRewriteWaitEndsWithSession: a client pump waiting in its rewriter
// (it does not read the client meanwhile) is released when the session
// ends another way: an administrator's terminate, or the server closing.
func TestRewriteWaitEndsWithSession(t *testing.T) {
	for _, how := range []string{"terminate", "server closes"} {
		t.Run(how, func(t *testing.T) {
			closeUp := make(chan struct{}) // closed once the client pump waits
			up := testenv.ServeOnce(t, func(c net.Conn) {
				if how == "server closes" {
					select {
					case <-closeUp:
					case <-t.Context().Done():
					}
					return
				}
				io.Copy(io.Discard, c)
			})
			srv := newTestServer(t, Options{})
			fr := waitFrontend{waiting: make(chan struct{}, 1), sess: make(chan *session.Session, 1)}
			c := testenv.Dial(t, addTestRoute(t, srv, Route{Name: "wait", Upstream: up, Frontend: fr}))
			s := <-fr.sess
			if _, err := c.Write([]byte("held")); err != nil {
				t.Fatal(err)
			}
			<-fr.waiting
			if how == "terminate" {
				s.Terminate()
			} else {
				close(closeUp)
			}
			c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
			b, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if how == "terminate" && string(b) != "terminated" {
				t.Fatalf("client read %q, want the terminate message", b)
			}
			testenv.Eventually(t, 10*time.Second, "the session to end", func() bool { return len(srv.Registry().Sessions()) == 0 })
		})
	}
}

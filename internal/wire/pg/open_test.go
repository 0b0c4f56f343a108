package pg

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
)

// openRig runs Open on one end of a pipe; the test plays the client on
// the other end and, through dial, the upstream.
type openRig struct {
	reg      *session.Registry
	client   net.Conn      // the test's end
	upstream chan net.Conn // the upstream's end of each dial
	done     chan openResult
}

type openResult struct {
	c   wire.Conn
	err error
}

func startOpen(t *testing.T, o Options, upstreamErr error) *openRig {
	t.Helper()
	r := &openRig{
		reg:      session.NewRegistry(session.Options{}),
		upstream: make(chan net.Conn, 1),
		done:     make(chan openResult, 1),
	}
	if o.Keys == nil {
		o.Keys = r.reg
	}
	f := New(o)
	cli, srv := net.Pipe()
	r.client = cli
	t.Cleanup(func() { cli.Close(); srv.Close() })
	register := func() *session.Session { return r.reg.Open(session.Info{Protocol: "postgres"}, time.Unix(0, 0)) }
	dial := func(ctx context.Context) (net.Conn, error) {
		if upstreamErr != nil {
			return nil, upstreamErr
		}
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		r.upstream <- b
		return a, nil
	}
	go func() {
		c, err := f.Open(context.Background(), srv, register, dial)
		r.done <- openResult{c, err}
	}()
	return r
}

// startup sends a StartupMessage with params, reads it on the upstream
// side and returns the wire.Conn Open made of the session.
func (r *openRig) startup(t *testing.T, params map[string]string) wire.Conn {
	t.Helper()
	startup := startupBytes(params)
	r.send(t, startup)
	up := <-r.upstream
	if _, err := io.ReadFull(up, make([]byte, len(startup))); err != nil {
		t.Fatal(err)
	}
	res := <-r.done
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.c
}

func (r *openRig) send(t *testing.T, b []byte) {
	t.Helper()
	go func() { _, _ = r.client.Write(b) }()
}

func (r *openRig) read(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r.client, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// readError reads one ErrorResponse from the client end.
func (r *openRig) readError(t *testing.T) pgproto3.ErrorResponse {
	t.Helper()
	hdr := r.read(t, 5)
	if hdr[0] != 'E' {
		t.Fatalf("got message %q, want an ErrorResponse", hdr[0])
	}
	n := int(hdr[1])<<24 | int(hdr[2])<<16 | int(hdr[3])<<8 | int(hdr[4])
	var e pgproto3.ErrorResponse
	if err := e.Decode(r.read(t, n-4)); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestOpenNegotiatesAndForwardsStartup(t *testing.T) {
	r := startOpen(t, Options{Upstream: "db:5432"}, nil)
	r.send(t, sslRequestPacket)
	if b := r.read(t, 1); b[0] != 'N' {
		t.Fatalf("SSLRequest answered %q", b)
	}
	r.send(t, []byte{0, 0, 0, 8, 4, 210, 22, 48})
	if b := r.read(t, 1); b[0] != 'N' {
		t.Fatalf("GSSENCRequest answered %q", b)
	}
	startup := startupBytes(map[string]string{"user": "alice", "application_name": "app"})
	r.send(t, startup)
	up := <-r.upstream
	got := make([]byte, len(startup))
	if _, err := io.ReadFull(up, got); err != nil || !bytes.Equal(got, startup) {
		t.Fatalf("upstream got %q, %v", got, err)
	}
	res := <-r.done
	if res.err != nil {
		t.Fatal(res.err)
	}
	s := res.c.Session
	if s.User() != "alice" || s.Database() != "alice" || s.Application() != "app" {
		t.Errorf("identity %q %q %q", s.User(), s.Database(), s.Application())
	}
	if res.c.Up == nil || res.c.Down == nil || res.c.Client == nil || res.c.Upstream == nil {
		t.Errorf("incomplete conn %+v", res.c)
	}
}

func TestOpenRejectsBadStartup(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", []byte{0, 0, 0, 4}, "invalid startup packet length 4"},
		{"long", []byte{0, 0, 0x27, 0x11}, "invalid startup packet length 10001"},
		{"protocol 2", []byte{0, 0, 0, 12, 0, 2, 0, 0, 'u', 0, 'x', 0}, "unsupported frontend protocol 2.0"},
		{"layout", []byte{0, 0, 0, 14, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'x'}, "invalid startup packet layout"},
		{"ssl length", []byte{0, 0, 0, 9, 4, 210, 22, 47, 0}, "must be 8 bytes"},
		{"cancel length", []byte{0, 0, 0, 12, 4, 210, 22, 46, 0, 0, 0, 1}, "invalid length 12 of CancelRequest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startOpen(t, Options{}, nil)
			r.send(t, tt.b)
			e := r.readError(t)
			if e.Severity != "FATAL" || e.Code != "08P01" || !strings.Contains(e.Message, tt.want) {
				t.Errorf("got %s %s %q, want FATAL 08P01 mentioning %q", e.Severity, e.Code, e.Message, tt.want)
			}
			if res := <-r.done; res.err == nil {
				t.Error("Open succeeded")
			}
			if n := len(r.reg.Sessions()); n != 0 {
				t.Errorf("%d sessions registered", n)
			}
		})
	}
}

func TestOpenUpstreamFailures(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	r := startOpen(t, Options{Upstream: "10.1.2.3:5432"}, refused)
	r.send(t, startupBytes(map[string]string{"user": "u"}))
	e := r.readError(t)
	if e.Code != "08006" || e.Message != "sluice: could not connect to upstream 10.1.2.3:5432: connection refused" {
		t.Errorf("got %s %q", e.Code, e.Message)
	}
	res := <-r.done
	if res.err == nil || !errors.Is(res.err, refused) {
		t.Errorf("err = %v", res.err)
	}
	if n := len(r.reg.Sessions()); n != 0 {
		t.Errorf("%d sessions left open", n)
	}

	// An upstream that refuses TLS when sluice requires it.
	r = startOpen(t, Options{Upstream: "db:5432", UpstreamTLS: &tls.Config{}}, nil)
	r.send(t, startupBytes(map[string]string{"user": "u"}))
	up := <-r.upstream
	req := make([]byte, 8)
	if _, err := io.ReadFull(up, req); err != nil || !bytes.Equal(req, sslRequestPacket) {
		t.Fatalf("upstream got %x, %v; want SSLRequest", req, err)
	}
	go func() { _, _ = up.Write([]byte{'N'}) }()
	e = r.readError(t)
	if e.Code != "08006" || !strings.Contains(e.Message, "upstream refused TLS") {
		t.Errorf("got %s %q", e.Code, e.Message)
	}
	<-r.done
}

func TestOpenCancelRequest(t *testing.T) {
	// Unknown key: handled, nothing answered.
	r := startOpen(t, Options{}, nil)
	r.send(t, []byte{0, 0, 0, 16, 4, 210, 22, 46, 0, 0, 0, 42, 1, 2, 3, 4})
	if res := <-r.done; !errors.Is(res.err, wire.ErrHandled) {
		t.Fatalf("err = %v, want ErrHandled", res.err)
	}

	// Known key: forwarded through the session's canceler.
	r = startOpen(t, Options{}, nil)
	s := r.reg.Open(session.Info{}, time.Unix(0, 0))
	key := []byte{0, 0, 0, 42, 1, 2, 3, 4}
	s.SetCancelKey(string(key))
	called := make(chan struct{}, 1)
	s.SetCanceler(cancelFunc(func(context.Context) error { called <- struct{}{}; return nil }))
	r.send(t, append([]byte{0, 0, 0, 16, 4, 210, 22, 46}, key...))
	if res := <-r.done; !errors.Is(res.err, wire.ErrHandled) {
		t.Fatalf("err = %v, want ErrHandled", res.err)
	}
	select {
	case <-called:
	default:
		t.Fatal("canceler not called")
	}
}

type cancelFunc func(context.Context) error

func (f cancelFunc) Cancel(ctx context.Context) error { return f(ctx) }

func TestOpenStartupTimeout(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	r := startOpen(t, Options{Clock: fake, StartupTimeout: 30 * time.Second}, nil)
	r.send(t, []byte{0, 0}) // half a length word, then silence
	fake.BlockUntil(1)
	fake.Advance(29 * time.Second)
	select {
	case res := <-r.done:
		t.Fatalf("Open returned early: %v", res.err)
	default:
	}
	fake.Advance(time.Second)
	if res := <-r.done; !errors.Is(res.err, errStartupTimeout) {
		t.Fatalf("err = %v, want the startup timeout", res.err)
	}
}

func TestCancelerSendsKeyUpstream(t *testing.T) {
	got := make(chan []byte, 1)
	addr := testenv.ServeOnce(t, func(c net.Conn) {
		b := make([]byte, 48)
		n, _ := io.ReadAtLeast(c, b, 16)
		got <- b[:n]
	})
	f := New(Options{Upstream: addr})
	key := append([]byte{0, 0, 1, 0}, bytes.Repeat([]byte{0xab}, 32)...) // protocol 3.2: 32-byte secret
	c := &canceler{f: f, key: key}
	if err := c.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, _ := (&pgproto3.CancelRequest{ProcessID: 256, SecretKey: key[4:]}).Encode(nil)
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("upstream got %x, want %x", b, want)
	}
}

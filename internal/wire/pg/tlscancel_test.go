package pg

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// firstBytes forwards connections to an upstream and records the first
// eight bytes each one sent, so a test can tell which connections began
// with an SSLRequest.
type firstBytes struct {
	addr string // where clients connect

	mu    sync.Mutex
	heads [][]byte // guarded by mu; one per connection, in accept order
}

func startFirstBytes(t *testing.T, upstream string) *firstBytes {
	t.Helper()
	fb := &firstBytes{}
	fb.addr = testenv.Serve(t, func(c net.Conn) { fb.forward(c, upstream) })
	return fb
}

func (fb *firstBytes) forward(c net.Conn, upstream string) {
	defer c.Close()
	head := make([]byte, 8)
	n, _ := io.ReadFull(c, head)
	fb.mu.Lock()
	fb.heads = append(fb.heads, head[:n])
	fb.mu.Unlock()
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := up.Write(head[:n]); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// plainConnections returns how many connections there were and the first
// bytes of those that did not begin with an SSLRequest.
func (fb *firstBytes) plainConnections() (int, [][]byte) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	var plain [][]byte
	for _, h := range fb.heads {
		if !bytes.Equal(h, sslRequestPacket) {
			plain = append(plain, h)
		}
	}
	return len(fb.heads), plain
}

// TestCancelUpstreamTLS cancels statements on a real PostgreSQL with TLS
// on, reached through a route with upstream TLS: the cancel connections
// negotiate TLS as libpq does (SSLRequest, handshake, CancelRequest
// inside TLS), and the statement ends with 57014.
func TestCancelUpstreamTLS(t *testing.T) {
	testenv.SkipShort(t, "starts a PostgreSQL of its own with TLS on")
	srv := testenv.StartTLSPostgres(t)
	db := dbAt(t, srv.URL)
	fb := startFirstBytes(t, srv.Addr)
	r := startRelay(t, fb.addr, Options{UpstreamTLS: &tls.Config{RootCAs: srv.Cert.Pool, ServerName: "127.0.0.1"}})
	conn := r.connect(t, db)
	if !testenv.ServerSSL(t, conn) {
		t.Fatal("upstream connection is plain; want a TLS upstream connection")
	}
	sess := sessionOf(t, r, conn.PgConn())

	cancelEachWay(t, r, db, conn, sess)
	// The session's own connection and two cancel connections, each
	// beginning with an SSLRequest.
	if n, plain := fb.plainConnections(); n != 3 || len(plain) != 0 {
		t.Errorf("%d upstream connections, these without an SSLRequest first: %x", n, plain)
	}
	r.checkOpenErrors(t)
}

// TestCancelUpstreamRefusesTLS: an upstream that answers 'N' to the
// cancel connection's SSLRequest gets no CancelRequest in the clear (the
// route requires TLS, as sslmode=require does), and the failure is
// logged at Warn naming the upstream.
func TestCancelUpstreamRefusesTLS(t *testing.T) {
	got := make(chan []byte, 1)
	addr := testenv.ServeOnce(t, func(c net.Conn) {
		head := make([]byte, 8)
		if _, err := io.ReadFull(c, head); err != nil || !bytes.Equal(head, sslRequestPacket) {
			got <- head
			return
		}
		if _, err := c.Write([]byte{'N'}); err != nil {
			return
		}
		_ = c.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
		rest, _ := io.ReadAll(c)
		got <- append(head, rest...)
	})
	var logBuf strings.Builder // forwardCancel logs on this goroutine
	reg := session.NewRegistry(session.Options{})
	f := New(Options{Upstream: addr, UpstreamTLS: &tls.Config{}, Keys: reg,
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	sess := reg.Open(session.Info{Protocol: "postgres"}, time.Unix(0, 0))
	key := []byte{0, 0, 0, 42, 1, 2, 3, 4}
	f.installKey(sess, key, nil, nil)
	f.forwardCancel(context.Background(), key)
	if b := <-got; !bytes.Equal(b, sslRequestPacket) {
		t.Errorf("upstream got %x, want only the SSLRequest", b)
	}
	out := logBuf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "upstream refused TLS") || !strings.Contains(out, addr) {
		t.Errorf("log %q: want a warning that the upstream refused TLS", out)
	}
}

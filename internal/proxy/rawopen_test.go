package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
)

// typeFrontend records the types of the sockets the opening exchange
// reads and writes: the accepted one and the dialed one.
type typeFrontend struct {
	mu    *sync.Mutex
	types map[string]string
}

func (f typeFrontend) Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	c, err := openRaw(ctx, client, register, dial)
	if err != nil {
		return c, err
	}
	f.mu.Lock()
	f.types["client"], f.types["upstream"] = fmt.Sprintf("%T", client), fmt.Sprintf("%T", c.Upstream)
	f.mu.Unlock()
	return c, nil
}

// TestOpeningSocketsAreRaw: the opening exchange gets the accepted and
// the dialed socket wrapped for raw reads and writes, Route.WrapClient
// and WrapUpstream get the sockets themselves, and bytes go through.
func TestOpeningSocketsAreRaw(t *testing.T) {
	up := testenv.ServeOnce(t, func(c net.Conn) { io.Copy(c, c) })
	f := typeFrontend{mu: new(sync.Mutex), types: map[string]string{}}
	record := func(name string) func(net.Conn) net.Conn {
		return func(c net.Conn) net.Conn {
			f.mu.Lock()
			f.types[name] = fmt.Sprintf("%T", c)
			f.mu.Unlock()
			return c
		}
	}
	srv := newTestServer(t, Options{Policy: delayPolicy{}})
	addr := addTestRoute(t, srv, Route{Name: "echo", Upstream: up, DialTimeout: 2 * time.Second,
		Frontend: f, WrapClient: record("wrap client"), WrapUpstream: record("wrap upstream")})
	ping(t, testenv.Dial(t, addr))
	f.mu.Lock()
	defer f.mu.Unlock()
	raw, sock := fmt.Sprintf("%T", &rawconn.Conn{}), fmt.Sprintf("%T", &rawconn.TCPSocket{})
	for name, want := range map[string]string{"client": raw, "upstream": raw, "wrap client": sock, "wrap upstream": sock} {
		if got := f.types[name]; got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}

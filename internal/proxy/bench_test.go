package proxy

import (
	"github.com/sluicelab/sluice/internal/testenv"
	"io"
	"net"
	"testing"

	"github.com/sluicelab/sluice/internal/session"
)

// benchRoute starts a server with a tcp route to upstream and returns a
// client connection through it.
func benchRoute(b *testing.B, upstream string) net.Conn {
	b.Helper()
	srv := New(Options{Logger: testLogger(b), Registry: session.NewRegistry(session.Options{})})
	b.Cleanup(func() { srv.Close() })
	addr, err := srv.AddRoute(Route{Name: "bench", Listen: "127.0.0.1:0", Upstream: upstream, Protocol: "tcp"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkRoutePingPong sends a 64-byte request through a route and
// waits for the upstream's 64-byte answer: one message each way per
// operation, the cost of a small transaction. The pumps allocate nothing
// per message.
func BenchmarkRoutePingPong(b *testing.B) {
	up := testenv.Serve(b, func(c net.Conn) {
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	c := benchRoute(b, up)
	msg := make([]byte, 64)
	got := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteBulk streams 32 KiB writes through a route to an upstream
// that discards them.
func BenchmarkRouteBulk(b *testing.B) {
	const chunk = 32 << 10
	up := testenv.Serve(b, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	c := benchRoute(b, up)
	msg := make([]byte, chunk)
	b.SetBytes(chunk)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
}

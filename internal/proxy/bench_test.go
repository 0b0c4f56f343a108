package proxy

import (
	"io"
	"net"
	"testing"

	"github.com/sluicelab/sluice/internal/testenv"
)

// benchRoute starts a server with a tcp route to upstream and returns a
// client connection through it. loops is Options.Loops: 0 relays the
// session on the event loop, -1 on its own pumps.
func benchRoute(b *testing.B, upstream string, loops int) net.Conn {
	b.Helper()
	srv := newTestServer(b, Options{Loops: loops})
	return testenv.Dial(b, addTestRoute(b, srv, Route{Name: "bench", Upstream: upstream}))
}

// relayModes are the two ways a session is relayed: on the event loop and
// on a pair of pumps.
var relayModes = []struct {
	name  string
	loops int
}{{"loop", 0}, {"pumps", -1}}

// BenchmarkRoutePingPong sends a 64-byte request through a route and
// waits for the upstream's 64-byte answer: one message each way per
// operation, the cost of a small transaction, on the event loop and on
// the pumps. Neither allocates per message.
func BenchmarkRoutePingPong(b *testing.B) {
	for _, m := range relayModes {
		b.Run(m.name, func(b *testing.B) { benchPingPong(b, m.loops) })
	}
}

func benchPingPong(b *testing.B, loops int) {
	up := testenv.Serve(b, testenv.EchoMessages(64))
	c := benchRoute(b, up, loops)
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
// that discards them, on the event loop and on the pumps.
func BenchmarkRouteBulk(b *testing.B) {
	for _, m := range relayModes {
		b.Run(m.name, func(b *testing.B) { benchBulk(b, m.loops) })
	}
}

func benchBulk(b *testing.B, loops int) {
	const chunk = 32 << 10
	up := testenv.Serve(b, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	c := benchRoute(b, up, loops)
	msg := make([]byte, chunk)
	b.SetBytes(chunk)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
}

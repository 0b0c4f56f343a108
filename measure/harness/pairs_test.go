package harness

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestServePairs: each accepted client is handed over with a connection
// to the upstream (here an echo server), a client whose upstream cannot
// be dialled is closed, and ServePairs returns nil once ctx ends.
func TestServePairs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upstream string
		paired   bool
	}{
		{"upstream up", testenv.Echo(t), true},
		{"upstream down", testenv.DeadAddr(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			pairs := make(chan [2]net.Conn, 1)
			served := make(chan error, 1)
			go func() {
				served <- ServePairs(ctx, testenv.Logger(slog.LevelError), ln, tc.upstream, func(c, u net.Conn) {
					pairs <- [2]net.Conn{c, u}
				})
			}()
			c := testenv.Dial(t, ln.Addr().String())
			if tc.paired {
				p := <-pairs
				defer p[0].Close()
				defer p[1].Close()
				if _, err := p[1].Write([]byte("ping")); err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 4)
				if _, err := io.ReadFull(p[1], b); err != nil || string(b) != "ping" {
					t.Fatalf("upstream echoed %q, %v; want ping", b, err)
				}
			} else if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatal("client of an unreachable upstream was not closed")
			}
			cancel()
			if err := <-served; err != nil {
				t.Fatalf("ServePairs after ctx ended: %v", err)
			}
		})
	}
}

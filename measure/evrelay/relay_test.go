package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestRelay sends 16 MiB of random bytes each way through the relay over
// loopback, in every variant, and checks both arrive exactly and that each
// end of stream is carried: each side half-closes after its last byte and
// reads until the other's. With "together" both sides write at once (both
// directions back up, as neither reads faster than the relay writes);
// with "upstream first" the upstream sends and half-closes before the
// client writes anything, so one direction is relayed after the other has
// ended. Then the relay must have closed the pair.
func TestRelay(t *testing.T) {
	variants := []struct {
		name string
		cfg  config
	}{
		{"lt", config{loops: 1}},
		{"et", config{loops: 1, edge: true}},
		{"et-2loops", config{loops: 2, edge: true}},
	}
	for _, v := range variants {
		for _, upstreamFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/upstreamFirst=%v", v.name, upstreamFirst), func(t *testing.T) {
				relayOnce(t, v.cfg, upstreamFirst)
			})
		}
	}
}

func relayOnce(t *testing.T, cfg config, upstreamFirst bool) {
	toUp, toClient := random(16<<20), random(16<<20)
	upGot := make(chan []byte, 1)
	upAddr := testenv.ServeOnce(t, func(c net.Conn) {
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			writeAll(c, toClient)
			c.(*net.TCPConn).CloseWrite()
		}()
		b, _ := io.ReadAll(c)
		<-sent
		upGot <- b
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var open atomic.Int64
	served := make(chan error, 1)
	go func() { served <- serve(t.Context(), testenv.Logger(slog.LevelWarn), ln, upAddr, cfg, &open) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var clientGot []byte
	if upstreamFirst {
		if clientGot, err = io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
		writeAll(c, toUp)
		c.(*net.TCPConn).CloseWrite()
	} else {
		go func() {
			writeAll(c, toUp)
			c.(*net.TCPConn).CloseWrite()
		}()
		if clientGot, err = io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(clientGot, toClient) {
		t.Errorf("client got %d bytes, want the upstream's %d exactly", len(clientGot), len(toClient))
	}
	if b := <-upGot; !bytes.Equal(b, toUp) {
		t.Errorf("upstream got %d bytes, want the client's %d exactly", len(b), len(toUp))
	}
	testenv.Eventually(t, 10*time.Second, "the relay closes the pair", func() bool { return open.Load() == 0 })
	ln.Close()
	if err := <-served; err == nil {
		t.Error("serve returned nil after its listener was closed under a live context")
	}
}

// writeAll writes b in chunks of varying sizes, up to 100 KB.
func writeAll(c net.Conn, b []byte) {
	for len(b) > 0 {
		n := min(len(b), 1+len(b)%100000)
		if _, err := c.Write(b[:n]); err != nil {
			return
		}
		b = b[n:]
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

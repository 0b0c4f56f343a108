package linger

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestClientStillWriting: a server that answers and closes while its
// client writes 8 MiB resets the connection without Drain; with it, the
// client's write completes and it reads the answer, then end of file.
func TestClientStillWriting(t *testing.T) {
	for _, drain := range []bool{false, true} {
		client, server := testenv.TCPPair(t)
		const size = 8 << 20
		wrote := make(chan error, 1)
		go func() {
			_, err := client.Write(make([]byte, size))
			wrote <- err
		}()
		if _, err := server.Write([]byte("bye")); err != nil {
			t.Fatal(err)
		}
		if drain {
			Drain(context.Background(), server, clock.Real{}, size, time.Minute)
		}
		server.Close()
		werr := <-wrote
		got, rerr := io.ReadAll(client)
		if drain && (werr != nil || rerr != nil || !bytes.Equal(got, []byte("bye"))) {
			t.Errorf("with Drain: write %v, read %q, %v; want the whole write and then the answer", werr, got, rerr)
		}
		if !drain && werr == nil && rerr == nil {
			t.Errorf("without Drain the connection was not reset: the test shows nothing")
		}
	}
}

// TestBounds: Drain stops at its byte limit, at its timeout on the clock
// and when its context ends, even if the client neither sends nor
// closes.
func TestBounds(t *testing.T) {
	t.Run("limit", func(t *testing.T) {
		client, server := testenv.TCPPair(t)
		if _, err := client.Write(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		Drain(context.Background(), server, clock.Real{}, 60, time.Minute)
		buf := make([]byte, 100)
		n, _ := io.ReadAtLeast(server, buf, 40)
		if n != 40 {
			t.Errorf("%d bytes left after a 60-byte drain of 100, want 40", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		_, server := testenv.TCPPair(t)
		fake := clock.NewFake(time.Unix(0, 0))
		done := make(chan struct{})
		go func() {
			Drain(context.Background(), server, fake, 1<<20, time.Second)
			close(done)
		}()
		fake.BlockUntil(1)
		fake.Advance(time.Second)
		<-done
	})
	t.Run("context", func(t *testing.T) {
		_, server := testenv.TCPPair(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			Drain(ctx, server, clock.NewFake(time.Unix(0, 0)), 1<<20, time.Second)
			close(done)
		}()
		cancel()
		<-done
	})
	t.Run("half-closes", func(t *testing.T) {
		client, server := testenv.TCPPair(t)
		Drain(context.Background(), server, clock.Real{}, 0, time.Second)
		if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("client read %d, %v after Drain; want EOF", n, err)
		}
	})
}

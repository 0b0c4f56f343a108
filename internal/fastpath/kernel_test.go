package fastpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// frames is a generated stream of one protocol's messages and what the
// program must count for it on the socket that receives it.
type frames struct {
	data  []byte
	msgs  uint64
	types [256]uint32
}

// pgFrames returns n PostgreSQL messages of random types and sizes.
func pgFrames(r *rand.Rand, n, maxBody int) frames {
	var f frames
	for range n {
		typ := "QPBEDSdCZT"[r.IntN(10)]
		body := r.IntN(maxBody + 1)
		f.data = append(f.data, typ)
		f.data = binary.BigEndian.AppendUint32(f.data, uint32(4+body))
		for range body {
			f.data = append(f.data, byte(r.Uint32()))
		}
		f.msgs++
		f.types[typ]++
	}
	return f
}

// mysqlFrames returns n MySQL packets as a client would send them (seq 0
// starts a command, the rest are data), with a 16 MiB packet and its
// continuation among them when big. toClient counts them as the client's
// socket would receive them (every packet's first byte).
func mysqlFrames(r *rand.Rand, n, maxBody int, big, server bool) frames {
	var f frames
	packet := func(payload []byte, seq byte, cont bool) {
		n := len(payload)
		f.data = append(f.data, byte(n), byte(n>>8), byte(n>>16), seq)
		f.data = append(f.data, payload...)
		if cont {
			return
		}
		f.msgs++
		if n > 0 && (server || seq == 0) {
			f.types[payload[0]]++
		}
	}
	for i := range n {
		seq := byte(r.IntN(3))
		size := r.IntN(maxBody + 1)
		if big && i == n/2 {
			size = 0xffffff
		}
		payload := make([]byte, size)
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		packet(payload, seq, false)
		if size == 0xffffff {
			packet(payload[:100], seq+1, true)
		}
	}
	return f
}

// relay is a session relayed through a Pair by two copy goroutines, as
// the proxy's loop would: what the program passes is read, written on
// and reported; end of stream is passed on once the kernel's redirects
// are queued. gate keeps the copies from writing while the pair pauses.
type relay struct {
	p     *Pair           // guarded by gate; nil until paired
	conns [2]*net.TCPConn // client-facing, upstream
	// opening, when set, leaves the sockets unpaired until it reports
	// that a server chunk ends the opening exchange; the pair is made
	// and resumed before that chunk goes on.
	opening func(chunk []byte) bool
	k       *testKernel
	proto   Proto
	gate    sync.RWMutex
	copied  [2]int64
	errs    chan error
}

// newRelay connects a client to a relay in front of the server at up and
// pairs the relay's two sockets before either peer sends; a client's
// early bytes are sent, and waiting in the relay's receive queue, before
// the pairing.
// The client's reads and writes time out after 30 s.
func newRelay(t *testing.T, k *testKernel, up string, proto Proto, early []byte) (*net.TCPConn, *relay) {
	t.Helper()
	front := listen(t)
	cl, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	cl.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := cl.Write(early); err != nil {
		t.Fatal(err)
	}
	c, err := front.Accept()
	if err != nil {
		t.Fatal(err)
	}
	u, err := net.Dial("tcp", up)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	r := &relay{conns: [2]*net.TCPConn{c.(*net.TCPConn), u.(*net.TCPConn)}, k: k, proto: proto, errs: make(chan error, 2)}
	t.Cleanup(func() {
		r.conns[0].Close()
		r.conns[1].Close()
		if r.p != nil {
			r.p.Close()
		}
	})
	rc, err := r.conns[0].SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the early bytes to arrive", func() bool {
		_, n, err := received(rc)
		return err != nil || n >= len(early)
	})
	if err := r.pairNow(); err != nil {
		t.Fatal(err)
	}
	return cl.(*net.TCPConn), r
}

func (r *relay) start() {
	for i := range r.conns {
		go func() { r.errs <- r.copy(i) }()
	}
}

func (r *relay) copy(from int) error {
	src, dst := r.conns[from], r.conns[1-from]
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if werr := r.forward(from, buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			r.gate.RLock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var err error
			if r.p != nil {
				err = r.p.Drained(ctx, from)
			}
			if err == nil {
				err = dst.CloseWrite()
			}
			cancel()
			r.gate.RUnlock()
			if errors.Is(err, ErrUnread) {
				time.Sleep(50 * time.Microsecond) // the loop would wait for the socket to be readable
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
	}
}

// forward writes a chunk read from side from on to the other side and
// reports it, pairing the sockets first when it ends the opening.
func (r *relay) forward(from int, chunk []byte) error {
	dst := r.conns[1-from]
	r.gate.RLock()
	if r.p == nil && from == 1 && r.opening != nil && r.opening(chunk) {
		r.gate.RUnlock()
		r.gate.Lock()
		defer r.gate.Unlock()
		if err := r.pairNow(); err != nil {
			return err
		}
		if err := r.p.Resume(); err != nil {
			return err
		}
		_, err := dst.Write(chunk)
		return err
	}
	if r.p != nil && r.p.Resumed() {
		// A chunk too large for the journal: the rest of the exchange
		// goes through user space, as on the proxy's loop.
		r.gate.RUnlock()
		if err := r.hold(); err != nil {
			return err
		}
		r.gate.RLock()
	}
	defer r.gate.RUnlock()
	if r.p != nil {
		r.k.log.passed(r.p.Cookie(from), chunk)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.p.Settle(ctx, from)
		cancel()
		if err != nil {
			return err
		}
	}
	if _, err := dst.Write(chunk); err != nil {
		return err
	}
	if r.p == nil {
		return nil
	}
	r.copied[from] += int64(len(chunk))
	return r.p.Consumed(from, len(chunk))
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// hold holds the pair, between two of the relay's writes (a write
// blocked on a full peer holds the gate: waiting for Lock would stop the
// other direction's writes too, which may be what the full peer needs).
func (r *relay) hold() error {
	for !r.gate.TryLock() {
		runtime.Gosched()
	}
	defer r.gate.Unlock()
	return r.p.Hold()
}

// resume resumes the pair between two of the relay's writes; a pair
// whose redirects are not all queued yet stays held.
func (r *relay) resume() error {
	for !r.gate.TryLock() {
		runtime.Gosched()
	}
	defer r.gate.Unlock()
	if err := r.p.Resume(); !errors.Is(err, ErrUnsettled) {
		return err
	}
	return nil
}

// resumed reports whether the pair is resumed.
func (r *relay) resumed() bool {
	r.gate.RLock()
	defer r.gate.RUnlock()
	return r.p.Resumed()
}

// pairNow pairs the relay's sockets.
func (r *relay) pairNow() error {
	var raw [2]Socket
	for i, c := range r.conns {
		var err error
		if raw[i], err = c.SyscallConn(); err != nil {
			return err
		}
	}
	p, err := r.k.Pair(raw[0], raw[1], r.proto)
	if err != nil {
		return err
	}
	r.p = p
	return nil
}

// wait returns the copies' first error.
func (r *relay) wait() error {
	return errors.Join(<-r.errs, <-r.errs)
}

func openKernel(t *testing.T) *testKernel {
	t.Helper()
	k, err := Open(clock.Real{})
	if err != nil {
		testenv.Missing(t, "BPF sockmap (root, a 5.17 or later kernel): %v", err)
		return nil
	}
	t.Cleanup(func() { k.Close() })
	return &testKernel{Kernel: k, log: newSeen(t, k)}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// echoServer echoes one connection until end of stream, then closes its
// write side; it returns the server's address.
func echoServer(t *testing.T) string {
	return testenv.ServeOnce(t, func(c net.Conn) {
		// Writes the journal can hold, so that the answers are relayed
		// in the kernel whenever the pair is resumed and user space has
		// caught up.
		io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, JournalMax))
		c.(*net.TCPConn).CloseWrite()
	})
}

// TestRelayEcho sends a stream of framed messages through a resumed pair
// to an echo server, writing while the echo comes back so that both
// directions back up. The echo must be byte-identical, nearly all of it
// relayed in the kernel, and the program's counts must match the frames
// on both sockets. While toggling, the pair pauses and resumes every
// millisecond, so bytes cross on both paths in both directions.
func TestRelayEcho(t *testing.T) {
	k := openKernel(t)
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name     string
		proto    Proto
		in, echo frames
		toggle   bool
	}{
		{name: "postgres", proto: PostgreSQL},
		{name: "postgres/toggling", proto: PostgreSQL, toggle: true},
		{name: "mysql", proto: MySQL},
		{name: "mysql/toggling", proto: MySQL, toggle: true},
	}
	for i := range cases {
		c := &cases[i]
		if c.proto == PostgreSQL {
			c.in = pgFrames(r, 3000, 5000)
			c.echo = c.in
			continue
		}
		seed := r.Uint64()
		c.in = mysqlFrames(rand.New(rand.NewPCG(seed, 0)), 3000, 5000, true, false)
		c.echo = mysqlFrames(rand.New(rand.NewPCG(seed, 0)), 3000, 5000, true, true)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := echoServer(t)
			cl, rl := newRelay(t, k, up, c.proto, nil)
			if err := rl.p.Resume(); err != nil {
				t.Fatal(err)
			}
			rl.start()
			back := &countingReader{r: cl}
			flips := 0
			writeErr := make(chan error, 1)
			go func() {
				defer close(writeErr)
				written := 0
				for i, b := 0, c.in.data; len(b) > 0; i++ {
					n := min(len(b), 1+r.IntN(JournalMax*5/4)) // mostly chunks the journal holds, some too large
					if _, err := cl.Write(b[:n]); err != nil {
						return
					}
					b, written = b[n:], written+n
					if i%32 != 31 {
						continue
					}
					// A gap, as between a client's requests: once the
					// echo caught up, the pair resumes (a chunk too
					// large for the journal held it), or, toggling,
					// alternately holds and resumes, as the proxy does
					// at a session's idle points.
					for back.n.Load() < int64(written) {
						runtime.Gosched()
					}
					var err error
					if c.toggle && rl.resumed() {
						err = rl.hold()
					} else {
						err = rl.resume()
					}
					if err != nil {
						writeErr <- err
						return
					}
					flips++
				}
				cl.CloseWrite()
			}()
			got, err := io.ReadAll(back)
			if werr := <-writeErr; werr != nil {
				t.Fatal(werr)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.in.data) {
				prefix := 0
				for prefix < min(len(got), len(c.in.data)) && got[prefix] == c.in.data[prefix] {
					prefix++
				}
				st0, _ := rl.p.Stats(0)
				st1, _ := rl.p.Stats(1)
				t.Fatalf("echo differs: %d bytes back of %d, first %d equal; after %d flips, client side %+v, upstream side %+v, copied %v, copies: %v",
					len(got), len(c.in.data), prefix, flips, counts(st0), counts(st1), rl.copied, rl.wait())
			}
			if err := rl.wait(); err != nil {
				t.Fatal(err)
			}
			var used [2]uint64 // redirected, passed
			for side, want := range []frames{c.in, c.echo} {
				st, err := rl.p.Stats(side)
				if err != nil {
					t.Fatal(err)
				}
				if st.Broken || st.Bytes != uint64(len(want.data)) || st.Messages != want.msgs || st.Types != want.types {
					t.Errorf("side %d: broken %v, %d bytes, %d messages; want %d bytes, %d messages (types equal: %v)",
						side, st.Broken, st.Bytes, st.Messages, len(want.data), want.msgs, st.Types == want.types)
				}
				if st.Redirected+st.Passed+st.Dropped != st.Bytes || st.Dropped != 0 {
					t.Errorf("side %d: %d redirected + %d passed + %d dropped != %d", side, st.Redirected, st.Passed, st.Dropped, st.Bytes)
				}
				if uint64(rl.copied[side]) != st.Passed {
					t.Errorf("side %d: user space copied %d bytes, the program passed %d", side, rl.copied[side], st.Passed)
				}
				checkSeen(t, rl, side, want.data)
				used[0] += st.Redirected
				used[1] += st.Passed
			}
			// Under a stream that never pauses a side may stay on one
			// path (its handshake waits for a gap); the session as a
			// whole must have used both.
			if c.toggle && (used[0] == 0 || used[1] == 0) {
				t.Errorf("toggling %d times left %d bytes redirected, %d passed: one path unused", flips, used[0], used[1])
			}
		})
	}
}

// checkSeen checks that user space observed side's whole stream, want,
// in order (the journal and the chunks passed), and that the journal held
// a copy of exactly the bytes the program redirected.
func checkSeen(t *testing.T, rl *relay, side int, want []byte) {
	t.Helper()
	st, err := rl.p.Stats(side)
	if err != nil {
		t.Fatal(err)
	}
	got, journaled, err := rl.k.log.stream(rl.p.Cookie(side))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("side %d: user space observed %d bytes, not the %d of the stream", side, len(got), len(want))
	}
	if journaled != st.Redirected {
		t.Errorf("side %d: the journal held %d bytes, the program redirected %d", side, journaled, st.Redirected)
	}
}

// TestExchanges relays request/response exchanges, pausing and resuming
// between them: each exchange takes exactly the path the pair was on when
// it began, on both sockets.
func TestExchanges(t *testing.T) {
	k := openKernel(t)
	up := echoServer(t)
	cl, rl := newRelay(t, k, up, PostgreSQL, nil)
	rl.start()
	r := rand.New(rand.NewPCG(7, 8))
	var want [2]uint64 // redirected, passed; each side the same
	for i := range 40 {
		var err error
		rl.gate.Lock()
		if i%3 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = rl.p.Pause(ctx)
			cancel()
		} else {
			err = rl.p.Resume()
		}
		resumed := rl.p.Resumed()
		rl.gate.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		req := pgFrames(r, 1+r.IntN(3), 1000) // one chunk the journal holds

		if _, err := cl.Write(req.data); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(req.data))
		if _, err := io.ReadFull(cl, got); err != nil || !bytes.Equal(got, req.data) {
			t.Fatalf("exchange %d: echo differs (%v)", i, err)
		}
		if resumed {
			want[0] += uint64(len(req.data))
		} else {
			want[1] += uint64(len(req.data))
		}
	}
	cl.CloseWrite()
	if _, err := io.ReadAll(cl); err != nil {
		t.Fatal(err)
	}
	if err := rl.wait(); err != nil {
		t.Fatal(err)
	}
	for side := range 2 {
		st, err := rl.p.Stats(side)
		if err != nil {
			t.Fatal(err)
		}
		if st.Redirected != want[0] || st.Passed != want[1] {
			t.Errorf("side %d: %d redirected, %d passed; want %d, %d", side, st.Redirected, st.Passed, want[0], want[1])
		}
	}
}

// TestHalfClose has the client end its side while the server is still to
// answer: the server reads to end of stream, then sends 4 MiB and
// closes. The client must receive every byte and then end of stream.
func TestHalfClose(t *testing.T) {
	k := openKernel(t)
	answer := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{3, 4}).Read(answer)
	up := testenv.ServeOnce(t, func(c net.Conn) {
		io.Copy(io.Discard, c)
		c.Write(answer)
	})
	cl, rl := newRelay(t, k, up, PostgreSQL, nil)
	if err := rl.p.Resume(); err != nil {
		t.Fatal(err)
	}
	rl.start()
	req := pgFrames(rand.New(rand.NewPCG(5, 6)), 50, 1000)
	for b := req.data; len(b) > 0; {
		n, err := cl.Write(b[:min(len(b), 1000)])
		if err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if err := cl.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(cl)
	if err != nil {
		t.Fatalf("after %d of %d bytes: %v", len(got), len(answer), err)
	}
	if !bytes.Equal(got, answer) {
		t.Fatalf("answer differs: %d bytes of %d", len(got), len(answer))
	}
	if err := rl.wait(); err != nil {
		t.Fatal(err)
	}
	st, err := rl.p.Stats(0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != req.msgs || st.Redirected == 0 {
		t.Errorf("client side: %d messages, %d redirected; want %d, some", st.Messages, st.Redirected, req.msgs)
	}
	checkSeen(t, rl, 0, req.data)
}

// TestNotQuiet pairs a session whose client already sent: Resume refuses,
// and user space still relays every byte.
func TestNotQuiet(t *testing.T) {
	k := openKernel(t)
	up := echoServer(t)
	early := []byte("Q\x00\x00\x00\x09early")
	cl, rl := newRelay(t, k, up, PostgreSQL, early)
	if err := rl.p.Resume(); !errors.Is(err, ErrNotQuiet) {
		t.Fatalf("Resume: %v, want ErrNotQuiet", err)
	}
	rl.start()
	got := make([]byte, len(early))
	if _, err := io.ReadFull(cl, got); err != nil || !bytes.Equal(got, early) {
		t.Fatalf("echo %q, %v", got, err)
	}
	cl.CloseWrite()
	if rest, err := io.ReadAll(cl); err != nil || len(rest) > 0 {
		t.Fatalf("after the echo: %q, %v", rest, err)
	}
	if err := rl.wait(); err != nil {
		t.Fatal(err)
	}
}

// TestEntries counts the maps' entries: two per pair in each while it
// lives, none once its sockets closed and it was closed.
func TestEntries(t *testing.T) {
	k := openKernel(t)
	var rls []*relay
	for range 3 {
		up := echoServer(t)
		_, rl := newRelay(t, k, up, MySQL, nil)
		rls = append(rls, rl)
	}
	socks, links, flows, err := k.Entries()
	if err != nil || socks != 6 || links != 6 || flows != 6 {
		t.Fatalf("3 pairs: %d socks, %d links, %d flows (%v); want 6 each", socks, links, flows, err)
	}
	for _, rl := range rls {
		rl.conns[0].Close()
		rl.conns[1].Close()
		if err := rl.p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := rl.p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	socks, links, flows, err = k.Entries()
	if err != nil || socks+links+flows != 0 {
		t.Fatalf("closed: %d socks, %d links, %d flows (%v); want none", socks, links, flows, err)
	}
}

// counts leaves the type counts out of a failure's message.
func counts(s Stats) Stats {
	s.Types = [256]uint32{}
	return s
}

package evloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// waitEvent waits for one event on p other than a wake, within 10 s.
func waitEvent(t *testing.T, p *Poller, events []unix.EpollEvent) unix.EpollEvent {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n := p.Wait(events)
		for i := range n {
			if Data(&events[i]) != WakeData {
				return events[i]
			}
		}
	}
	t.Fatal("no event")
	return unix.EpollEvent{}
}

// TestDetachRelayAttach takes a socket out of the runtime, moves bytes
// through it with raw reads and writes under a Poller, and gives it back:
// the peer sees one stream, in order, and the half-close.
func TestDetachRelayAttach(t *testing.T) {
	a, b := testenv.TCPPair(t)
	s, err := Detach(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("the detached net.Conn still writes")
	}
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(s.FD(), In|RDHup, 42); err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 8)
	buf := make([]byte, 16)
	if _, err := s.Read(buf); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("read of an empty socket: %v, want EAGAIN", err)
	}
	b.Write([]byte("hello"))
	ev := waitEvent(t, p, events)
	if Data(&ev) != 42 || ev.Events&In == 0 {
		t.Fatalf("event %+v, want data 42 and In", ev)
	}
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if n, err := s.Write([]byte("world")); n != 5 || err != nil {
		t.Fatalf("write %d, %v", n, err)
	}
	if err := p.Del(s.FD()); err != nil {
		t.Fatal(err)
	}
	c, err := s.Attach()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := s.Control(func(uintptr) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Control after Attach: %v", err)
	}
	if _, err := c.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	b.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "world!" {
		t.Fatalf("peer read %q, %v", got, err)
	}
}

// detachedPair returns a socket detached from one end of a TCP pair, the
// pair's other end, and a poller; the test's cleanup closes them.
func detachedPair(t *testing.T) (*Socket, net.Conn, *Poller) {
	t.Helper()
	a, b := testenv.TCPPair(t)
	s, err := Detach(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return s, b, p
}

// TestWriteFillsThenEAGAIN: Write takes what the send buffer holds and
// then reports EAGAIN, never blocking; once the peer reads, Out is
// reported and writing goes on. Every byte arrives once, in order.
func TestWriteFillsThenEAGAIN(t *testing.T) {
	s, b, p := detachedPair(t)
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	var sent bytes.Buffer
	for {
		n, err := s.Write(chunk)
		sent.Write(chunk[:n])
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if sent.Len() > 256<<20 {
			t.Fatal("the send buffer never filled")
		}
	}
	if err := p.Add(s.FD(), Out, 1); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b.SetReadDeadline(clock.SocketDeadline(30 * time.Second))
		all, _ := io.ReadAll(b)
		got <- all
	}()
	ev := waitEvent(t, p, make([]unix.EpollEvent, 4))
	if ev.Events&Out == 0 {
		t.Fatalf("event %+v, want Out", ev)
	}
	n, err := s.Write([]byte("tail"))
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		t.Fatal(err)
	}
	sent.WriteString("tail"[:n])
	s.Shutdown()
	if all := <-got; !bytes.Equal(all, sent.Bytes()) {
		t.Fatalf("peer read %d bytes, %d sent", len(all), sent.Len())
	}
}

// TestWake: a Wake from another goroutine ends a Wait with a WakeData
// event; Drain clears it.
func TestWake(t *testing.T) {
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	events := make([]unix.EpollEvent, 4)
	go p.Wake()
	for {
		if n := p.Wait(events); n == 1 && Data(&events[0]) == WakeData {
			break
		}
	}
	p.Drain()
	n, _ := unix.EpollWait(p.epfd, events, 0)
	if n != 0 {
		t.Fatalf("%d events after Drain", n)
	}
}

// TestWaitReady: with a registered socket readable and a Wake made,
// both level-triggered and so both ready for the next Wait, WaitReady
// returns the socket's event alone in events and reports the Wake;
// after Drain, only the socket's.
func TestWaitReady(t *testing.T) {
	s, b, p := detachedPair(t)
	if err := p.Add(s.FD(), In, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 4)
	p.Wake()
	if n, woken := p.WaitReady(events); n != 1 || Data(&events[0]) != 7 || !woken {
		t.Fatalf("WaitReady = %d events (first data %d), woken %v; want the socket's alone and woken", n, Data(&events[0]), woken)
	}
	p.Drain()
	if n, woken := p.WaitReady(events); n != 1 || Data(&events[0]) != 7 || woken {
		t.Fatalf("after Drain: WaitReady = %d events (first data %d), woken %v; want the socket's alone", n, Data(&events[0]), woken)
	}
}

// TestWaitParkedWakesOnInput: a Wait parked with nothing ready returns
// the event of a registered socket once its peer writes, and a Wait and
// Wake allocate nothing.
func TestWaitParkedWakesOnInput(t *testing.T) {
	s, b, p := detachedPair(t)
	if err := p.Add(s.FD(), In, 7); err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 4)
	got := make(chan uint64, 1)
	go func() {
		for {
			if n := p.Wait(events); n > 0 {
				got <- Data(&events[0])
				return
			}
		}
	}()
	testenv.WaitBlocked(t, "evloop.(*Poller).Wait", 1) // parked: nothing is ready
	if _, err := b.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := testenv.Receive(t, got, 10*time.Second, "a parked Wait to return on input"); d != 7 {
		t.Fatalf("event data %d, want 7", d)
	}
	p.Del(s.FD())
	evs := make([]unix.EpollEvent, 4)
	if n := testing.AllocsPerRun(100, func() {
		p.Wake()
		for p.Wait(evs) == 0 {
		}
		p.Drain()
	}); n != 0 {
		t.Fatalf("%v allocations per Wake and Wait", n)
	}
}

// TestClosePoller: Close ends a parked Wait, which returns 0.
func TestClosePoller(t *testing.T) {
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- p.Wait(make([]unix.EpollEvent, 4)) }()
	testenv.WaitBlocked(t, "evloop.(*Poller).Wait", 1)
	p.Close()
	if n := testenv.Receive(t, done, 10*time.Second, "Close to end a parked Wait"); n != 0 {
		t.Fatalf("Wait on a closed poller returned %d", n)
	}
}

// TestCloseTwice: Close is safe twice, and Control fails after it.
func TestCloseTwice(t *testing.T) {
	a, _ := testenv.TCPPair(t)
	s, err := Detach(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Control(func(uintptr) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Control after Close: %v", err)
	}
	if _, err := s.Attach(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Attach after Close: %v", err)
	}
}

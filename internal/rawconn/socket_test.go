package rawconn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicelab/sluice/internal/testenv"
	"golang.org/x/sys/unix"
)

// socketPair is a TCP connection made by DialTCP to a listener whose end
// Accept took.
func socketPair(t *testing.T) (dialed, accepted net.Conn) {
	t.Helper()
	ln := listen(t)
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	got := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		got <- res{c, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := DialTCP(ctx, ln.Addr().(*net.TCPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { d.Close(); r.c.Close() })
	return d, r.c
}

func TestSocketPair(t *testing.T) {
	d, a := socketPair(t)
	for _, c := range []net.Conn{d, a} {
		if _, ok := c.(*Conn); !ok {
			t.Fatalf("%T, want *Conn", c)
		}
		if _, ok := Unwrap(c).(*TCPSocket); !ok {
			t.Fatalf("under %T, want *TCPSocket", Unwrap(c))
		}
	}
	if d.LocalAddr().String() != a.RemoteAddr().String() || d.RemoteAddr().String() != a.LocalAddr().String() {
		t.Errorf("addresses: dialed %v->%v, accepted %v<-%v", d.LocalAddr(), d.RemoteAddr(), a.LocalAddr(), a.RemoteAddr())
	}
	for _, o := range []struct{ level, opt, want int }{
		{syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1},
		{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
		{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, keepAliveInterval},
	} {
		for _, c := range []net.Conn{d, a} {
			var v int
			var err error
			Unwrap(c).(*TCPSocket).rc.Control(func(fd uintptr) { v, err = syscall.GetsockoptInt(int(fd), o.level, o.opt) })
			if err != nil || v != o.want {
				t.Errorf("option %d/%d: %d, %v; want %d", o.level, o.opt, v, err, o.want)
			}
		}
	}
	msg := []byte("hello, raw socket")
	if _, err := d.Write(msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != string(msg) {
		t.Fatalf("read %q, %v", buf, err)
	}
	// Half-close: the accepted end reads the end of the stream and can
	// still answer.
	if err := d.(*Conn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after CloseWrite: %d, %v; want EOF", n, err)
	}
	if _, err := a.Write(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(d, buf); err != nil {
		t.Fatal(err)
	}
	// The blocking-path methods of the socket itself.
	s := Unwrap(a).(*TCPSocket)
	if err := s.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v", err)
	}
	var ne net.Error
	if _, err := a.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("raw read past deadline: %v, want a timeout", err)
	}
	if err := s.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v, want net.ErrClosed", err)
	}
	if _, err := a.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("raw read after close: %v, want net.ErrClosed", err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	// SO_LINGER 0: the peer sees a reset, not an end of stream.
	if _, err := io.ReadAll(d); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after a reset: %v, want ECONNRESET", err)
	}
}

func TestDialTCPErrors(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	_, err = DialTCP(context.Background(), closedAddr)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("closed port: %v, want ECONNREFUSED", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DialTCP(ctx, closedAddr); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	// 192.0.2.1 (TEST-NET-1) is not routed: the connect waits until the
	// context ends, or fails at once where there is no route at all.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = DialTCP(ctx, netip.MustParseAddrPort("192.0.2.1:9"))
	if err == nil {
		t.Fatal("dial to an unrouted address succeeded")
	}
	// (Some sandboxes refuse it at once.)
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, syscall.ENETUNREACH) &&
		!errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("unrouted: %v", err)
	}
}

func listen(t *testing.T) *Listener {
	t.Helper()
	tl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(tl)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestAcceptClosed(t *testing.T) {
	ln := listen(t)
	errc := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		errc <- err
	}()
	testenv.WaitBlocked(t, "rawconn.(*Listener).Accept", 1)
	ln.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed listener: %v", err)
	}
	ln2 := listen(t)
	defer ln2.Close()
	ln2.SetDeadline(time.Unix(1, 0))
	var ne net.Error
	if _, err := ln2.Accept(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("accept past deadline: %v, want a timeout", err)
	}
}

// FuzzTCPAddr: any bytes as a sockaddr give an address and no panic; an
// AF_INET or AF_INET6 one gives back the port that was put in.
func FuzzTCPAddr(f *testing.F) {
	f.Add(uint16(syscall.AF_INET), uint16(5432), []byte{127, 0, 0, 1})
	f.Add(uint16(syscall.AF_INET6), uint16(3306), []byte{15: 1})
	f.Add(uint16(syscall.AF_UNIX), uint16(0), []byte("/tmp/.s.PGSQL.5432"))
	f.Fuzz(func(t *testing.T, family, p uint16, rest []byte) {
		var sa unix.RawSockaddrAny
		sa.Addr.Family = family
		b := (*[unsafe.Sizeof(sa)]byte)(unsafe.Pointer(&sa))
		copy(b[4:], rest)
		if family == unix.AF_INET || family == unix.AF_INET6 {
			putPort((*uint16)(unsafe.Pointer(&b[2])), p)
		}
		a := tcpAddr(&sa)
		if a == nil {
			t.Fatal("nil address")
		}
		if (family == unix.AF_INET || family == unix.AF_INET6) && a.Port != int(p) {
			t.Fatalf("port %d, want %d", a.Port, p)
		}
	})
}

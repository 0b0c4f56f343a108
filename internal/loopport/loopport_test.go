package loopport

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
)

// TestReserve: ports reserved in a row and at once are distinct, a dial
// to one is refused, a Go listener can listen on it while it is held, and
// Close is safe twice.
func TestReserve(t *testing.T) {
	const n = 200
	res := make([]*Reservation, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		if i%2 == 0 { // half in a row, half at once
			res[i], errs[i] = Reserve()
			continue
		}
		wg.Go(func() { res[i], errs[i] = Reserve() })
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, r := range res {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer r.Close()
		if seen[r.Port()] {
			t.Fatalf("port %d reserved twice", r.Port())
		}
		seen[r.Port()] = true
	}
	r := res[0]
	if _, err := net.Dial("tcp", r.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", r.Addr(), err)
	}
	ln, err := net.Listen("tcp", r.Addr())
	if err != nil {
		t.Fatalf("listen on %s while reserved: %v", r.Addr(), err)
	}
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatalf("dial %s once listening: %v", r.Addr(), err)
	}
	c.Close()
	ln.Close()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

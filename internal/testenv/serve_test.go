package testenv

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestDeadAddr: addresses handed out in one test are distinct even when
// many are taken in a row, each refuses a dial, and a Go listener can
// then listen on it.
func TestDeadAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a := DeadAddr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	a := DeadAddr(t)
	if _, err := net.Dial("tcp", a); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", a, err)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("listen on %s: %v", a, err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatalf("dial %s once listening: %v", a, err)
	}
	c.Close()
}

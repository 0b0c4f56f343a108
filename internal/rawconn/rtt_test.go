package rawconn

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
)

func TestRTT(t *testing.T) {
	var d net.Dialer
	c, srv := dialPair(t, "tcp", "127.0.0.1:0", d.DialContext)
	// One exchange so the kernel has measured a round trip.
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := srv.Read(b); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    net.Conn
	}{
		{"tcp", c},
		{"wrapped", Wrap(c)},
		{"tls", tls.Client(Wrap(c), &tls.Config{})},
	} {
		if d := RTT(tc.c); d <= 0 {
			t.Errorf("%s: RTT = %v, want > 0 on a socket that has exchanged bytes", tc.name, d)
		}
	}

	uc, _ := dialPair(t, "unix", filepath.Join(t.TempDir(), "s"), d.DialContext)
	if d := RTT(Wrap(uc)); d != 0 {
		t.Errorf("unix socket RTT = %v, want 0", d)
	}
	if d := RTT(uc); d != 0 {
		t.Errorf("bare unix socket RTT = %v, want 0", d)
	}
}

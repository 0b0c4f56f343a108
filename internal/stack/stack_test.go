package stack_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// echoes reports whether one round trip through c comes back intact.
func echoes(c net.Conn, msg string) bool {
	if _, err := c.Write([]byte(msg)); err != nil {
		return false
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == msg
}

// TestConfigErrorBindsNothing: every configuration New refuses is a
// *ConfigError, and the addresses of the routes and consoles before the
// bad piece are still free afterwards.
func TestConfigErrorBindsNothing(t *testing.T) {
	route, adm, api := testenv.DeadAddr(t), testenv.DeadAddr(t), testenv.DeadAddr(t)
	ok := config.Route{Name: "r", Listen: route, Upstream: "127.0.0.1:1", Protocol: "tcp"}
	tests := []struct {
		name string
		cfg  config.Config
	}{
		{"unknown link", config.Config{Routes: []config.Route{ok, {Name: "bad", Listen: testenv.DeadAddr(t), Upstream: "127.0.0.1:1", Protocol: "tcp", Link: "nope"}}}},
		{"bad emulation", config.Config{Routes: []config.Route{ok, {Name: "bad", Listen: testenv.DeadAddr(t), Upstream: "127.0.0.1:1", Protocol: "tcp", Emulation: map[string]string{"delay": "soon"}}}}},
		{"bad setting", config.Config{Routes: []config.Route{ok}, Settings: map[string]string{"no_such_setting": "1"}}},
		{"missing certificate", config.Config{Routes: []config.Route{ok, {Name: "bad", Listen: testenv.DeadAddr(t), Upstream: "127.0.0.1:1", Protocol: "postgres", TLS: &config.TLS{Cert: "/nonexistent.pem", Key: "/nonexistent.key"}}}}},
		{"admin without password off loopback", config.Config{Routes: []config.Route{ok}, Admin: config.Admin{Listen: "192.0.2.1:6433"}}},
		{"HTTP API without token off loopback", config.Config{Routes: []config.Route{ok}, Admin: config.Admin{Listen: adm}, HTTP: config.HTTP{Listen: "192.0.2.1:8474"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := stack.New(context.Background(), stack.Options{Config: &tt.cfg})
			var ce *stack.ConfigError
			if !errors.As(err, &ce) {
				if st != nil {
					st.Close()
				}
				t.Fatalf("New = %v, want a *ConfigError", err)
			}
			for _, addr := range []string{route, adm, api} {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("%s taken after a configuration error: %v", addr, err)
				}
				ln.Close()
			}
		})
	}
}

// TestAddRouteAndClose: a route added after New relays bytes over real
// sockets; Close releases every address, and a second Close returns what
// the first did.
func TestAddRouteAndClose(t *testing.T) {
	up := testenv.Echo(t)
	cfg := &config.Config{Admin: config.Admin{Listen: "127.0.0.1:0"}, HTTP: config.HTTP{Listen: "127.0.0.1:0"}}
	st, err := stack.New(context.Background(), stack.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := st.AddRoute(stack.Route{Route: config.Route{Name: "echo", Listen: "127.0.0.1:0", Upstream: up, Protocol: "tcp"}})
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.Dial(t, addr.String())
	if !echoes(c, "ping") {
		t.Fatal("no echo through the route")
	}
	c.Close()
	if _, err := st.AddRoute(stack.Route{Route: config.Route{Name: "bad", Listen: "127.0.0.1:0", Upstream: "127.0.0.1:1", Protocol: "tcp", Link: "nope"}}); !errors.As(err, new(*stack.ConfigError)) {
		t.Fatalf("AddRoute with an unknown link = %v, want a *ConfigError", err)
	}
	bound := []string{addr.String(), st.AdminAddr().String(), st.HTTPAddr().String()}
	first := st.Close()
	if second := st.Close(); second != first {
		t.Fatalf("second Close = %v, first %v", second, first)
	}
	for _, a := range bound {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s still taken after Close: %v", a, err)
		}
		ln.Close()
	}
}

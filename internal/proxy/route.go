package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/sluicelab/sluice/internal/rawconn"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// Frontend runs a protocol's opening exchange for a route. Routes with
// protocol tcp have none.
type Frontend interface {
	Open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error)
}

// Route is one listening address forwarding to one upstream.
type Route struct {
	Name     string
	Listen   string // host:port
	Upstream string // host:port, or the absolute path of a Unix socket
	Protocol string // postgres, mysql or tcp
	Link     string // link name; "" means "default"
	// Frontend runs the protocol's opening exchange; nil relays raw bytes
	// from the first one (protocol tcp).
	Frontend Frontend
	// DialTimeout bounds the upstream dial; 0 means 10 s.
	DialTimeout time.Duration
	// NotSentLowat is TCP_NOTSENT_LOWAT for the client-facing socket in
	// bytes; 0 means 128 KiB, negative leaves the kernel default.
	NotSentLowat int
	// Listener, if set, is used instead of listening on Listen.
	Listener net.Listener
	// Dial, if set, connects to Upstream instead of the route's own
	// dialer (a socket opened inside a network namespace, say); it is
	// given the network and address as the net package names them.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// WrapClient and WrapUpstream, if set, wrap the two sockets after the
	// opening exchange, before relaying starts (fault injection).
	WrapClient   func(net.Conn) net.Conn
	WrapUpstream func(net.Conn) net.Conn
}

func (r *Route) linkName() string {
	if r.Link == "" {
		return "default"
	}
	return r.Link
}

func (r *Route) dialer() wire.Dialer {
	timeout := r.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	addr := r.Upstream
	if dial := r.Dial; dial != nil {
		return func(ctx context.Context) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			c, err := dial(ctx, wire.Network(addr), addr)
			if err != nil {
				return nil, fmt.Errorf("upstream %s: %w", addr, err)
			}
			return rawconn.Wrap(c), nil
		}
	}
	// The Dialer is made per dial: sessions keep their dialer (a
	// PostgreSQL cancel request dials again), and it should cost them
	// little while idle.
	// An address of an IP and a port is dialed with raw system calls
	// (rawconn.DialTCP), for the reason the server accepts with them; a
	// name to resolve or a Unix socket goes through the net package.
	ap, apErr := netip.ParseAddrPort(addr)
	if apErr == nil && wire.Network(addr) == "tcp" {
		return func(ctx context.Context) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			c, err := rawconn.DialTCP(ctx, ap)
			if err != nil {
				return nil, fmt.Errorf("upstream %s: %w", addr, err)
			}
			return c, nil
		}
	}
	return func(ctx context.Context) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, wire.Network(addr), addr)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", addr, err)
		}
		return rawconn.Wrap(c), nil
	}
}

func (r *Route) lowat() int {
	switch {
	case r.NotSentLowat == 0:
		return 128 << 10
	case r.NotSentLowat < 0:
		return 0
	}
	return r.NotSentLowat
}

// sessionInfo describes a connection accepted on r.
func (r *Route) sessionInfo(client net.Conn) session.Info {
	return session.Info{
		Route:    r.Name,
		Protocol: r.Protocol,
		Link:     r.linkName(),
		Client:   client.RemoteAddr().String(),
		Upstream: r.Upstream,
	}
}

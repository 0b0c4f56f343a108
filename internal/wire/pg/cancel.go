package pg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// Cancel keys pass through sluice unchanged: the client receives the
// upstream's BackendKeyData, so the key in a client's CancelRequest is the
// upstream's key. The server observer registers it (pid and secret bytes,
// as sent) with Session.SetCancelKey; Open looks a CancelRequest's key up
// with KeyLookup.ByCancelKey and forwards it through that session's
// Canceler, which opens its own connection to the upstream.

// errCancelTimeout is the cause when a cancel connection takes longer than
// Options.DialTimeout.
var errCancelTimeout = errors.New("cancel request timed out")

// canceler sends a CancelRequest for one upstream session. It is safe for
// concurrent use.
type canceler struct {
	f    *Frontend
	key  []byte      // pid (4 bytes) and secret (4 to 256 bytes); read-only
	dial wire.Dialer // used when Options.Upstream is empty
}

// Cancel opens a connection to the upstream (TLS first when
// Options.UpstreamTLS is set, as libpq does), sends the CancelRequest and
// waits for the server to close the connection, which it does once it has
// acted on it. The exchange is bounded by Options.DialTimeout and ctx. The
// server never answers, so success means only that the request was sent.
func (c *canceler) Cancel(ctx context.Context) error {
	ctx, cancel := clock.WithTimeout(ctx, c.f.clk, c.f.dialTimeout, errCancelTimeout)
	defer cancel()
	conn, err := c.f.dialCancel(ctx, c.dial)
	if err != nil {
		return fmt.Errorf("pg: cancel: connect to upstream %s: %w", c.f.upstreamName(), err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(clock.LongAgo) })
	defer stop()
	if c.f.upTLS != nil {
		tc, err := c.f.startTLS(ctx, conn)
		if err != nil {
			return fmt.Errorf("pg: cancel: upstream %s: %w", c.f.upstreamName(), err)
		}
		defer tc.Close()
		conn = tc
	}
	req := pgproto3.CancelRequest{ProcessID: binary.BigEndian.Uint32(c.key), SecretKey: c.key[4:]}
	b, err := req.Encode(nil)
	if err != nil {
		return fmt.Errorf("pg: cancel: %w", err)
	}
	if _, err := conn.Write(b); err != nil {
		return fmt.Errorf("pg: cancel: send to upstream %s: %w", c.f.upstreamName(), err)
	}
	// Wait for the close; what ends the wait does not matter.
	_, _ = io.Copy(io.Discard, conn)
	return nil
}

// dialCancel connects to Options.Upstream, or through the route's Dialer
// when no address is configured.
func (f *Frontend) dialCancel(ctx context.Context, dial wire.Dialer) (net.Conn, error) {
	if f.upstream == "" {
		if dial == nil {
			return nil, errors.New("no upstream address")
		}
		return dial(ctx)
	}
	var d net.Dialer
	return d.DialContext(ctx, wire.Network(f.upstream), f.upstream)
}

// installKey registers the upstream's cancel key for sess and installs a
// Canceler sending it. key is BackendKeyData's payload and is copied.
func (f *Frontend) installKey(sess *session.Session, key []byte, dial wire.Dialer, gate *wire.Gate) {
	k := string(key)
	sess.SetCancelKey(k)
	sess.SetCanceler(gate.Canceler(&canceler{f: f, key: []byte(k), dial: dial}))
}

// forwardCancel serves a client's CancelRequest: key is its pid and
// secret. An unknown key is dropped silently, as PostgreSQL does.
func (f *Frontend) forwardCancel(ctx context.Context, key []byte) {
	if f.keys == nil {
		f.log.Debug("pg: cancel request dropped: no key lookup configured")
		return
	}
	sess := f.keys.ByCancelKey(string(key))
	if sess == nil {
		f.log.Debug("pg: cancel request with unknown key dropped")
		return
	}
	c := sess.Canceler()
	if c == nil {
		return
	}
	if err := c.Cancel(ctx); err != nil {
		f.log.Warn("pg: forward cancel request", "session", sess.ID, "err", err)
		return
	}
	f.log.Debug("pg: cancel request forwarded", "session", sess.ID)
}

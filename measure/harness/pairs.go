package harness

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"
)

// ServePairs accepts clients on ln until ctx ends, dials upstream for
// each (5 s timeout) and hands the pair to pair on the accepting
// goroutine; a client whose dial fails is closed. Accept errors other
// than a closed listener are logged and accepting goes on. ln is closed
// when ctx ends, and ServePairs then returns nil; a listener closed
// otherwise returns its error.
func ServePairs(ctx context.Context, log *slog.Logger, ln net.Listener, upstream string, pair func(client, up net.Conn)) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	d := net.Dialer{Timeout: 5 * time.Second}
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			log.Warn("accept", "err", err)
			continue
		}
		u, err := d.DialContext(ctx, "tcp", upstream)
		if err != nil {
			log.Warn("dial upstream", "err", err)
			c.Close()
			continue
		}
		pair(c, u)
	}
}

// ServeEach accepts connections on ln until it is closed and runs serve
// on a goroutine of its own for each; serve owns the connection. It
// returns once Accept fails.
func ServeEach(ln net.Listener, serve func(c net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(c)
	}
}

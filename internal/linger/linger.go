package linger

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

// Drain half-closes c (when it supports CloseWrite, as a *net.TCPConn
// does) and discards what the client sends until it closes its side,
// limit bytes have been read, timeout has passed on clk, or ctx ends.
// It leaves c open, with no read deadline, what it did not read still
// readable. A limit or timeout of 0 or less discards
// nothing, only half-closes.
func Drain(ctx context.Context, c net.Conn, clk clock.Clock, limit int64, timeout time.Duration) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	if limit <= 0 || timeout <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	t := clk.NewTimer(timeout)
	defer t.Stop()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-t.C():
		case <-ctx.Done():
		}
		_ = c.SetReadDeadline(clock.LongAgo)
	}()
	_, _ = io.CopyN(io.Discard, c, limit)
	// The read deadline that ended the copy, or the one the goroutine
	// sets as it stops, is c's no longer once Drain returns.
	cancel()
	<-stopped
	_ = c.SetReadDeadline(time.Time{})
}

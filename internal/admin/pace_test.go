package admin

import (
	"context"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

// TestStatementPace: the console's statements pass StatementBurst at
// once, then at StatementRate a second, in the clock's time: the next one
// waits for the clock (a fake one here) and runs once it has moved.
func TestStatementPace(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	c := startConsole(t, Options{Clock: clk, StatementRate: 1})
	conn := c.connect(t)
	ctx := context.Background()
	for i := range StatementBurst {
		if _, err := conn.Exec(ctx, "SHOW network_control"); err != nil {
			t.Fatalf("statement %d of the burst: %v", i, err)
		}
	}
	armed := clk.Pending()
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SHOW network_control")
		done <- err
	}()
	clk.BlockUntil(armed + 1) // the statement waits for its turn
	select {
	case err := <-done:
		t.Fatalf("the statement past the burst ran without waiting (%v)", err)
	default:
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("the statement after its wait: %v", err)
	}
}

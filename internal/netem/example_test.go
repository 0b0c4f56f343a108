package netem_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netem"
)

// A flow's two directions each get a Path and a Line; each Line's
// acknowledgements come back over the other direction's delay.
func ExampleLine() {
	ctx := context.Background()
	clk := clock.Real{}
	prm := netem.Params{Delay: 2 * time.Millisecond, Seed: 1}
	up, down := netem.NewPath(prm, 0), netem.NewPath(prm, 1)

	var server bytes.Buffer
	l := netem.NewLine(clk, &server, up, netem.LineOptions{
		AckDelay: func() time.Duration { return down.Params().Delay },
	})
	defer l.Close()

	// The bytes reach the server about 2 ms after they arrived (right on
	// average: a release may come a few microseconds early or late).
	if err := l.Write(ctx, []byte("SELECT 1"), clk.Now()); err != nil {
		fmt.Println(err)
	}
	if err := l.Flush(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(server.String())
	// Output: SELECT 1
}

func ExamplePath_Release() {
	p := netem.NewPath(netem.Params{Delay: 10 * time.Millisecond, Rate: 1_000_000, Burst: 1000}, 0)
	t0 := time.Unix(0, 0)
	for _, n := range []int{1000, 1000, 500} {
		fmt.Println(p.Release(t0, n).Sub(t0))
	}
	// Output:
	// 10ms
	// 11ms
	// 11.5ms
}

package stack

import (
	"fmt"
	"log/slog"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fastpath"
)

// openFastPath loads the kernel fast path for fast_path mode (auto,
// kernel or off). Under auto a kernel or a process that cannot run it
// leaves sluice as it is, said once at INFO; under kernel it is an
// error. Once on, it warns of the fault doc/fast-path.md describes.
// loops is the proxy's (a negative number: none, and so no fast
// path: the fast path runs on the first event loop).
func openFastPath(mode string, loops int, clk clock.Clock, log *slog.Logger) (*fastpath.Kernel, error) {
	if mode == "off" {
		return nil, nil
	}
	if loops < 0 {
		if mode == "kernel" {
			return nil, configErr(fmt.Errorf("fast_path kernel: the fast path runs on an event loop, and --event-loops is 0"))
		}
		log.Info("kernel fast path off: no event loop runs")
		return nil, nil
	}
	k, err := fastpath.Open(clk)
	if err != nil {
		if mode == "kernel" {
			return nil, fmt.Errorf("fast_path kernel: %w", err)
		}
		log.Info("kernel fast path off; every byte is relayed in user space", "reason", err)
		return nil, nil
	}
	log.Info("kernel fast path on: sessions whose bytes sluice need not touch are relayed in the kernel")
	log.Warn("kernel fast path: Linux was seen to reorder a bulk stream through a paired socket when a read left bytes queued; sluice reads paired sockets whole, which avoided it in every run since, but the cause is not found (doc/fast-path.md)")
	return k, nil
}

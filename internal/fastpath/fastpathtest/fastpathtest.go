package fastpathtest

import (
	"testing"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/testenv"
)

// Open loads the kernel fast path for t and closes it when t ends. When
// the process cannot load it (no root, no BPF sockmap, a kernel older
// than 5.17) it ends t: failed under CI=true, skipped elsewhere
// (testenv.Missing); it never returns nil. A test that only needs to
// know the fast path can be loaded, for a stack that loads its own,
// calls it and ignores the Kernel.
func Open(t testing.TB) *fastpath.Kernel {
	t.Helper()
	k, err := fastpath.Open(clock.Real{})
	if err != nil {
		testenv.Missing(t, "the kernel fast path (root, a BPF sockmap, Linux 5.17 or later): %v", err)
		return nil // not reached: Missing ends t
	}
	t.Cleanup(func() { k.Close() })
	return k
}

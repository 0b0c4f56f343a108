package wiretest

import (
	"testing"

	"github.com/sluicelab/sluice/internal/wire"
)

// BenchStream benchmarks o on stream, fed in chunks of chunk bytes that
// start wherever the last one ended and wrap around at the end, so that
// message headers fall across chunk boundaries. stream must start and end
// on message boundaries. Each iteration is one chunk; a failed Observe
// fails b.
func BenchStream(b *testing.B, o wire.Observer, stream []byte, chunk int) {
	b.SetBytes(int64(chunk))
	b.ReportAllocs()
	off := 0
	for b.Loop() {
		end := off + chunk
		var err error
		if end <= len(stream) {
			err = o.Observe(stream[off:end])
		} else {
			end -= len(stream)
			if err = o.Observe(stream[off:]); err == nil {
				err = o.Observe(stream[:end])
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		off = end
	}
}

package wiretest

import (
	"context"
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

// BenchRewrite benchmarks rw on in, one whole request per iteration;
// when down is not nil, down then observes answer, the server's answer
// to it. A failed Rewrite or Observe fails b.
func BenchRewrite(b *testing.B, rw wire.Rewriter, in []byte, down wire.Observer, answer []byte) {
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := rw.Rewrite(ctx, in); err != nil {
			b.Fatal(err)
		}
		if down == nil {
			continue
		}
		if err := down.Observe(answer); err != nil {
			b.Fatal(err)
		}
	}
}

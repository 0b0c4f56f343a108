package mysql

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicelab/sluice/internal/wire"
)

// script encodes steps for the fuzz targets: per step a byte whose low
// bit is the direction (1: client to server) and whose other bits are a
// chunk size hint, a 2-byte length, then the bytes.
func script(steps []step, chunk byte) []byte {
	var out []byte
	for _, s := range steps {
		b := chunk << 1
		if s.up {
			b |= 1
		}
		out = append(out, b, byte(len(s.b)), byte(len(s.b)>>8))
		out = append(out, s.b...)
	}
	return out
}

// FuzzObserve feeds arbitrary bytes to both observers in arbitrary
// chunks: they must never panic, and bytes credited to statements never
// exceed the bytes fed.
func FuzzObserve(f *testing.F) {
	for i, sc := range scenarios() {
		if len(script(sc.steps, 0)) < 4096 {
			f.Add(uint32(sc.caps), uint8(sc.ext), sc.auth, script(sc.steps, byte(i%7)))
		}
	}
	f.Add(uint32(testCaps), uint8(0), false, []byte{0x01, 0xff, 0xff, 0xff, 0x00})
	f.Fuzz(func(t *testing.T, caps uint32, ext uint8, auth bool, data []byte) {
		reg, sess, u, d := harnessObservers(caps, uint32(ext), auth)
		var fed [2]int64
		for len(data) >= 3 {
			hint, n := data[0], int(data[1])|int(data[2])<<8
			data = data[3:]
			n = min(n, len(data))
			chunk := max(1, int(hint>>1))
			var o wire.Observer = d
			dir := 0
			if hint&1 != 0 {
				o, dir = u, 1
			}
			b := data[:n]
			data = data[n:]
			for len(b) > 0 {
				k := min(chunk, len(b))
				if err := o.Observe(b[:k]); err != nil {
					var fe *wire.Fatal
					if !errors.As(err, &fe) || len(fe.Reply) < 13 {
						t.Fatalf("error %v is not a *wire.Fatal with an ERR reply", err)
					}
					return
				}
				fed[dir] += int64(k)
				b = b[k:]
			}
		}
		var up, down int64
		for _, r := range records(reg) {
			up += r.BytesUp
			down += r.BytesDown
		}
		if up > fed[1] || down > fed[0] {
			t.Fatalf("statements hold %d/%d bytes, %d/%d fed", up, down, fed[1], fed[0])
		}
		sess.Close(t0)
		if len(reg.Active()) != 0 {
			t.Fatal("statements still running after Close")
		}
	})
}

// FuzzObserveSplit cuts a valid stream at arbitrary places: the records
// must be those of the uncut stream.
func FuzzObserveSplit(f *testing.F) {
	scs := scenarios()
	for i := range scs {
		f.Add(uint8(i), []byte{1, 2, 3, 200, 7})
	}
	f.Fuzz(func(t *testing.T, which uint8, cuts []byte) {
		sc := scs[int(which)%len(scs)]
		reg, _, u, d := harnessObservers(sc.caps, sc.ext, sc.auth)
		if err := run(sc.steps, u, d, 0); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(records(reg))
		reg, _, u, d = harnessObservers(sc.caps, sc.ext, sc.auth)
		i := 0
		err := runCut(sc.steps, u, d, func(n int) int {
			if len(cuts) > 0 {
				n = min(n, 1+int(cuts[i%len(cuts)]))
				i++
			}
			return n
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(records(reg)); got != want {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

// FuzzFramer checks the framer alone: any bytes in any chunking yield
// the same packet boundaries and sizes, and every byte is counted once.
func FuzzFramer(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 3, 0, 0, 0, 0xff, 0xff, 0xff, 1}, uint8(1))
	f.Add(pk(0, make([]byte, 300)), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		frame := func(step int) (string, int64) {
			var fr framer
			buf := make([]byte, 0, 16)
			fr.buf = buf
			var log []byte
			var held int64
			p := data
			for len(p) > 0 {
				k := len(p)
				if step > 0 {
					k = min(k, step)
				}
				q := p[:k]
				p = p[k:]
				for {
					n, ev := fr.feed(q)
					q = q[n:]
					held += fr.take()
					if ev == evNone {
						break
					}
					switch ev {
					case evBegin:
						fr.capture(4)
						log = fmt.Appendf(log, "begin %d;", fr.seq)
					case evCaptured:
						log = fmt.Appendf(log, "cap %x;", fr.buf)
						fr.capture(16)
					case evEnd:
						log = fmt.Appendf(log, "end %d %x;", fr.size, fr.buf)
					}
				}
				if len(q) != 0 {
					t.Fatal("evNone before the chunk was consumed")
				}
			}
			return string(log), held
		}
		whole, n := frame(0)
		split, m := frame(1 + int(chunk))
		if whole != split {
			t.Fatalf("chunking changed the packets:\n%s\n%s", whole, split)
		}
		if n != m || n > int64(len(data)) {
			t.Fatalf("counted %d and %d bytes of %d", n, m, len(data))
		}
	})
}

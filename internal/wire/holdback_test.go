package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// toy is a protocol for testing Holdback: a header of hl bytes (hl >= 2)
// is a type byte, the message's whole size in one byte, and padding. A
// size below hl does not frame. Messages of type 'X' are inspected:
// those whose body begins with 'r' become "Y" messages, those whose body
// begins with 'd' are dropped, and the others go on as they are.
type toy struct {
	hl     int
	starts []int // stream offsets where Start was called
	off    int   // stream offset of the current chunk
}

func (t *toy) holdback() *Holdback {
	return &Holdback{
		HeaderLen: t.hl,
		Header: func(h []byte) (int, bool) {
			return int(h[1]), h[0] == 'X'
		},
		Inspect: func(_ context.Context, msg []byte) ([]byte, bool) {
			switch body := msg[t.hl:]; {
			case len(body) > 0 && body[0] == 'r':
				return t.msg('Y', "replaced"), true
			case len(body) > 0 && body[0] == 'd':
				return nil, true
			}
			return nil, false
		},
		Start: func(before []byte) error {
			t.starts = append(t.starts, t.off+len(before))
			return nil
		},
	}
}

// msg encodes a message of type typ with body b.
func (t *toy) msg(typ byte, b string) []byte {
	m := make([]byte, t.hl, t.hl+len(b))
	m[0], m[1] = typ, byte(t.hl+len(b))
	return append(m, b...)
}

// reference rewrites the whole stream in one go, as the end of the
// stream leaves it, and returns where each header begins.
func (t *toy) reference(in []byte) (out []byte, starts []int) {
	h := t.holdback()
	off := 0
	for off < len(in) {
		starts = append(starts, off)
		m := in[off:]
		if len(m) < t.hl || int(m[1]) < t.hl {
			return append(out, m...), starts
		}
		size := int(m[1])
		if m[0] != 'X' || len(m) < size {
			n := min(size, len(m))
			out = append(out, m[:n]...)
			off += n
			continue
		}
		if r, ok := h.Inspect(context.Background(), m[:size]); ok {
			out = append(out, r...)
		} else {
			out = append(out, m[:size]...)
		}
		off += size
	}
	return out, starts
}

// run feeds the chunks, then the end of the stream, to a new Holdback
// and returns what it forwarded and where Start was called. Empty chunks
// are left out: an empty chunk is the end of the stream.
func (t *toy) run(tb testing.TB, chunks ...[]byte) ([]byte, []int) {
	tb.Helper()
	t.starts, t.off = nil, 0
	h := t.holdback()
	var out []byte
	for i, c := range append(chunks, nil) {
		if len(c) == 0 && i < len(chunks) {
			continue
		}
		b, err := h.Rewrite(context.Background(), c)
		if err != nil {
			tb.Fatalf("Rewrite: %v", err)
		}
		out = append(out, b...)
		t.off += len(c)
	}
	if b, _ := h.Rewrite(context.Background(), nil); len(b) != 0 {
		tb.Fatalf("second end of stream forwarded %q", b)
	}
	return out, t.starts
}

func TestHoldbackEverySplit(t *testing.T) {
	for _, hl := range []int{2, 5} {
		p := &toy{hl: hl}
		cat := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
		tests := []struct {
			name      string
			in, want  []byte
			wantStart int // Start calls
		}{
			{"empty", nil, nil, 0},
			{"untouched", cat(p.msg('A', "abc"), p.msg('X', "keep")), cat(p.msg('A', "abc"), p.msg('X', "keep")), 2},
			{"replaced", cat(p.msg('A', "abc"), p.msg('X', "rep"), p.msg('B', "")), cat(p.msg('A', "abc"), p.msg('Y', "replaced"), p.msg('B', "")), 3},
			{"dropped", cat(p.msg('X', "drop"), p.msg('X', "r")), p.msg('Y', "replaced"), 2},
			{"header only", p.msg('X', ""), p.msg('X', ""), 1},
			{"incomplete held", cat(p.msg('X', "r"), p.msg('X', "rrrr")[:hl+2]), cat(p.msg('Y', "replaced"), p.msg('X', "rrrr")[:hl+2]), 2},
			{"incomplete header", cat(p.msg('X', "r"), []byte{'X'}), cat(p.msg('Y', "replaced"), []byte{'X'}), 2},
			{"incomplete passed", cat(p.msg('A', "abcdef")[:hl+1]), p.msg('A', "abcdef")[:hl+1], 1},
			{"lost", cat(p.msg('X', "r"), []byte{'X', 1}, make([]byte, hl), p.msg('X', "r")), cat(p.msg('Y', "replaced"), []byte{'X', 1}, make([]byte, hl), p.msg('X', "r")), 2},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/hl%d", tt.name, hl), func(t *testing.T) {
				want, wantStarts := p.reference(tt.in)
				if !bytes.Equal(want, tt.want) || len(wantStarts) != tt.wantStart {
					t.Fatalf("reference: %q, starts %v", want, wantStarts)
				}
				check := func(name string, chunks ...[]byte) {
					t.Helper()
					got, starts := p.run(t, chunks...)
					if !bytes.Equal(got, want) {
						t.Fatalf("%s: forwarded %q, want %q", name, got, want)
					}
					if fmt.Sprint(starts) != fmt.Sprint(wantStarts) {
						t.Fatalf("%s: Start at %v, want %v", name, starts, wantStarts)
					}
				}
				check("whole", tt.in)
				var bytewise [][]byte
				for i := range tt.in {
					bytewise = append(bytewise, tt.in[i:i+1])
				}
				check("bytewise", bytewise...)
				for i := 0; i <= len(tt.in); i++ {
					for j := i; j <= len(tt.in); j++ {
						check(fmt.Sprintf("split %d %d", i, j), tt.in[:i], tt.in[i:j], tt.in[j:])
					}
				}
			})
		}
	}
}

// A chunk with nothing to change is forwarded as it is, without a copy,
// even when it holds a message Inspect declined.
func TestHoldbackPassThroughIsInput(t *testing.T) {
	p := &toy{hl: 2}
	in := bytes.Join([][]byte{p.msg('A', "abc"), p.msg('X', "keep"), p.msg('B', "")}, nil)
	got, err := p.holdback().Rewrite(context.Background(), in)
	if err != nil || len(got) != len(in) || &got[0] != &in[0] {
		t.Fatalf("Rewrite returned a copy or other bytes: %q, %v", got, err)
	}
}

// An error of Start ends the call with it.
func TestHoldbackStartError(t *testing.T) {
	p := &toy{hl: 2}
	h := p.holdback()
	boom := errors.New("boom")
	calls := 0
	h.Start = func([]byte) error {
		if calls++; calls == 2 {
			return boom
		}
		return nil
	}
	in := bytes.Join([][]byte{p.msg('A', "abc"), p.msg('X', "r")}, nil)
	if got, err := h.Rewrite(context.Background(), in); !errors.Is(err, boom) || got != nil {
		t.Fatalf("Rewrite = %q, %v; want nil, %v", got, err, boom)
	}
}

// A held message longer than the kept buffer is released whole.
func TestHoldbackLongMessage(t *testing.T) {
	const hl = 4
	long := make([]byte, keepBuffer+100)
	long[0], long[hl] = 'L', 'r'
	h := &Holdback{
		HeaderLen: hl,
		Header:    func(h []byte) (int, bool) { return len(long), h[0] == 'L' },
		Inspect:   func(_ context.Context, msg []byte) ([]byte, bool) { return []byte("short"), bytes.Equal(msg, long) },
	}
	for round := range 2 {
		var got []byte
		for i := 0; i < len(long); i += 1000 {
			b, err := h.Rewrite(context.Background(), long[i:min(i+1000, len(long))])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b...)
		}
		if string(got) != "short" {
			t.Fatalf("round %d: forwarded %d bytes %.20q", round, len(got), got)
		}
	}
}

func FuzzHoldback(f *testing.F) {
	p := &toy{hl: 2}
	f.Add(bytes.Join([][]byte{p.msg('A', "abc"), p.msg('X', "rep"), p.msg('X', "d")}, nil), []byte{1, 3, 2}, false)
	f.Add([]byte{'X', 1, 'X', 3, 'r'}, []byte{2}, false)
	f.Add([]byte{'X', 9, 0, 0, 'r', 'r', 'r', 'r', 'r'}, []byte{1, 1, 1, 1}, true)
	f.Add([]byte{'X', 5, 0}, []byte{}, true)
	f.Fuzz(func(t *testing.T, in, cuts []byte, long bool) {
		p := &toy{hl: 2}
		if long {
			p.hl = 4
		}
		var chunks [][]byte
		rest := in
		for _, c := range cuts {
			n := min(int(c), len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		chunks = append(chunks, rest)
		want, wantStarts := p.reference(in)
		got, starts := p.run(t, chunks...)
		if !bytes.Equal(got, want) {
			t.Fatalf("chunks %q: forwarded %q, want %q", chunks, got, want)
		}
		if fmt.Sprint(starts) != fmt.Sprint(wantStarts) {
			t.Fatalf("chunks %q: Start at %v, want %v", chunks, starts, wantStarts)
		}
	})
}

func BenchmarkHoldbackPassThrough(b *testing.B) {
	p := &toy{hl: 5}
	h := p.holdback()
	h.Start = nil
	in := bytes.Join([][]byte{p.msg('X', "SELECT c FROM sbtest1 WHERE id = 4711"), p.msg('S', "")}, nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := h.Rewrite(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

package toxics

import (
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/netem"
)

func TestNewToxic(t *testing.T) {
	cases := []struct {
		in    Toxic
		field string // "" for valid
		name  string
	}{
		{Toxic{Type: "latency", Toxicity: 1, Attributes: map[string]int64{"latency": 100, "jitter": 10}}, "", "latency_downstream"},
		{Toxic{Type: "latency", Stream: "upstream", Toxicity: 1}, "", "latency_upstream"},
		{Toxic{Name: "x", Type: "bandwidth", Toxicity: 0.5, Attributes: map[string]int64{"rate": 100}}, "", "x"},
		{Toxic{Type: "slicer", Toxicity: 1, Attributes: map[string]int64{"average_size": 10, "size_variation": 9}}, "", "slicer_downstream"},
		{Toxic{Type: "", Toxicity: 1}, "type", ""},
		{Toxic{Type: "nope", Toxicity: 1}, "type", ""},
		{Toxic{Type: "latency", Stream: "sideways", Toxicity: 1}, "stream", ""},
		{Toxic{Type: "latency", Toxicity: 1.5}, "toxicity", ""},
		{Toxic{Type: "latency", Toxicity: -0.1}, "toxicity", ""},
		{Toxic{Type: "latency", Toxicity: 1, Attributes: map[string]int64{"latency": -1}}, "attributes.latency", ""},
		{Toxic{Type: "latency", Toxicity: 1, Attributes: map[string]int64{"rate": 1}}, "attributes.rate", ""},
		{Toxic{Type: "timeout", Toxicity: 1, Attributes: map[string]int64{"timeout": maxMillis + 1}}, "attributes.timeout", ""},
		{Toxic{Type: "slicer", Toxicity: 1}, "attributes.average_size", ""},
		{Toxic{Type: "slicer", Toxicity: 1, Attributes: map[string]int64{"average_size": 10, "size_variation": 10}}, "attributes.size_variation", ""},
		{Toxic{Name: "a/b", Type: "latency", Toxicity: 1}, "name", ""},
		{Toxic{Name: "a\nb", Type: "latency", Toxicity: 1}, "name", ""},
	}
	for i, c := range cases {
		tx, err := newToxic(c.in)
		if c.field == "" {
			if err != nil {
				t.Errorf("case %d: %v", i, err)
				continue
			}
			if tx.name != c.name || len(tx.attrs) != len(kinds[c.in.Type].attrs) {
				t.Errorf("case %d: name %q attrs %v", i, tx.name, tx.attrs)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field || e.Status != 400 {
			t.Errorf("case %d: err %v, want a 400 naming %q", i, err, c.field)
		}
	}
}

func TestDecodeToxic(t *testing.T) {
	cases := []struct {
		body  string
		field string
		ok    bool
	}{
		{`{"type":"latency","attributes":{"latency":100,"jitter":1e1}}`, "", true},
		{`{"type":"latency","attributes":{"latency":100.0}}`, "", true},
		{`{"type":"latency","attributes":{"latency":10.5}}`, "attributes.latency", false},
		{`{"type":"latency","attributes":{"latency":"100"}}`, "attributes.latency", false},
		{`{"type":"latency","toxicity":"high"}`, "toxicity", false},
		{`{"type":7}`, "type", false},
		{`{"type":"latency"} {}`, "", false},
		{`[`, "", false},
		{`{"type":"latency","unknown_top_level":1}`, "", true},
	}
	for _, c := range cases {
		_, _, err := decodeToxic([]byte(c.body))
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.body, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field || e.Status != 400 {
			t.Errorf("%s: err %v (field %q), want 400 naming %q", c.body, err, fieldOf(err), c.field)
		}
	}
}

func fieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// TestSlice checks that the cuts cover the input in order and that every
// piece but the ones of a short input is within the variation of the
// average, as Toxiproxy's slicer promises.
func TestSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, avg, vari int }{{1, 1, 0}, {100, 10, 0}, {1000, 100, 50}, {32768, 7, 3}, {5, 100, 10}} {
		cuts := slice(nil, 0, c.n, c.avg, c.vari, r)
		prev := 0
		for _, end := range cuts {
			if end <= prev {
				t.Fatalf("%+v: cuts %v not increasing", c, cuts)
			}
			if size := end - prev; c.n > c.avg+c.vari && (size > c.avg+c.vari || size < (c.avg-c.vari)/2) {
				t.Fatalf("%+v: piece of %d bytes", c, size)
			}
			prev = end
		}
		if prev != c.n {
			t.Fatalf("%+v: cuts end at %d", c, prev)
		}
	}
}

func TestPathParams(t *testing.T) {
	mk := func(kind string, on bool, attrs map[string]int64) *applied {
		return &applied{t: &toxic{kind: kind, attrs: attrs}, on: on}
	}
	p := pathParams([]*applied{
		mk("latency", true, map[string]int64{"latency": 100, "jitter": 10}),
		mk("latency", true, map[string]int64{"latency": 50, "jitter": 0}),
		mk("latency", false, map[string]int64{"latency": 1000}),
		mk("bandwidth", true, map[string]int64{"rate": 300}),
		mk("bandwidth", true, map[string]int64{"rate": 0}),
		mk("bandwidth", true, map[string]int64{"rate": 200}),
		mk("slicer", true, map[string]int64{"average_size": 1}),
	})
	want := netem.Params{Delay: 150 * time.Millisecond, Jitter: 10 * time.Millisecond, Rate: 200_000}
	if p != want {
		t.Fatalf("params %+v, want %+v", p, want)
	}
}

// discard is a net.Conn that accepts every write.
type discard struct{ net.Conn }

func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Close() error                { return nil }

func benchConn(b *testing.B, ts []*toxic) *conn {
	px := &proxyState{conns: map[*conn]struct{}{}}
	px.chain.Store(&chain{version: 1, toxics: ts})
	c := newConn(px, Downstream, discard{}, clock.Real{}, func() float64 { return 0 })
	c.refresh()
	b.Cleanup(func() { c.Close() })
	return c
}

func BenchmarkConnWrite(b *testing.B) {
	p := make([]byte, 16<<10)
	b.Run("none", func(b *testing.B) {
		c := benchConn(b, nil)
		b.SetBytes(int64(len(p)))
		b.ReportAllocs()
		for b.Loop() {
			c.Write(p)
		}
	})
	b.Run("limit_data", func(b *testing.B) {
		c := benchConn(b, []*toxic{{id: 1, gen: 1, kind: "limit_data", stream: Downstream, toxicity: 1, attrs: map[string]int64{"bytes": 1 << 62}}})
		b.SetBytes(int64(len(p)))
		b.ReportAllocs()
		for b.Loop() {
			c.Write(p)
		}
	})
	b.Run("slicer", func(b *testing.B) {
		c := benchConn(b, []*toxic{{id: 1, gen: 1, kind: "slicer", stream: Downstream, toxicity: 1, attrs: map[string]int64{"average_size": 1024, "size_variation": 256}}})
		b.SetBytes(int64(len(p)))
		b.ReportAllocs()
		for b.Loop() {
			c.Write(p)
		}
	})
}

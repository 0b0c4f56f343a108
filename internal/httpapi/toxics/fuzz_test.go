package toxics

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeToxic feeds arbitrary bodies to the toxic decoder: it never
// panics, every error is a 400, and a toxic it accepts round-trips
// through its API form.
func FuzzDecodeToxic(f *testing.F) {
	for _, s := range []string{
		`{"type":"latency","attributes":{"latency":100,"jitter":10}}`,
		`{"name":"bw","type":"bandwidth","stream":"upstream","toxicity":0.5,"attributes":{"rate":100}}`,
		`{"type":"slicer","attributes":{"average_size":10,"size_variation":5,"delay":100}}`,
		`{"type":"limit_data","attributes":{"bytes":1e3}}`,
		`{"type":"timeout","attributes":{"timeout":-1}}`,
		`{"type":"reset_peer","toxicity":2}`,
		`{"type":"slow_close","attributes":{"delay":"x"}}`,
		`{"attributes":[]}`, `[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, toxicity, err := decodeToxic(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("decode error %v is not a 400", err)
			}
			return
		}
		if toxicity == nil {
			in.Toxicity = 1
		}
		tx, err := newToxic(in)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("validation error %v is not a 400", err)
			}
			return
		}
		out, err := json.Marshal(tx.view())
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := decodeToxic(out)
		if err != nil {
			t.Fatalf("own output %s does not decode: %v", out, err)
		}
		tx2, err := newToxic(again)
		if err != nil {
			t.Fatalf("own output %s is refused: %v", out, err)
		}
		if tx2.name != tx.name || tx2.kind != tx.kind || tx2.stream != tx.stream || tx2.toxicity != tx.toxicity || len(tx2.attrs) != len(tx.attrs) {
			t.Fatalf("round trip changed the toxic: %+v -> %+v", tx, tx2)
		}
		for k, v := range tx.attrs {
			if tx2.attrs[k] != v {
				t.Fatalf("round trip changed attribute %s: %d -> %d", k, v, tx2.attrs[k])
			}
		}
	})
}

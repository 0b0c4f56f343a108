package toxics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/netem"
)

// Stream names, as Toxiproxy spells them. Upstream is the bytes the
// client sends to the server; Downstream the bytes the server sends back.
const (
	Upstream   = "upstream"
	Downstream = "downstream"
)

// Toxic is a toxic as the Toxiproxy API shows it. Attributes are integers
// in the units of the toxic's type (see the package documentation).
type Toxic struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Stream   string  `json:"stream"`
	Toxicity float64 `json:"toxicity"`
	// Attributes holds every attribute of the type, set or not.
	Attributes map[string]int64 `json:"attributes"`
}

// Error is an API error: an HTTP status, a message and, when one field
// of the request is to blame, its name ("upstream", "attributes.latency").
// It encodes as Toxiproxy's error body plus the field.
type Error struct {
	Status  int    `json:"status"`
	Message string `json:"error"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

func errorf(status int, field, format string, args ...any) *Error {
	return &Error{Status: status, Field: field, Message: fmt.Sprintf(format, args...)}
}

// attr describes one attribute of a toxic type.
type attr struct {
	name string
	unit string // for messages
	min  int64
}

// kind is a toxic type.
type kind struct {
	name  string
	attrs []attr
}

// kinds are the toxic types, by name.
var kinds = map[string]kind{
	"latency":    {"latency", []attr{{"latency", "milliseconds", 0}, {"jitter", "milliseconds", 0}}},
	"bandwidth":  {"bandwidth", []attr{{"rate", "KB/s (1000 bytes per second)", 0}}},
	"timeout":    {"timeout", []attr{{"timeout", "milliseconds", 0}}},
	"reset_peer": {"reset_peer", []attr{{"timeout", "milliseconds", 0}}},
	"slow_close": {"slow_close", []attr{{"delay", "milliseconds", 0}}},
	"slicer":     {"slicer", []attr{{"average_size", "bytes", 1}, {"size_variation", "bytes", 0}, {"delay", "microseconds", 0}}},
	"limit_data": {"limit_data", []attr{{"bytes", "bytes", 0}}},
}

// kindNames returns the toxic type names, sorted.
func kindNames() []string {
	return slices.Sorted(maps.Keys(kinds))
}

func (k kind) attrNames() []string {
	out := make([]string, len(k.attrs))
	for i, a := range k.attrs {
		out[i] = a.name
	}
	return out
}

// maxMillis bounds attributes in milliseconds (and microseconds): about
// 106 days, far beyond any use, and safe to turn into a time.Duration.
const maxMillis = math.MaxInt64 / int64(time.Millisecond) / 1000

// toxic is the definition of one toxic of one proxy. It is never
// modified once published in a chain; an update publishes a copy with a
// new generation.
type toxic struct {
	id       uint64 // identity for per-connection state; kept by updates
	gen      uint64 // changes with every update; a new draw of the toxicity
	name     string
	kind     string
	stream   string
	toxicity float64
	attrs    map[string]int64
}

func (t *toxic) attr(name string) int64 { return t.attrs[name] }

// millis returns attribute name as a duration in milliseconds.
func (t *toxic) millis(name string) time.Duration {
	return time.Duration(t.attrs[name]) * time.Millisecond
}

// view returns the API form of t.
func (t *toxic) view() Toxic {
	a := make(map[string]int64, len(t.attrs))
	for k, v := range t.attrs {
		a[k] = v
	}
	return Toxic{Name: t.name, Type: t.kind, Stream: t.stream, Toxicity: t.toxicity, Attributes: a}
}

// newToxic validates a toxic to be created: the type must exist, stream
// defaults to downstream, the name to type_stream, toxicity must be in
// [0, 1], and the attributes must belong to the type and be in range.
// Missing attributes are 0.
func newToxic(in Toxic) (*toxic, error) {
	k, ok := kinds[in.Type]
	if !ok {
		if in.Type == "" {
			return nil, errorf(http.StatusBadRequest, "type", "missing required field: type (want one of %s)", strings.Join(kindNames(), ", "))
		}
		return nil, errorf(http.StatusBadRequest, "type", "invalid toxic type %q (want one of %s)", in.Type, strings.Join(kindNames(), ", "))
	}
	stream := in.Stream
	switch stream {
	case "":
		stream = Downstream
	case Upstream, Downstream:
	default:
		return nil, errorf(http.StatusBadRequest, "stream", "stream %q is invalid: it can be either upstream or downstream", in.Stream)
	}
	if err := checkToxicity(in.Toxicity); err != nil {
		return nil, err
	}
	name := in.Name
	if name == "" {
		name = in.Type + "_" + stream
	}
	if err := checkName(name, "name"); err != nil {
		return nil, err
	}
	t := &toxic{name: name, kind: k.name, stream: stream, toxicity: in.Toxicity, attrs: make(map[string]int64, len(k.attrs))}
	for _, a := range k.attrs {
		t.attrs[a.name] = 0
	}
	if err := t.apply(in.Attributes); err != nil {
		return nil, err
	}
	return t, nil
}

// apply sets attributes on t (which must not be published yet) and
// validates the result.
func (t *toxic) apply(attrs map[string]int64) error {
	k := kinds[t.kind]
	for _, n := range slices.Sorted(maps.Keys(attrs)) {
		var a *attr
		for i := range k.attrs {
			if k.attrs[i].name == n {
				a = &k.attrs[i]
			}
		}
		if a == nil {
			return errorf(http.StatusBadRequest, "attributes."+n, "unknown attribute %q of toxic type %s (valid: %s)", n, t.kind, strings.Join(k.attrNames(), ", "))
		}
		v := attrs[n]
		if v < a.min {
			return errorf(http.StatusBadRequest, "attributes."+n, "attribute %s of toxic type %s must be at least %d %s, not %d", n, t.kind, a.min, a.unit, v)
		}
		if v > maxMillis && (strings.HasSuffix(a.unit, "seconds")) {
			return errorf(http.StatusBadRequest, "attributes."+n, "attribute %s of toxic type %s is too large: %d %s", n, t.kind, v, a.unit)
		}
		t.attrs[n] = v
	}
	if t.kind == "slicer" {
		if t.attrs["average_size"] < 1 {
			return errorf(http.StatusBadRequest, "attributes.average_size", "attribute average_size of toxic type slicer must be at least 1 byte")
		}
		if t.attrs["size_variation"] >= t.attrs["average_size"] {
			return errorf(http.StatusBadRequest, "attributes.size_variation", "attribute size_variation of toxic type slicer (%d) must be smaller than average_size (%d)", t.attrs["size_variation"], t.attrs["average_size"])
		}
	}
	return nil
}

func checkToxicity(v float64) error {
	if !(v >= 0 && v <= 1) {
		return errorf(http.StatusBadRequest, "toxicity", "toxicity %v is invalid: want a probability between 0 and 1", v)
	}
	return nil
}

// checkName refuses names that cannot be addressed in a URL path
// segment: empty, containing '/', or with control characters.
func checkName(name, field string) error {
	if name == "" {
		return errorf(http.StatusBadRequest, field, "missing required field: %s", field)
	}
	if len(name) > 200 {
		return errorf(http.StatusBadRequest, field, "%s is too long (%d bytes, at most 200)", field, len(name))
	}
	for _, r := range name {
		if r == '/' || r < 0x20 || r == 0x7f {
			return errorf(http.StatusBadRequest, field, "%s %q is invalid: it may not contain '/' or control characters", field, name)
		}
	}
	return nil
}

// toxicInput is the JSON body of a toxic creation or update. Unknown
// top-level fields are ignored, as Toxiproxy does; unknown attributes
// are refused.
type toxicInput struct {
	Name       string                     `json:"name"`
	Type       string                     `json:"type"`
	Stream     string                     `json:"stream"`
	Toxicity   *float64                   `json:"toxicity"`
	Attributes map[string]json.RawMessage `json:"attributes"`
}

// decodeToxic decodes a toxic creation or update body. Toxicity is nil
// when the body does not set it.
func decodeToxic(body []byte) (Toxic, *float64, error) {
	var in toxicInput
	if err := decodeJSON(body, &in); err != nil {
		return Toxic{}, nil, err
	}
	attrs, err := decodeAttributes(in.Attributes)
	if err != nil {
		return Toxic{}, nil, err
	}
	t := Toxic{Name: in.Name, Type: in.Type, Stream: in.Stream, Attributes: attrs}
	if in.Toxicity != nil {
		t.Toxicity = *in.Toxicity
	}
	return t, in.Toxicity, nil
}

// decodeAttributes reads attribute values, which must be integers.
func decodeAttributes(raw map[string]json.RawMessage) (map[string]int64, error) {
	out := make(map[string]int64, len(raw))
	for k, v := range raw {
		s := strings.TrimSpace(string(v))
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			// Integral numbers written with an exponent or ".0".
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
				return nil, errorf(http.StatusBadRequest, "attributes."+k, "attribute %s: want an integer, got %s", k, clip(s))
			}
			n = int64(f)
		}
		out[k] = n
	}
	return out, nil
}

// decodeJSON decodes one JSON value from body into v, with an error that
// names the offending field when the decoder knows it.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errorf(http.StatusBadRequest, te.Field, "bad request body: field %s: want a JSON %s, got %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return errorf(http.StatusBadRequest, "", "bad request body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "", "bad request body: more than one JSON value")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "map", "struct":
		return "object"
	case "slice", "array":
		return "array"
	}
	return "number"
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// pathParams returns the emulation the latency and bandwidth toxics among
// ts ask for: delays and jitters add up (each toxic is one more stage of
// the chain), the lowest rate wins.
func pathParams(ts []*applied) netem.Params {
	var p netem.Params
	for _, a := range ts {
		if !a.on {
			continue
		}
		switch a.t.kind {
		case "latency":
			p.Delay += a.t.millis("latency")
			p.Jitter += a.t.millis("jitter")
		case "bandwidth":
			if r := a.t.attr("rate") * 1000; r > 0 && (p.Rate == 0 || r < p.Rate) {
				p.Rate = r
			}
		}
	}
	return p
}

// slice cuts b into pieces of about average bytes, each within variation
// of it, as Toxiproxy's slicer does: halves around a random middle until
// a piece is small enough. It appends the cut offsets (after 0, up to and
// including len(b)) to cuts.
func slice(cuts []int, start, end, average, variation int, r *rand.Rand) []int {
	if end-start-average <= variation {
		return append(cuts, end)
	}
	mid := start + (end-start)/2
	if variation > 0 {
		mid += r.IntN(variation*2) - variation
	}
	cuts = slice(cuts, start, mid, average, variation, r)
	return slice(cuts, mid, end, average, variation, r)
}

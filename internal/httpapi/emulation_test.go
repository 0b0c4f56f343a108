package httpapi_test

import (
	"encoding/json"
	"testing"
)

// TestLinkEmulationEveryOption: a link with every emulation option set
// shows each of them in GET /api/links as the console spells it, a
// Gilbert-Elliott loss model included.
func TestLinkEmulationEveryOption(t *testing.T) {
	s := newStack(t, stackOptions{})
	for _, tt := range []struct {
		name string
		body map[string]any
		want map[string]string
	}{
		{"every", map[string]any{"name": "every", "delay": "10ms", "jitter": "1ms", "distribution": "normal", "correlation": "0.25",
			"rate": "10MB", "burst": "64KiB", "loss": "0.5%", "rto": "200ms", "window": "1MiB", "seed": "7"},
			map[string]string{"delay": "10ms", "jitter": "1ms", "distribution": "normal", "correlation": "0.25",
				"rate": "10MB/s", "burst": "64KiB", "loss": "0.5%", "rto": "200ms", "window": "1MiB", "seed": "7"}},
		{"ge", map[string]any{"name": "ge", "loss": "gemodel 1% 25%"}, map[string]string{"loss": "gemodel 1% 25% 100% 0%"}},
	} {
		if code, body := s.do(t, "POST", "/api/links", tt.body); code != 201 {
			t.Fatalf("%s: POST /api/links: %d %s", tt.name, code, body)
		}
		code, body := s.do(t, "GET", "/api/links/"+tt.name, nil)
		if code != 200 {
			t.Fatalf("%s: GET: %d %s", tt.name, code, body)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		for k, want := range tt.want {
			if got[k] != want {
				t.Errorf("%s: %s = %v, want %q (body %s)", tt.name, k, got[k], want, body)
			}
		}
	}
}

package netem

import (
	"encoding"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseNames(t *testing.T) {
	parse := map[string]func(string) (fmt.Stringer, error){
		"distribution": func(s string) (fmt.Stringer, error) { return ParseDistribution(s) },
		"loss":         func(s string) (fmt.Stringer, error) { return ParseLossKind(s) },
	}
	tests := []struct {
		kind, in string
		want     string // the String of the value parsed, "" for an error
	}{
		{"distribution", "uniform", "uniform"},
		{"distribution", "normal", "normal"},
		{"distribution", "pareto", "pareto"},
		{"distribution", "paretonormal", "paretonormal"},
		{"distribution", " Normal ", "normal"},
		{"distribution", "PARETONORMAL", "paretonormal"},
		{"distribution", "", ""},
		{"distribution", "gauss", ""},
		{"distribution", "pareto-normal", ""},
		{"distribution", "uniform\x00", ""},
		{"loss", "bernoulli", "bernoulli"},
		{"loss", "random", "bernoulli"},
		{"loss", "gemodel", "gemodel"},
		{"loss", "Gilbert-Elliott", "gemodel"},
		{"loss", "gilbertelliott", "gemodel"},
		{"loss", "state", ""},
		{"loss", "", ""},
	}
	for _, tt := range tests {
		v, err := parse[tt.kind](tt.in)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s %q parsed to %v, want an error", tt.kind, tt.in, v)
		case tt.want != "" && (err != nil || v.String() != tt.want):
			t.Errorf("%s %q parsed to %v, %v; want %s", tt.kind, tt.in, v, err, tt.want)
		}
	}
}

func TestTextRoundTrip(t *testing.T) {
	for d := Uniform; d <= ParetoNormal; d++ {
		checkTextRoundTrip(t, d)
	}
	for k := Bernoulli; k <= GilbertElliott; k++ {
		checkTextRoundTrip(t, k)
	}
	if _, err := Distribution(9).MarshalText(); err == nil {
		t.Error("unknown distribution marshalled")
	}
	if _, err := LossKind(9).MarshalText(); err == nil {
		t.Error("unknown loss kind marshalled")
	}
	if got := Distribution(9).String(); got != "Distribution(9)" {
		t.Errorf("String = %q", got)
	}
}

// checkTextRoundTrip checks that v unmarshals from its own MarshalText.
func checkTextRoundTrip[T interface {
	comparable
	encoding.TextMarshaler
}, PT interface {
	*T
	encoding.TextUnmarshaler
}](t *testing.T, v T) {
	t.Helper()
	b, err := v.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	var back T
	if err := PT(&back).UnmarshalText(b); err != nil || back != v {
		t.Errorf("%v: round trip gave %v, %v", v, back, err)
	}
}

func FuzzParseDistribution(f *testing.F) {
	for _, s := range []string{"uniform", "normal", "pareto", "paretonormal", " Normal", "", "x", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, ok := checkReparse(t, s, ParseDistribution); ok && !strings.EqualFold(strings.TrimSpace(s), d.String()) {
			t.Fatalf("%q parsed to %v", s, d)
		}
	})
}

func FuzzParseLossKind(f *testing.F) {
	for _, s := range []string{"bernoulli", "random", "gemodel", "gilbert-elliott", "GEMODEL ", "", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkReparse(t, s, ParseLossKind) })
}

// checkReparse parses s and, if that succeeds, checks that the value's
// String parses back to it; it returns the value and whether s parsed.
func checkReparse[T interface {
	comparable
	fmt.Stringer
}](t *testing.T, s string, parse func(string) (T, error)) (T, bool) {
	t.Helper()
	v, err := parse(s)
	if err != nil {
		return v, false
	}
	back, err := parse(v.String())
	if err != nil || back != v {
		t.Fatalf("%q parsed to %v, which does not round-trip: %v, %v", s, v, back, err)
	}
	return v, true
}

func TestIsZero(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		want bool
	}{
		{"zero", Params{}, true},
		{"only window, seed, rto, shape", Params{Window: 1 << 20, Seed: 3, RTO: time.Second, Distribution: Pareto, Correlation: 0.5, Burst: 100}, true},
		{"negative delay", Params{Delay: -time.Millisecond}, true},
		{"delay", Params{Delay: time.Microsecond}, false},
		{"jitter", Params{Jitter: time.Millisecond}, false},
		{"rate", Params{Rate: 1}, false},
		{"loss", Params{Loss: 0.01}, false},
		{"gemodel without p", Params{LossModel: LossModel{Kind: GilbertElliott}}, true},
		{"gemodel p", Params{LossModel: LossModel{Kind: GilbertElliott, P: 0.01}}, false},
		{"gemodel good loss", Params{LossModel: LossModel{Kind: GilbertElliott, GoodLoss: 0.01}}, false},
		{"gemodel ignores Loss", Params{Loss: 0.5, LossModel: LossModel{Kind: GilbertElliott}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.IsZero(); got != tt.want {
				t.Errorf("IsZero = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Params
		want Params
	}{
		{
			name: "zero",
			in:   Params{},
			want: Params{RTO: MinRTO, Window: DefaultWindow, LossModel: LossModel{R: 1, BadLoss: 1}},
		},
		{
			name: "burst is a millisecond of rate",
			in:   Params{Rate: 50e6, Delay: 10 * time.Millisecond},
			want: Params{Rate: 50e6, Burst: 50e3, Delay: 10 * time.Millisecond, RTO: 220 * time.Millisecond, Window: DefaultWindow, LossModel: LossModel{R: 1, BadLoss: 1}},
		},
		{
			name: "burst at least one segment",
			in:   Params{Rate: 1e5},
			want: Params{Rate: 1e5, Burst: MSS, RTO: MinRTO, Window: DefaultWindow, LossModel: LossModel{R: 1, BadLoss: 1}},
		},
		{
			name: "jitter widens rto",
			in:   Params{Delay: 50 * time.Millisecond, Jitter: 40 * time.Millisecond},
			want: Params{Delay: 50 * time.Millisecond, Jitter: 40 * time.Millisecond, RTO: 420 * time.Millisecond, Window: DefaultWindow, LossModel: LossModel{R: 1, BadLoss: 1}},
		},
		{
			name: "gemodel r defaults to 1-p, clamps",
			in:   Params{Loss: 2, Correlation: -1, Jitter: -1, LossModel: LossModel{Kind: GilbertElliott, P: 0.25, GoodLoss: math.NaN()}},
			want: Params{Loss: 1, RTO: MinRTO, Window: DefaultWindow, LossModel: LossModel{Kind: GilbertElliott, P: 0.25, R: 0.75, BadLoss: 1}},
		},
		{
			name: "explicit values kept",
			in:   Params{Rate: 1e6, Burst: 7, RTO: time.Second, Window: 10, LossModel: LossModel{R: 0.5, BadLoss: 0.5}},
			want: Params{Rate: 1e6, Burst: 7, RTO: time.Second, Window: 10, LossModel: LossModel{R: 0.5, BadLoss: 0.5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Errorf("\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		p       Params
		wantErr string
	}{
		{"zero", Params{}, ""},
		{"full", Params{Delay: 1, Jitter: 1, Distribution: ParetoNormal, Correlation: 1, Rate: 1, Burst: 1, Loss: 1, RTO: 1, Window: 1, LossModel: LossModel{Kind: GilbertElliott, P: 1, R: 1, BadLoss: 1, GoodLoss: 1}}, ""},
		{"negative delay", Params{Delay: -1}, "delay"},
		{"negative jitter", Params{Jitter: -1}, "jitter"},
		{"negative rto", Params{RTO: -1}, "rto"},
		{"negative rate", Params{Rate: -1}, "rate"},
		{"negative burst", Params{Burst: -1}, "burst"},
		{"negative window", Params{Window: -1}, "window"},
		{"correlation above 1", Params{Correlation: 1.5}, "correlation"},
		{"loss NaN", Params{Loss: math.NaN()}, "loss"},
		{"gemodel p", Params{LossModel: LossModel{P: -0.1}}, "gemodel p"},
		{"gemodel good loss", Params{LossModel: LossModel{GoodLoss: 2}}, "good-state"},
		{"distribution", Params{Distribution: 4}, "distribution"},
		{"loss model", Params{LossModel: LossModel{Kind: 2}}, "loss model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

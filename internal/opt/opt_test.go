package opt

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	tests := []struct {
		v, def, want time.Duration
	}{
		{0, time.Second, time.Second},
		{-1, time.Second, time.Second},
		{1, time.Second, 1},
		{time.Minute, time.Second, time.Minute},
	}
	for _, tt := range tests {
		if got := Positive(tt.v, tt.def); got != tt.want {
			t.Errorf("Positive(%v, %v) = %v, want %v", tt.v, tt.def, got, tt.want)
		}
	}
	if got := Positive(0.0, 0.5); got != 0.5 {
		t.Errorf("Positive(0.0, 0.5) = %v, want 0.5", got)
	}
}

package panics

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func run(f func()) (err error) {
	defer Catch("test", &err)
	f()
	return io.ErrUnexpectedEOF
}

func TestCatch(t *testing.T) {
	tests := []struct {
		name    string
		f       func()
		want    string // Error(); "" means the function's own error
		wrapped error  // errors.Is target
	}{
		{"no panic", func() {}, "", io.ErrUnexpectedEOF},
		{"string", func() { panic("boom") }, "panic in test: boom", nil},
		{"error", func() { panic(io.ErrClosedPipe) }, "panic in test: io: read/write on closed pipe", io.ErrClosedPipe},
		{"nil pointer", func() { var p *struct{ n int }; p.n++ }, "panic in test: runtime error: invalid memory address or nil pointer dereference", nil},
		{"index", func() { var s []int; _ = s[len(s)+1] }, "panic in test: runtime error: index out of range [1] with length 0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.f)
			pe := As(err)
			if tt.want == "" {
				if pe != nil || err != io.ErrUnexpectedEOF {
					t.Fatalf("err %v, want the function's own", err)
				}
				return
			}
			if pe == nil {
				t.Fatalf("err %v is no *Error", err)
			}
			if err.Error() != tt.want {
				t.Errorf("Error() %q, want %q", err.Error(), tt.want)
			}
			if !strings.Contains(string(pe.Stack), "panics.TestCatch") {
				t.Errorf("stack does not name the panicking test:\n%s", pe.Stack)
			}
			if tt.wrapped != nil && !errors.Is(err, tt.wrapped) {
				t.Errorf("errors.Is(%v, %v) false", err, tt.wrapped)
			}
		})
	}
}

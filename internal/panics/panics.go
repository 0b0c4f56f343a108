package panics

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Error is a recovered panic.
type Error struct {
	Where string // the goroutine's role, e.g. "up pump"
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack, as debug.Stack prints it
}

func (e *Error) Error() string { return fmt.Sprintf("panic in %s: %v", e.Where, e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see through a panic(err).
func (e *Error) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Catch recovers a panic of the calling goroutine and stores it in *err as
// an *Error. It must be deferred directly:
//
//	func run() (err error) {
//		defer panics.Catch("up pump", &err)
//		...
//	}
//
// Without a panic it leaves *err alone. A panic replaces whatever error the
// function was returning.
func Catch(where string, err *error) {
	if v := recover(); v != nil {
		*err = Recovered(where, v)
	}
}

// Recovered returns the *Error of v, a value just returned by recover in
// a function deferred by the panicking goroutine (where the stack still
// holds the panic's frames).
func Recovered(where string, v any) *Error {
	return &Error{Where: where, Value: v, Stack: debug.Stack()}
}

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

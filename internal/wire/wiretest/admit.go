package wiretest

// This file holds the pieces of the protocol packages' admission tests
// that do not depend on the protocol: an Admitter that answers at once,
// a rig that drives a session's observers under admission without a
// proxy, and the runner of their step tables.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// ErrQueueTimeout is what Admitter refuses with: a 57014 with a message
// of its own, as the workload manager's errors are.
var ErrQueueTimeout error = queueTimeout{}

type queueTimeout struct{}

func (queueTimeout) Error() string {
	return "57014: canceling statement due to statement queue timeout"
}
func (queueTimeout) SQLState() string { return "57014" }

// Admitter is a wire.Admitter that admits or refuses at once and counts
// the slots held. It is used by one goroutine.
type Admitter struct {
	Refuse  func(st *session.Statement) bool // true refuses with ErrQueueTimeout; nil refuses nothing
	Asked   []string                         // SQL of each statement asked for
	Held    int                              // slots held now
	MaxHeld int                              // most slots held at once
}

var _ wire.Admitter = (*Admitter)(nil)

// Admit implements wire.Admitter as described on Admitter.
func (a *Admitter) Admit(_ context.Context, st *session.Statement) (func(), error) {
	a.Asked = append(a.Asked, st.SQL)
	if a.Refuse != nil && a.Refuse(st) {
		return nil, ErrQueueTimeout
	}
	a.Held++
	a.MaxHeld = max(a.MaxHeld, a.Held)
	done := false
	return func() {
		if !done {
			done = true
			a.Held--
		}
	}, nil
}

// AdmitRig is one session's observers under admission, without a proxy:
// client bytes go through Up, server bytes through Down, and sluice's own
// answers are taken from Inj as the down pump takes them. The protocol
// packages build its fields.
type AdmitRig struct {
	T    testing.TB
	Adm  *Admitter
	Gate *wire.Gate
	Up   wire.Rewriter
	Down wire.Observer
	Inj  wire.Injector

	Forwarded []byte // what went upstream
	Answered  []byte // what sluice answered itself
}

// Client sends b through Up in chunks of the given sizes in bytes (0 or
// past the end: the rest), then drains sluice's answers after each.
func (r *AdmitRig) Client(b []byte, sizes ...int) error {
	for len(b) > 0 {
		n := len(b)
		if len(sizes) > 0 {
			if sizes[0] > 0 && sizes[0] < n {
				n = sizes[0]
			}
			sizes = sizes[1:]
		}
		out, err := r.Up.Rewrite(context.Background(), b[:n])
		if err != nil {
			return err
		}
		r.Forwarded = append(r.Forwarded, out...)
		b = b[n:]
		r.drain()
	}
	return nil
}

// Server delivers the server's bytes, then what sluice answers.
func (r *AdmitRig) Server(b []byte) {
	r.T.Helper()
	if err := r.Down.Observe(b); err != nil {
		r.T.Fatalf("server observe: %v", err)
	}
	r.drain()
}

// drain takes sluice's answers as the down pump does: observed, then
// sent.
func (r *AdmitRig) drain() {
	for b := r.Inj.Pending(); len(b) > 0; b = r.Inj.Pending() {
		b = bytes.Clone(b)
		if err := r.Down.Observe(b); err != nil {
			r.T.Fatalf("observe sluice's answer: %v", err)
		}
		r.Answered = append(r.Answered, b...)
	}
}

// Sizes returns a fuzzer's chunk sizes as Client takes them.
func Sizes(chunks []byte) []int {
	sizes := make([]int, len(chunks))
	for k, c := range chunks {
		sizes[k] = int(c)
	}
	return sizes
}

// Finish fails the test unless everything forwarded is wantFwd and
// everything sluice answered is wantAns, and, when idle, no slot is held;
// then it closes the gate and fails unless no slot is held after it.
func (r *AdmitRig) Finish(wantFwd, wantAns []byte, idle bool) {
	r.T.Helper()
	if !bytes.Equal(r.Forwarded, wantFwd) {
		r.T.Fatalf("forwarded\n %q\nwant\n %q", r.Forwarded, wantFwd)
	}
	if !bytes.Equal(r.Answered, wantAns) {
		r.T.Fatalf("answered\n %q\nwant\n %q", r.Answered, wantAns)
	}
	if idle && r.Adm.Held != 0 {
		r.T.Fatalf("idle session holds %d slots", r.Adm.Held)
	}
	r.Gate.Close()
	if r.Adm.Held != 0 {
		r.T.Fatalf("%d slots after Close", r.Adm.Held)
	}
}

// AdmitStep is one exchange of an admission scenario.
type AdmitStep struct {
	Cli, Srv []byte // client bytes sent, then server bytes answered
	Fwd      []byte // client bytes expected upstream after Cli
	Answered []byte // sluice's answers expected after Srv (nil: none)
	Held     int    // slots held after the step
}

// AdmitCase is an admission scenario: its steps, with the statements
// whose SQL is in Refuse refused, and the SQL of every statement
// admission is asked for, in order.
type AdmitCase struct {
	Name   string
	Refuse []string
	Steps  []AdmitStep
	Asked  []string
}

// RunAdmitCases runs each case on a rig from newRig, once whole and, but
// under -short, once with the client's bytes cut at every offset. Each
// step's forwarded bytes, sluice's answers and slots held must be as the
// step says; the session must never hold more than one slot, and none
// once its gate is closed.
func RunAdmitCases(t *testing.T, tests []AdmitCase, newRig func(t *testing.T) *AdmitRig) {
	for _, tt := range tests {
		var whole []byte
		for _, s := range tt.Steps {
			whole = append(whole, s.Cli...)
		}
		for cut := -1; cut < len(whole); cut++ {
			name := tt.Name
			if cut >= 0 {
				name = fmt.Sprintf("%s/cut%d", tt.Name, cut)
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t)
				r.Adm.Refuse = func(st *session.Statement) bool { return slices.Contains(tt.Refuse, st.SQL) }
				sent := 0
				for i, s := range tt.Steps {
					var sizes []int
					if cut > sent && cut < sent+len(s.Cli) {
						sizes = []int{cut - sent}
					}
					sent += len(s.Cli)
					r.Forwarded, r.Answered = nil, nil
					if err := r.Client(s.Cli, sizes...); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if !bytes.Equal(r.Forwarded, s.Fwd) {
						t.Fatalf("step %d: forwarded %q, want %q", i, r.Forwarded, s.Fwd)
					}
					r.Server(s.Srv)
					if !bytes.Equal(r.Answered, s.Answered) {
						t.Fatalf("step %d: sluice answered %q, want %q", i, r.Answered, s.Answered)
					}
					if r.Adm.Held != s.Held {
						t.Fatalf("step %d: %d slots held, want %d", i, r.Adm.Held, s.Held)
					}
				}
				if fmt.Sprint(r.Adm.Asked) != fmt.Sprint(tt.Asked) {
					t.Fatalf("admission asked for %q, want %q", r.Adm.Asked, tt.Asked)
				}
				if r.Adm.MaxHeld > 1 {
					t.Fatalf("the session held %d slots at once", r.Adm.MaxHeld)
				}
				r.Gate.Close()
				if r.Adm.Held != 0 {
					t.Fatalf("%d slots held after Close", r.Adm.Held)
				}
			})
			if cut >= 0 && testing.Short() {
				break
			}
		}
	}
}

package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

// printer writes progress lines. It is safe for concurrent use.
type printer struct {
	clk   clock.Clock
	start time.Time

	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func newPrinter(w io.Writer, clk clock.Clock) *printer {
	if w == nil {
		w = io.Discard
	}
	return &printer{w: w, clk: clk, start: clk.Now()}
}

// printf writes text as is.
func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// Write makes the printer an io.Writer for tables.
func (p *printer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// table writes t as text between blank lines.
func (p *printer) table(t table) {
	p.printf("\n")
	t.text(p)
	p.printf("\n")
}

// tableIf writes the table t returns as table does, when print is set.
func (p *printer) tableIf(print bool, t func() table) {
	if print {
		p.table(t())
	}
}

// step writes one progress line stamped with the time since the start.
func (p *printer) step(format string, args ...any) {
	d := p.clk.Now().Sub(p.start)
	p.printf("[%6.1fs] %s\n", d.Seconds(), fmt.Sprintf(format, args...))
}

// every calls line every period until the returned stop is called, and
// prints what it returns (nothing for "").
func (p *printer) every(ctx context.Context, period time.Duration, line func() string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if clock.Sleep(ctx, p.clk, period) != nil {
				return
			}
			if s := line(); s != "" {
				p.step("%s", s)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// lineFilter passes the lines of its input that start with prefix to out,
// indented; the rest is dropped. It picks the interval lines out of the
// benchmark's report.
type lineFilter struct {
	out    io.Writer
	prefix string
	indent string
	buf    []byte
}

func (f *lineFilter) Write(b []byte) (int, error) {
	f.buf = append(f.buf, b...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		line := string(f.buf[:i])
		f.buf = f.buf[i+1:]
		if strings.HasPrefix(line, f.prefix) {
			if _, err := io.WriteString(f.out, f.indent+line+"\n"); err != nil {
				return len(b), err
			}
		}
	}
	return len(b), nil
}

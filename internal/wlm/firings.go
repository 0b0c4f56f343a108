package wlm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/ring"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// Firing is one entry of the firing history, as package views defines it.
type Firing = views.Firing

// DefaultFiringsSize is how many firings a history keeps when its size
// is not given.
const DefaultFiringsSize = 1000

// maxFiringQuery bounds the statement text a firing keeps, in bytes.
const maxFiringQuery = 1024

// The outcomes of a firing (Firing.Outcome): what its action came to.
const (
	// OutcomePenalized: a penalty moved the statement to the low class
	// (a held one waits as low class).
	OutcomePenalized = "penalised"
	// OutcomeNotPenalized: a penalty found the statement already
	// penalised, by an earlier rule, or ended.
	OutcomeNotPenalized = "already penalised or ended"
	// OutcomeCancelled: an abort's cancel request was sent and accepted.
	OutcomeCancelled = "cancel sent"
	// OutcomeEnded: the statement ended before an abort's cancel request
	// was sent.
	OutcomeEnded = "ended before the cancel"
	// OutcomeCancelFailed: an abort's cancel request failed; the outcome
	// is this, ": " and the error.
	OutcomeCancelFailed = "cancel failed"
	// OutcomeWaitEnded: a blocktime abort ended the statement's wait for
	// admission.
	OutcomeWaitEnded = "wait ended"
	// OutcomeAdmitted: a blocktime abort came after the statement was
	// admitted (or ended); it runs.
	OutcomeAdmitted = "admitted before the abort"
)

// FiringLog is the history of exception-rule firings: the last size of
// them, in a ring of their own, so that however many ordinary statements
// end, the firings stay (the statement history keeps every ended
// statement, and loses a firing among them in seconds of traffic).
//
// With a file, the history survives restarts: each firing is appended to
// the file as a line of JSON (mode 0600) as it is recorded, and the file
// is rewritten with the kept entries (to a temporary file, renamed over
// it) once it holds twice size lines; NewFiringLog reads it back. A
// failure to write is logged once at WARN and the history goes on in
// memory. Queries have their passwords masked before they get here, so
// the file holds none.
//
// It is pure logic on the times it is given but for the file's I/O, which
// runs under its lock: firings are few (a rule fires once per statement).
// It is safe for concurrent use; Close is safe twice.
type FiringLog struct {
	log  *slog.Logger
	path string // "" for none

	mu sync.Mutex
	// Guarded by mu.
	ring   ring.Ring[Firing]
	f      *os.File // append handle; nil without a file, after a failure or Close
	lines  int      // lines in the file
	failed bool     // a write failed (logged once)
	closed bool
}

// NewFiringLog returns a history keeping the last size firings (size <= 0
// means DefaultFiringsSize), kept in path as well unless path is "".
// Firings already in path are read back; a line that does not parse is
// skipped with a WARN. log must not be nil.
func NewFiringLog(size int, path string, log *slog.Logger) (*FiringLog, error) {
	if size <= 0 {
		size = DefaultFiringsSize
	}
	l := &FiringLog{log: log, path: path, ring: ring.Ring[Firing]{Size: size}}
	if path == "" {
		return l, nil
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("firing history: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e Firing
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			log.Warn("firing history: a line skipped", "file", path, "line", n, "err", err)
			continue
		}
		l.ring.Add(e)
		l.lines++
	}
	if err := l.rewriteLocked(); err != nil {
		return nil, fmt.Errorf("firing history: %w", err)
	}
	return l, nil
}

// Record appends e. When the history is full the oldest firing is
// dropped.
func (l *FiringLog) Record(e Firing) {
	if len(e.Query) > maxFiringQuery {
		n := maxFiringQuery
		for n > 0 && !utf8.RuneStart(e.Query[n]) {
			n-- // not inside a character
		}
		e.Query = e.Query[:n] + "..."
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring.Add(e)
	if l.f == nil {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		_, err = l.f.Write(append(b, '\n'))
	}
	if err == nil {
		if l.lines++; l.lines >= 2*l.ring.Size {
			err = l.rewriteLocked()
		}
	}
	if err != nil {
		l.failLocked(err)
	}
}

// rewriteLocked replaces the file with the kept firings and opens it for
// appending.
func (l *FiringLog) rewriteLocked() error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(l.path), filepath.Base(l.path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	w := bufio.NewWriter(tmp)
	kept := l.ring.All()
	for _, e := range kept {
		b, err := json.Marshal(e)
		if err != nil {
			tmp.Close()
			return err
		}
		w.Write(append(b, '\n'))
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), l.path); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	l.f, l.lines = f, len(kept)
	return nil
}

// failLocked stops writing the file after err, logging it once.
func (l *FiringLog) failLocked(err error) {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if !l.failed {
		l.failed = true
		l.log.Warn("firing history: the file is no longer written; firings are kept in memory only", "file", l.path, "err", err)
	}
}

// Entries returns a copy of the kept firings, oldest first.
func (l *FiringLog) Entries() []Firing {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ring.All()
}

// Close closes the file; later firings are kept in memory only. It is
// safe to call more than once.
func (l *FiringLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

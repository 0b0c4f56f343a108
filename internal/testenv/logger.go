package testenv

import (
	"log/slog"
	"os"
	"testing"
)

// Logger is the logger of the code under test: with go test -v, text on
// stderr from level up; otherwise it discards everything. Call it from a
// test, after flag parsing.
func Logger(level slog.Level) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.DiscardHandler)
}

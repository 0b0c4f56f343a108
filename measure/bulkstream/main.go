// Command bulkstream streams bulk results through a sluice postgres route,
// one session at a time, and counts the sessions that break: the check
// for the kernel fast path's out-of-order bulk stream (doc/fast-path.md).
//
// It builds sluice, serves one postgres route in front of the test
// PostgreSQL (SLUICE_TEST_PG, as scripts/testdb sets it) with the serve
// flags given in -flags, and runs -sessions sessions in turn. Each one
// repeats a COPY of 700 MB (100,000 rows of 7,000 bytes) TO STDOUT for
// -each, counting the bytes it receives and checking every row, and
// stops at its first error. A line per session says how far it got; the
// last line says how many broke, and after how many bytes in all. It
// exits with status 1 when one broke.
//
//	go -C measure run ./bulkstream -flags "--fast-path kernel"
//	go -C measure run ./bulkstream -flags "--fast-path off"
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/measure/harness"
)

// The bulk statement and the row it sends, 100,000 times.
const (
	rowLen = 7000
	bulk   = `COPY (SELECT repeat('b', 7000) FROM generate_series(1, 100000)) TO STDOUT`
)

func main() {
	sessions := flag.Int("sessions", 12, "sessions, one after the other")
	each := flag.Duration("each", 1500*time.Millisecond, "how long each session streams")
	flags := flag.String("flags", "--fast-path kernel", "serve flags for the route, space-separated")
	flag.Parse()
	harness.Main("bulkstream", func(ctx context.Context) error {
		return run(ctx, *sessions, *each, strings.Fields(*flags))
	})
}

func run(ctx context.Context, sessions int, each time.Duration, flags []string) error {
	pgURL := harness.Env("SLUICE_TEST_PG", "postgres://sluice:sluice@127.0.0.1:15432/sluice?sslmode=disable")
	up, err := harness.HostPort(pgURL)
	if err != nil {
		return err
	}
	s, err := harness.Start(ctx, "postgres", up, flags...)
	if err != nil {
		return err
	}
	defer s.Stop()
	url, err := harness.ReplaceHostPort(pgURL, s.Listen)
	if err != nil {
		return err
	}
	var total int64
	broke := 0
	for i := range sessions {
		n, err := stream(ctx, url, each)
		total += n
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			broke++
			fmt.Printf("session %d: broke after %.1f MB: %v\n", i+1, float64(n)/1e6, err)
		default:
			fmt.Printf("session %d: %.1f MB intact\n", i+1, float64(n)/1e6)
		}
	}
	fmt.Printf("%d of %d sessions broke; %.1f GB streamed (serve %s)\n", broke, sessions, float64(total)/1e9, strings.Join(flags, " "))
	if broke > 0 {
		return fmt.Errorf("%d sessions broke", broke)
	}
	return nil
}

// stream repeats the bulk COPY on one session for d and returns the
// bytes it received, and the first error other than d running out.
func stream(ctx context.Context, url string, d time.Duration) (int64, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(context.Background())
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	w := &rows{}
	for sctx.Err() == nil {
		_, err := c.PgConn().CopyTo(sctx, w, bulk)
		if w.err != nil {
			return w.n, w.err
		}
		if err != nil && sctx.Err() == nil {
			return w.n, err
		}
	}
	return w.n, nil
}

// rows counts the bytes of the COPY's rows and checks each: rowLen bytes
// 'b' and a newline.
type rows struct {
	n   int64
	err error // the first malformed row
}

func (r *rows) Write(p []byte) (int, error) {
	r.n += int64(len(p))
	if r.err == nil && (len(p) != rowLen+1 || p[rowLen] != '\n' || bytes.Count(p[:rowLen], []byte{'b'}) != rowLen) {
		r.err = errors.New("a row arrived altered")
	}
	return len(p), nil
}

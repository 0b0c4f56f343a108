package litepg

import (
	"context"
	"io"
	"testing"

	"github.com/sluicelab/sluice/internal/bench"
)

// TestBenchPrepareDefaults runs `sluice bench oltp_read_write prepare` with
// sysbench's default options against litepg: SERIAL ids loaded by COPY,
// the primary key added afterwards, setval on the serial sequence, then a
// short run inserting new rows after the loaded ids.
func TestBenchPrepareDefaults(t *testing.T) {
	_, addr := startServer(t, Options{})
	args := []string{"--db-driver=pgsql", "--dsn=" + addr,
		"--tables=1", "--table-size=500", "--threads=2", "--events=200", "--time=0", "oltp_read_write"}
	o, _, _, err := bench.ParseArgs(append(args, "prepare"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := bench.Prepare(ctx, o, io.Discard); err != nil {
		t.Fatalf("prepare with default options: %v", err)
	}
	o, _, _, _ = bench.ParseArgs(append(args, "run"))
	res, err := bench.Run(ctx, o, io.Discard)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Transactions == 0 || res.Writes == 0 {
		t.Fatalf("run did nothing: %+v", res)
	}
	if err := bench.Cleanup(ctx, o); err != nil {
		t.Fatal(err)
	}
}

//go:build recordcorpus

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestRecordRelayCorpus records a pgx session and a go-sql-driver
// session against the real servers, through a loopback relay that notes
// every chunk each way in order, and writes the seed corpora of
// FuzzRelayPG and FuzzRelayMySQL from them: the whole session, the
// client's bytes pipelined, and cut short by a client RST, a client
// half-close, a server RST, and with the opening sent byte by byte. It
// is built only with the recordcorpus tag, so an ordinary run neither
// skips it nor rewrites the corpus; when the front ends' exchanges
// change, run
//
//	go test -tags recordcorpus -run TestRecordRelayCorpus ./internal/proxy
func TestRecordRelayCorpus(t *testing.T) {
	pgURL := testenv.PostgresURL(t)
	myCfg := testenv.MySQLConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	pgSteps := recordSession(t, upstreamAddr(t, pgURL), func(addr string) {
		conn, err := pgx.Connect(ctx, viaProxy(t, pgURL, addr))
		if err != nil {
			t.Fatal(err)
		}
		var v int
		if err := conn.QueryRow(ctx, "SELECT $1::int + 1", 41).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT 1; SELECT 'two'", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		for i := range 3 {
			b.Queue("SELECT $1::int * 2", i)
		}
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE TEMP TABLE rec (i int, v text)"); err != nil {
			t.Fatal(err)
		}
		rows := [][]any{{1, "a"}, {2, "b"}, {3, "c"}}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"rec"}, []string{"i", "v"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY rec TO STDOUT"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT 1/0"); err == nil {
			t.Fatal("SELECT 1/0 succeeded")
		}
		conn.Close(ctx)
	})
	myRec := recordSession(t, myCfg.Addr, func(addr string) {
		cfg := myCfg.Clone()
		cfg.Addr, cfg.MultiStatements = addr, true
		db, conn, _, err := myOpen(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v int
		if err := conn.QueryRowContext(ctx, "SELECT 41 + 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		st, err := conn.PrepareContext(ctx, "SELECT ? + 1, CONCAT(?, '!')")
		if err != nil {
			t.Fatal(err)
		}
		var s string
		if err := st.QueryRowContext(ctx, 1, "x").Scan(&v, &s); err != nil {
			t.Fatal(err)
		}
		st.Close()
		rows, err := conn.QueryContext(ctx, "SELECT 1; SELECT 'two'")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() || rows.NextResultSet() {
		}
		rows.Close()
		if _, err := conn.ExecContext(ctx, "SELECT * FROM rec_no_such_table"); err == nil {
			t.Fatal("query of a missing table succeeded")
		}
		conn.Close()
	})
	writeRelayCorpus(t, "FuzzRelayPG", "pgx", pgSteps)
	writeRelayCorpus(t, "FuzzRelayMySQL", "go-sql-driver", myRec)
}

// recordSession relays one connection from a loopback port to upstream,
// noting each chunk read from either side before forwarding it, runs
// client against the port, and returns the steps once both sides have
// ended.
func recordSession(t *testing.T, upstream string, client func(addr string)) []relayStep {
	t.Helper()
	var mu sync.Mutex
	var steps []relayStep
	done := make(chan struct{})
	addr := testenv.ServeOnce(t, func(c net.Conn) {
		defer close(done)
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			t.Error(err)
			return
		}
		defer up.Close()
		copyNoting := func(dst, src net.Conn, op byte) {
			buf := make([]byte, 64<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					mu.Lock()
					steps = append(steps, relayStep{op, bytes.Clone(buf[:n])})
					mu.Unlock()
					dst.Write(buf[:n])
				}
				if err != nil {
					closeWrite(dst)
					return
				}
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() { copyNoting(up, c, stepClient) })
		copyNoting(c, up, stepServer)
		wg.Wait()
	})
	client(addr)
	<-done
	return steps
}

// writeRelayCorpus writes the variants of a recorded session into
// testdata/fuzz/target.
func writeRelayCorpus(t *testing.T, target, name string, steps []relayStep) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cut := func(frac float64, tail ...relayStep) []relayStep {
		n := int(float64(len(steps)) * frac)
		return append(append([]relayStep(nil), steps[:n]...), tail...)
	}
	// pipelined: after the first server reply, every client chunk
	// goes at once, then every server chunk.
	var cli, srv []byte
	first := 0
	for i, s := range steps {
		if s.op == stepServer {
			first = i
			break
		}
	}
	for _, s := range steps[first+1:] {
		if s.op == stepClient {
			cli = append(cli, s.data...)
		} else {
			srv = append(srv, s.data...)
		}
	}
	pipelined := append(append([]relayStep(nil), steps[:first+1]...),
		relayStep{stepClient, cli}, relayStep{stepServer, srv}, relayStep{op: stepClientFIN})
	// bytewise: the first two chunks (the opening) one byte a step.
	var bytewise []relayStep
	for i, s := range steps {
		if i < 2 {
			for _, c := range s.data {
				bytewise = append(bytewise, relayStep{s.op, []byte{c}})
			}
			continue
		}
		bytewise = append(bytewise, s)
	}
	variants := map[string][]relayStep{
		"session":      cut(1, relayStep{op: stepClientFIN}, relayStep{op: stepServerFIN}),
		"pipelined":    pipelined,
		"client-rst":   cut(0.5, relayStep{op: stepClientRST}),
		"client-half":  cut(0.7, relayStep{op: stepClientHalf}),
		"server-rst":   cut(0.6, relayStep{op: stepServerRST}),
		"opening-only": cut(0.2, relayStep{op: stepClientFIN}),
		"bytewise":     bytewise,
	}
	for v, s := range variants {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", encodeScript(s))
		if err := os.WriteFile(filepath.Join(dir, name+"-"+v), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d steps recorded, %d variants written to %s", name, len(steps), len(variants), dir)
}

// Command idleconns measures the memory of a sluice process holding many
// idle client sessions through one postgres route.
//
// It builds sluice, starts a minimal PostgreSQL-speaking upstream in this
// process (startup, AuthenticationOk, ReadyForQuery, nothing else), runs
// `sluice serve` in front of it, opens N client sessions with pgconn (a
// real startup exchange through the route), leaves them idle, and prints
// the sluice process's resident set size.
//
//	go run ./measure/idleconns -n 2000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	n := flag.Int("n", 2000, "idle client sessions")
	protocol := flag.String("protocol", "postgres", "route protocol: postgres or tcp")
	flag.Parse()
	if err := run(*n, *protocol); err != nil {
		log.Fatal(err)
	}
}

func run(n int, protocol string) error {
	bin, dir, err := harness.Build()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go serveStub(up)
	listen := harness.FreeAddr()
	srv := exec.Command(bin, "serve", "--listen", listen, "--upstream", up.Addr().String(), "--protocol", protocol, "--log-level", "warn")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Process.Kill()
	waitListening(listen)
	pid := srv.Process.Pid
	base := harness.ProcessRSS(pid)
	ctx := context.Background()
	conns := make([]*pgconn.PgConn, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		c, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://u:p@%s/db?sslmode=disable", listen))
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		conns = append(conns, c)
		if (i+1)%500 == 0 {
			fmt.Printf("%d sessions open (%.1fs)\n", i+1, time.Since(start).Seconds())
		}
	}
	time.Sleep(2 * time.Second)
	held := harness.ProcessRSS(pid)
	fmt.Printf("route %s: sluice RSS %.1f MiB before, %.1f MiB with %d idle sessions (%.1f KiB per session)\n",
		protocol, base/1024, held/1024, n, (held-base)/float64(n))
	for _, c := range conns {
		c.Close(ctx)
	}
	return nil
}

func waitListening(addr string) {
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveStub answers every startup with AuthenticationOk and ReadyForQuery
// and then holds the session until the client leaves.
func serveStub(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			be := pgproto3.NewBackend(c, c)
			if _, err := be.ReceiveStartupMessage(); err != nil {
				return
			}
			be.Send(&pgproto3.AuthenticationOk{})
			be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if err := be.Flush(); err != nil {
				return
			}
			for {
				if _, err := be.Receive(); err != nil {
					return
				}
			}
		}()
	}
}

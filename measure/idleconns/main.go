// Command idleconns measures the memory of a sluice process holding many
// idle client sessions through one postgres route.
//
// It builds sluice, starts a minimal PostgreSQL-speaking upstream in this
// process (startup, AuthenticationOk, ReadyForQuery, nothing else), runs
// `sluice serve` in front of it, opens N client sessions with pgconn (a
// real startup exchange through the route), leaves them idle, and prints
// the sluice process's resident set size and its growth per session in
// KiB.
//
// Each session holds a descriptor at each of its four ends (two in this
// process, two in sluice), so the run raises this process's descriptor
// limit to fit 2N plus a margin, which sluice inherits; past the hard limit
// that needs root (CAP_SYS_RESOURCE).
//
//	go -C measure run ./idleconns -n 10000
//	go -C measure run ./idleconns -n 5000 -profile /tmp/idle   # heap profile, goroutines, memory statistics
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/measure/harness"
)

// fileMargin is the descriptors a process needs beside its sessions'.
const fileMargin = 100

func main() {
	n := flag.Int("n", 2000, "idle client sessions")
	protocol := flag.String("protocol", "postgres", "route protocol: postgres or tcp")
	profile := flag.String("profile", "", "with the sessions idle, save sluice's heap profile and goroutine stacks under this path prefix (PREFIX.heap, PREFIX.goroutines) and its memory statistics (PREFIX.memstats); empty: none")
	settle := flag.Duration("settle", 2*time.Second, "how long the sessions stay idle before the measurement")
	flag.Parse()
	if err := run(*n, *protocol, *profile, *settle); err != nil {
		log.Fatal(err)
	}
}

func run(n int, protocol, profile string, settle time.Duration) error {
	if err := raiseFileLimit(uint64(2*n + fileMargin)); err != nil {
		return err
	}
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
	args := []string{"serve", "--listen", listen, "--upstream", up.Addr().String(), "--protocol", protocol, "--log-level", "warn"}
	pprofAddr := ""
	if profile != "" {
		pprofAddr = harness.FreeAddr()
		args = append(args, "--pprof", pprofAddr)
	}
	srv := exec.Command(bin, args...)
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
		if (i+1)%1000 == 0 {
			fmt.Printf("%d sessions open (%.1fs)\n", i+1, time.Since(start).Seconds())
		}
	}
	time.Sleep(settle)
	held := harness.ProcessRSS(pid)
	fmt.Printf("route %s: sluice RSS %.1f MiB before, %.1f MiB with %d idle sessions (%.1f KiB per session)\n",
		protocol, base/1024, held/1024, n, (held-base)/float64(n))
	if profile != "" {
		for suffix, path := range map[string]string{".heap": "heap?gc=1", ".goroutines": "goroutine?debug=1", ".memstats": "heap?debug=1"} {
			if err := saveProfile("http://"+pprofAddr+"/debug/pprof/"+path, profile+suffix); err != nil {
				return err
			}
		}
		fmt.Printf("profiles saved under %s.*\n", profile)
		time.Sleep(settle)
		after := harness.ProcessRSS(pid)
		fmt.Printf("after a GC and %v more: sluice RSS %.1f MiB (%.1f KiB per session)\n", settle, after/1024, (after-base)/float64(n))
	}
	for _, c := range conns {
		c.Close(ctx)
	}
	return nil
}

// raiseFileLimit raises the soft (and if need be the hard) limit on open
// descriptors to at least want. A hard limit below want can only be
// raised with CAP_SYS_RESOURCE; without it the error says so.
func raiseFileLimit(want uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("descriptor limit: %w", err)
	}
	if l.Cur >= want {
		return nil
	}
	hard := l.Max
	l.Cur = want
	l.Max = max(l.Max, want)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("%d descriptors needed, hard limit %d (raising it needs CAP_SYS_RESOURCE; the most sessions under it: -n %d): %w",
			want, hard, (hard-fileMargin)/2, err)
	}
	return nil
}

// saveProfile saves what url serves to the file path.
func saveProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", url, err)
	}
	return f.Close()
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
	harness.ServeEach(ln, func(c net.Conn) {
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
	})
}

// Command stalledconns measures what clients that stall in the MySQL
// opening exchange cost a sluice process, and when it lets them go.
//
// It builds sluice (or takes -bin), runs `sluice serve` with one mysql
// route in front of the test MariaDB (SLUICE_TEST_MYSQL, as
// scripts/testdb sets it), and opens N clients that stall, a fifth each:
// silent, in the middle of a packet header, after announcing a 1 MiB
// handshake response, 512 KiB into one, 1 KiB into a 16 KiB one. It prints the sluice process's resident set size and descriptors
// before, with the clients stalled, and after the last is closed, and
// when the clients saw their connections end. The route keeps the
// default startup timeout (30 s); -wait is how long past it to wait.
//
//	go -C measure run ./stalledconns -n 150
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/measure/harness"
)

// stalls are what the clients send before going quiet, in turn.
var stalls = []struct {
	name string
	send []byte
}{
	{"silent", nil},
	{"mid-header", []byte{0x40, 0x00}},
	{"announces 1 MiB", []byte{0x00, 0x00, 0x10, 1}},
	{"512 KiB of 1 MiB", append([]byte{0x00, 0x00, 0x10, 1}, make([]byte, 512<<10)...)},
	{"1 KiB of 16 KiB", append([]byte{0x00, 0x40, 0x00, 1}, make([]byte, 1024)...)},
}

func main() {
	n := flag.Int("n", 150, "stalled clients")
	bin := flag.String("bin", "", "sluice binary to run; empty builds ./cmd/sluice")
	timeout := flag.Duration("timeout", 30*time.Second, "the route's startup timeout (the default)")
	wait := flag.Duration("wait", 10*time.Second, "how long past the timeout to wait for the clients to be closed")
	flag.Parse()
	if err := run(*n, *bin, *timeout, *wait); err != nil {
		log.Fatal(err)
	}
}

func run(n int, bin string, timeout, wait time.Duration) error {
	clk := clock.Real{}
	ctx := context.Background()
	if bin == "" {
		b, dir, err := harness.Build()
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = b
	}
	cfg, err := mysql.ParseDSN(harness.Env("SLUICE_TEST_MYSQL", "sluice:sluice@tcp(127.0.0.1:13306)/sluice"))
	if err != nil {
		return err
	}
	listen := harness.FreeAddr()
	srv := exec.Command(bin, "serve", "--listen", listen, "--upstream", cfg.Addr, "--protocol", "mysql", "--log-level", "error")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Process.Kill()
	if err := waitListening(ctx, clk, listen); err != nil {
		return err
	}
	pid := srv.Process.Pid
	rss0, fds0 := harness.ProcessRSS(pid), fds(pid)

	type result struct {
		kind    int
		start   time.Time
		end     time.Duration // from connect to the end of the connection
		err     error
		errCode uint16 // ERR number after the greeting, if any
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	deadline := clk.Now().Add(timeout + wait)
	for i := range results {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
		defer c.Close()
		r := &results[i]
		r.kind, r.start = i%len(stalls), clk.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(deadline)
			c.Write(stalls[r.kind].send) // fails if sluice refuses the packet before reading it all
			c.SetReadDeadline(deadline)
			b, err := io.ReadAll(c)
			r.end, r.err = clk.Now().Sub(r.start), err
			if len(b) >= 4 {
				if g := 4 + (int(b[0]) | int(b[1])<<8 | int(b[2])<<16); len(b) >= g+7 && b[g+4] == 0xff {
					r.errCode = uint16(b[g+5]) | uint16(b[g+6])<<8
				}
			}
		}()
	}
	clock.Sleep(ctx, clk, 3*time.Second) // let the clients' bytes arrive
	rss1, fds1 := harness.ProcessRSS(pid), fds(pid)
	fmt.Printf("%d clients stalled in the opening exchange of a mysql route (startup timeout %v)\n", n, timeout)
	fmt.Printf("with them:  RSS %.1f MiB (+%.1f MiB), %d descriptors (+%d)\n", rss1/1024, (rss1-rss0)/1024, fds1, fds1-fds0)
	wg.Wait()
	rss2, fds2 := harness.ProcessRSS(pid), fds(pid)

	for k, s := range stalls {
		var ends []time.Duration
		open, refused := 0, 0
		for _, r := range results {
			switch {
			case r.kind != k:
			case errors.Is(r.err, os.ErrDeadlineExceeded):
				open++
			default:
				ends = append(ends, r.end)
				if r.errCode != 0 {
					refused++
				}
			}
		}
		line := fmt.Sprintf("%-16s %3d closed", s.name, len(ends))
		if len(ends) > 0 {
			line += fmt.Sprintf(" after %.1f-%.1f s", slices.Min(ends).Seconds(), slices.Max(ends).Seconds())
		}
		if refused > 0 {
			line += fmt.Sprintf(", %d with an ERR", refused)
		}
		if open > 0 {
			line += fmt.Sprintf(", %d still open after %v", open, timeout+wait)
		}
		fmt.Println(line)
	}
	fmt.Printf("before:     RSS %.1f MiB, %d descriptors\n", rss0/1024, fds0)
	fmt.Printf("after:      RSS %.1f MiB, %d descriptors\n", rss2/1024, fds2)
	return nil
}

// fds counts the descriptors of process pid, or -1 if it cannot.
func fds(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

func waitListening(ctx context.Context, clk clock.Clock, addr string) error {
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		clock.Sleep(ctx, clk, 25*time.Millisecond)
	}
	return fmt.Errorf("sluice did not start listening on %s", addr)
}

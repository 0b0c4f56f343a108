package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/cpuset"
	"github.com/sluicelab/sluice/internal/testenv"
)

func TestHelpListsCommands(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, c := range []string{"serve", "bench", "lab", "version"} {
		if !strings.Contains(out.String(), "\n  "+c+" ") {
			t.Errorf("--help does not list %s:\n%s", c, out.String())
		}
	}
}

func TestBadConfigExit2(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	os.WriteFile(path, []byte("routes:\n  - listen: 127.0.0.1:0\n    upstream: 127.0.0.1:1\n    protocol: oracle\n"), 0o600)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--config", path}, []string{path, "routes[0].protocol", `"oracle"`}},
		{[]string{"serve", "--listen", "nowhere", "--upstream", "127.0.0.1:1"}, []string{"--listen", `"nowhere"`}},
		{[]string{"serve", "--config", filepath.Join(dir, "missing.yaml")}, []string{"missing.yaml"}},
		{[]string{"serve", "--bogus"}, []string{"--bogus"}},
		{[]string{"serve"}, []string{"nothing to serve"}},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--cpu-latency", "soon"}, []string{"--cpu-latency", `"soon"`}},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--cpu-latency", "-5us"}, []string{"--cpu-latency", `"-5us"`}},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--cpus", "1-x"}, []string{"--cpus", `"1-x"`}},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--cpus", "1023"}, []string{"--cpus", "CPU 1023 not available"}},
	}
	for _, tt := range tests {
		var out strings.Builder
		code := run(context.Background(), tt.args, &out, &out)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", tt.args, code, out.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: message %q does not mention %s", tt.args, out.String(), w)
			}
		}
	}
}

func TestAdminRefusesNonLoopbackWithoutPassword(t *testing.T) {
	t.Setenv("SLUICE_ADMIN_PASSWORD", "")
	var out strings.Builder
	code := run(context.Background(), []string{"serve", "--admin", "0.0.0.0:0"}, &out, &out)
	if code != 2 || !strings.Contains(out.String(), "needs a password") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}

// TestServePinsToCPUs runs serve with --cpus naming one CPU and checks that
// every thread of the process is pinned to it while serving.
func TestServePinsToCPUs(t *testing.T) {
	allowed, err := cpuset.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	defer func() {
		runtime.GOMAXPROCS(procs)
		if err := cpuset.Pin(allowed, allowed); err != nil {
			t.Errorf("restore affinity: %v", err)
		}
	}()
	want := strconv.Itoa(cpuset.Last(allowed))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var out strings.Builder
	go func() {
		done <- run(ctx, []string{"serve", "--listen", addr, "--upstream", "127.0.0.1:1", "--cpus", want}, &out, &out)
	}()
	if !testenv.Poll(5*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		cancel()
		t.Fatalf("serve did not listen (exit %d: %s)", <-done, out.String())
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS = %d while pinned to one CPU, want 1", got)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != want {
				t.Errorf("thread %s may run on %s, want %s", task.Name(), strings.TrimSpace(v), want)
			}
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exit %d: %s", code, out.String())
	}
}

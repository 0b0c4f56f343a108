package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

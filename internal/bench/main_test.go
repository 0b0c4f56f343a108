package bench

import (
	"context"
	"strings"
	"testing"
)

func TestMainExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string // the whole of stderr, one line
		stdout string // a substring of stdout
	}{
		{"unknown option", []string{"--foo", "oltp_read_write", "run"}, ExitUsage, "sluice bench: unknown option --foo\n", ""},
		{"unknown workload", []string{"oltp_foo", "run"}, ExitUsage, "sluice bench: unknown workload oltp_foo (want one of oltp_read_write, oltp_read_only, oltp_write_only, oltp_point_select, oltp_update_index, oltp_update_non_index, oltp_insert, oltp_delete, select_random_points, select_random_ranges, bulk_insert)\n", ""},
		{"bad value", []string{"--threads=x", "oltp_read_write", "run"}, ExitUsage, "sluice bench: bad value for --threads: \"x\" (want an integer)\n", ""},
		{"no workload", nil, ExitUsage, "sluice bench: no workload given (see sluice bench --help)\n", ""},
		{"no command", []string{"oltp_read_write"}, ExitUsage, "sluice bench: workload oltp_read_write needs a command: prepare, run, cleanup or help\n", ""},
		{"single table", []string{"--tables=2", "select_random_points", "prepare"}, ExitUsage, "sluice bench: select_random_points does not support --tables > 1\n", ""},
		{"help", []string{"--help"}, ExitOK, "", "Usage:\n  sluice bench [options]... WORKLOAD prepare|run|cleanup|help"},
		{"workload help", []string{"oltp_read_write", "help"}, ExitOK, "", "oltp_read_write options:\n"},
		{"workload help flag", []string{"oltp_read_write", "--help"}, ExitOK, "", "Usage:\n  sluice bench"},
		{"no workload help", []string{"bulk_insert", "help"}, ExitRuntime, "'bulk_insert' test does not implement the 'help' command.\n", ""},
		{"mysql unreachable", []string{"--mysql-host=127.0.0.1", "--mysql-port=1", "oltp_read_write", "run"}, ExitRuntime, "sluice bench: cannot connect to mysql at 127.0.0.1:1: ", "Initializing worker threads..."},
		{"pgsql unreachable", []string{"--db-driver=pgsql", "--pgsql-host=127.0.0.1", "--pgsql-port=1", "oltp_read_write", "prepare"}, ExitRuntime, "sluice bench: cannot connect to pgsql at 127.0.0.1:1: ", ""},
		{"mysql unreachable cleanup", []string{"--dsn=mysql://u:p@127.0.0.1:1/db", "oltp_read_write", "cleanup"}, ExitRuntime, "sluice bench: cannot connect to mysql at 127.0.0.1:1: ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := Main(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
			if strings.Count(stderr.String(), "\n") > 1 {
				t.Fatalf("stderr is more than one line: %q", stderr.String())
			}
			if tt.code == ExitRuntime {
				if !strings.HasPrefix(stderr.String(), tt.stderr) {
					t.Fatalf("stderr %q, want prefix %q", stderr.String(), tt.stderr)
				}
			} else if stderr.String() != tt.stderr {
				t.Fatalf("stderr %q, want %q", stderr.String(), tt.stderr)
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Fatalf("stdout %q lacks %q", stdout.String(), tt.stdout)
			}
		})
	}
}

package main

import (
	"context"
	"strings"
	"testing"
)

func TestLabHelpDocumentsScale(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"lab", "--help"}, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{
		"--quick", "--dsn", "--backend", "--out",
		"0, 1, 5, 10", "0, 0.3, 1, 2, 5, 10, 20", // RTT points, quick and full
		"0, 1, 4, 10", "0, 1, 2, 4, 8, 10", // bulk sessions, quick and full
		"under 2 minutes", "under 15 minutes",
		"report.md", "report.json", "tps_vs_rtt.svg", "slowdown_vs_n.svg",
		"--experiment", "active_statements", "unlimited, 2, 4, 8", // concurrency limits, full
		"high_latency_vs_active.svg", "throughput_vs_active.svg",
		"cluster", "cluster_slowdown_vs_n.svg", "24000 rows", // the cluster experiment, full only
		"basebackup", "pg_basebackup --max-rate", "basebackup_latency.svg", "basebackup_duration.svg",
		"whatif_predicted_vs_measured.svg", "1 (500 INSERTs), 100,",
		"postgres://", "mysql://", "initdb",
		"--network", "--net-rate", "--net-queue", "198.18.0.0/15", "tbf", "kernel_slowdown_vs_n.svg", "kernel_link_use_vs_n.svg",
		"--etcd", "kernel_cluster_slowdown_vs_n.svg", "kernel_cluster_link_use_vs_n.svg",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lab --help does not mention %q", want)
		}
	}
}

func TestLabUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"lab", "--backend", "oracle"}, "unknown backend"},
		{[]string{"lab", "--dsn", "http://db/x"}, "bad --dsn"},
		{[]string{"lab", "--dsn", "mysql://u:p@h:3306/"}, "name a database"},
		{[]string{"lab", "--dsn", "postgres://u@h/db", "--backend", "postgres"}, "not both"},
		{[]string{"lab", "--log-level", "loud"}, "--log-level"},
		{[]string{"lab", "--experiment", "bogus"}, "unknown experiment"},
		{[]string{"lab", "--quick", "--experiment", "basebackup"}, "no basebackup experiment"},
		{[]string{"lab", "--bogus"}, "--bogus"},
		{[]string{"lab", "--network", "ether"}, "unknown network"},
		{[]string{"lab", "--network", "kernel", "--net-rate", "fast"}, "--net-rate"},
		{[]string{"lab", "--network", "kernel", "--net-queue", "0s"}, "--net-queue"},
		{[]string{"lab", "--network", "kernel", "--experiment", "latency"}, "no experiment that runs on the kernel network"},
		{[]string{"lab", "--network", "kernel", "--etcd", ","}, "bad --etcd"},
		{[]string{"lab", "extra"}, "extra"},
	}
	for _, tt := range tests {
		var out strings.Builder
		code := run(context.Background(), tt.args, &out, &out)
		if code != 2 || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 mentioning %q", tt.args, code, out.String(), tt.want)
		}
	}
}

func TestLabPostgresBinariesMissing(t *testing.T) {
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"lab", "--quick", "--backend", "postgres", "--postgres-bin", t.TempDir()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "not found") || !strings.Contains(stderr.String(), "initdb") {
		t.Fatalf("exit %d, stderr %q; want exit 1 saying the server binaries are missing", code, stderr.String())
	}
}

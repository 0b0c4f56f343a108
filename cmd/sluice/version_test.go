package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/testenv"
)

func TestNewBuildInfo(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	bi := func(v string, s []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/sluicelab/sluice", Version: v}, Settings: s}
	}
	tests := []struct {
		name     string
		st       stamps
		bi       *debug.BuildInfo
		version  string
		modified bool
		lines    []string // lines the description must hold
		absent   []string // and must not
	}{
		{"tagged checkout", stamps{}, bi("v1.2.0", vcs("false")), "v1.2.0", false,
			[]string{"sluice v1.2.0\n", "revision  " + rev + "\n", "committed 2026-01-02T03:04:05Z\n", "go        go1.99.1 linux/arm64\n"}, []string{"built", "modified"}},
		{"pseudo-version, dirty", stamps{}, bi("v0.0.0-20260102030405-0123456789ab+dirty", vcs("true")), "v0.0.0-20260102030405-0123456789ab+dirty", true,
			[]string{"revision  " + rev + " (modified)\n"}, nil},
		{"devel with VCS", stamps{}, bi("(devel)", vcs("true")), "devel-0123456789ab-dirty", true, nil, nil},
		{"devel without VCS", stamps{}, bi("(devel)", nil), "devel", false,
			[]string{"sluice devel\n"}, []string{"revision", "committed"}},
		{"no build info", stamps{}, nil, "devel", false, []string{"sluice devel\n"}, []string{"revision"}},
		{"release stamps", stamps{Version: "v1.3.0", Revision: rev, CommitTime: "2026-02-03T04:05:06Z", BuildTime: "2026-02-03T05:00:00Z"}, bi("(devel)", nil), "v1.3.0", false,
			[]string{"sluice v1.3.0\n", "revision  " + rev + "\n", "committed 2026-02-03T04:05:06Z\n", "built     2026-02-03T05:00:00Z\n"}, []string{"modified"}},
		{"release stamps, dirty", stamps{Version: "v1.3.0-3-g0123456-dirty", Revision: rev}, bi("(devel)", vcs("false")), "v1.3.0-3-g0123456-dirty", true,
			[]string{"(modified)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuildInfo(tt.st, tt.bi, "linux/arm64")
			if b.Version != tt.version || b.Modified != tt.modified {
				t.Fatalf("version %q modified %v, want %q %v", b.Version, b.Modified, tt.version, tt.modified)
			}
			s := b.String()
			for _, l := range tt.lines {
				if !strings.Contains(s, l) {
					t.Errorf("description lacks %q:\n%s", l, s)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(s, a) {
					t.Errorf("description has %q:\n%s", a, s)
				}
			}
		})
	}
}

// TestVersionFlagAndCommand: --version and the version command print
// the same description, and bench --version the sysbench-shaped line.
func TestVersionFlagAndCommand(t *testing.T) {
	out := func(args ...string) string {
		var stdout, stderr strings.Builder
		if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	cmd, flag := out("version"), out("--version")
	if cmd != flag || !strings.HasPrefix(cmd, "sluice ") || !strings.Contains(cmd, "\ngo        go1.") {
		t.Fatalf("version %q, --version %q", cmd, flag)
	}
	v := strings.TrimPrefix(strings.SplitN(cmd, "\n", 2)[0], "sluice ")
	if got, want := out("bench", "--version"), "sysbench 1.0.20-compatible (sluice "+v+")\n"; got != want {
		t.Fatalf("bench --version = %q, want %q", got, want)
	}
}

// TestCheckoutBuildReportsVCS builds sluice with a plain go build in a
// fresh clone of this commit, with VCS stamping on, and checks that
// `sluice version` reports what the toolchain recorded: a pseudo-version
// or tag (not devel), and the commit.
func TestCheckoutBuildReportsVCS(t *testing.T) {
	testenv.SkipShort(t, "takes 12s here")
	git := testenv.Program(t, "git")
	goTool := testenv.Program(t, "go")
	out := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "CGO_ENABLED=0")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	head := out(".", git, "rev-parse", "HEAD")
	clone := filepath.Join(t.TempDir(), "sluice")
	out(".", git, "clone", "--quiet", "--no-checkout", "../..", clone)
	out(clone, git, "checkout", "--quiet", head)
	bin := filepath.Join(t.TempDir(), "sluice")
	// -trimpath: the same build as scripts/release's, whose packages are
	// then in the build cache.
	out(clone, goTool, "build", "-trimpath", "-o", bin, "./cmd/sluice")
	got := out(".", bin, "version")
	first := strings.SplitN(got, "\n", 2)[0]
	if !strings.HasPrefix(first, "sluice v") || strings.Contains(first, "devel") {
		t.Errorf("version of a checkout build starts %q, want a module version", first)
	}
	if !strings.Contains(first, head[:12]) && !strings.Contains(out(clone, git, "tag", "--points-at", head), strings.TrimPrefix(first, "sluice ")) {
		t.Errorf("version %q names neither commit %s nor a tag of it", first, head[:12])
	}
	if !strings.Contains(got, "revision  "+head+"\n") {
		t.Errorf("version lacks revision %s:\n%s", head, got)
	}
}

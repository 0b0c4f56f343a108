package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Release builds may stamp these with the linker (scripts/release does):
//
//	go build -ldflags "-X main.releaseVersion=v1.2.0 -X main.releaseRevision=$(git rev-parse HEAD) \
//	    -X main.releaseCommitTime=2026-01-02T03:04:05Z -X main.releaseBuildTime=2026-01-02T03:10:00Z" ./cmd/sluice
//
// Each one set replaces what the Go toolchain recorded (the module
// version; vcs.revision; vcs.time); buildTime (RFC 3339, UTC) is printed
// as is. The toolchain records VCS information only when it builds in a
// checkout whose .git is a directory (not in a git worktree) and
// -buildvcs is not false; the overrides cover the other builds. All empty
// (the default) leave the build information alone.
var (
	releaseVersion    string
	releaseRevision   string
	releaseCommitTime string
	releaseBuildTime  string
)

// version is the version this binary reports: what `sluice version`
// prints first and the HTTP API shows. It is computed once, from facts
// fixed at build time, and never changes.
var version = readBuildInfo().Version

// stamps are the linker overrides of one build.
type stamps struct {
	Version, Revision, CommitTime, BuildTime string
}

// buildInfo is what `sluice version` prints about the running binary.
type buildInfo struct {
	Version   string // module version, pseudo-version or release override; never empty
	Revision  string // VCS revision (full commit hash); "" without VCS stamping
	Committed string // commit time of Revision (RFC 3339); "" when unknown
	Modified  bool   // the work tree had uncommitted changes
	Built     string // build time stamped by -X main.buildTime; "" when not stamped
	GoVersion string // toolchain that built the binary, e.g. go1.26.8
	Platform  string // GOOS/GOARCH
}

// readBuildInfo describes this binary from the linker overrides and the
// toolchain's build information.
func readBuildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return newBuildInfo(stamps{releaseVersion, releaseRevision, releaseCommitTime, releaseBuildTime}, bi, runtime.GOOS+"/"+runtime.GOARCH)
}

// newBuildInfo describes a binary from the linker overrides (each may be
// empty) and the toolchain's build information (nil when the binary has
// none).
//
// The version is, in order: the override; the module version the
// toolchain stamped (a tag such as v1.2.0, or a pseudo-version such as
// v0.0.0-20260102030405-abcdef123456, with +dirty when modified) unless it
// is "(devel)"; "devel-" and the first 12 digits of the VCS revision
// (with "-dirty" when modified); "devel".
func newBuildInfo(st stamps, bi *debug.BuildInfo, platform string) buildInfo {
	b := buildInfo{Version: st.Version, Built: st.BuildTime, GoVersion: runtime.Version(), Platform: platform}
	if bi != nil {
		if bi.GoVersion != "" {
			b.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Committed = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
	}
	if st.Revision != "" {
		b.Revision = st.Revision
		// A stamped version says whether the tree was modified.
		b.Modified = strings.HasSuffix(b.Version, "dirty")
	}
	if st.CommitTime != "" {
		b.Committed = st.CommitTime
	}
	if b.Version == "" {
		b.Version = "devel"
		if b.Revision != "" {
			b.Version += "-" + b.Revision[:min(12, len(b.Revision))]
			if b.Modified {
				b.Version += "-dirty"
			}
		}
	}
	return b
}

// String is the full description, one fact a line:
//
//	sluice v1.2.0
//	revision  0123abcd... (modified)
//	committed 2026-01-02T03:04:05Z
//	built     2026-01-02T03:10:00Z
//	go        go1.26.8 linux/amd64
//
// Lines whose fact is unknown are left out.
func (b buildInfo) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "sluice %s\n", b.Version)
	if b.Revision != "" {
		mod := ""
		if b.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(&s, "revision  %s%s\n", b.Revision, mod)
	}
	if b.Committed != "" {
		fmt.Fprintf(&s, "committed %s\n", b.Committed)
	}
	if b.Built != "" {
		fmt.Fprintf(&s, "built     %s\n", b.Built)
	}
	fmt.Fprintf(&s, "go        %s %s\n", b.GoVersion, b.Platform)
	return s.String()
}

func newVersion() *cobra.Command {
	info := readBuildInfo()
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), info.String())
			return err
		},
	}
}

// versionTemplate is cobra's template for --version: the same text as the
// version command. Braces in info would be template syntax; there are
// none in versions, hashes or times, but they are quoted to be sure.
func versionTemplate(info buildInfo) string {
	return strings.NewReplacer("{{", `{{"{{"}}`).Replace(info.String())
}

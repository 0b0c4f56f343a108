package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/sluicelab/sluice/internal/clock"
)

// newGenDocs is the hidden command the release build runs to write the
// man pages (section 1, one per command) and the shell completion scripts
// from the command tree itself, so they cannot drift from the flags.
func newGenDocs() *cobra.Command {
	var manDir, complDir, date string
	cmd := &cobra.Command{
		Use:    "gen-docs [--man DIR] [--completion DIR] [--date RFC3339]",
		Short:  "Write the man pages and shell completion scripts",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if manDir == "" && complDir == "" {
				return usageErr(errors.New("gen-docs: give --man DIR, --completion DIR or both"))
			}
			root := cmd.Root()
			if manDir != "" {
				when, err := manDate(date)
				if err != nil {
					return usageErr(err)
				}
				if err := genMan(root, manDir, when); err != nil {
					return err
				}
			}
			if complDir != "" {
				if err := genCompletion(root, complDir); err != nil {
					return err
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&manDir, "man", "", "write the man pages (sluice.1, sluice-serve.1, ...) into this directory")
	fl.StringVar(&complDir, "completion", "", "write the completion scripts into this directory: bash/sluice, zsh/_sluice, fish/sluice.fish")
	fl.StringVar(&date, "date", "", "date in the man pages' footer (RFC 3339); empty: the commit time of the build, else today")
	return cmd
}

// manDate is the footer date of the man pages: the flag's, else the
// commit time stamped in the binary (reproducible), else now.
func manDate(flag string) (time.Time, error) {
	if flag == "" {
		flag = readBuildInfo().Committed
	}
	if flag == "" {
		return clock.Real{}.Now().UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, flag)
	if err != nil {
		return time.Time{}, fmt.Errorf("gen-docs: --date: bad value %q (want RFC 3339, e.g. 2026-01-02T03:04:05Z)", flag)
	}
	return t.UTC(), nil
}

func genMan(root *cobra.Command, dir string, when time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gen-docs: %w", err)
	}
	hdr := &doc.GenManHeader{Title: "SLUICE", Section: "1", Date: &when, Source: "sluice " + root.Version, Manual: "sluice manual"}
	root.DisableAutoGenTag = true
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return fmt.Errorf("gen-docs: man pages: %w", err)
	}
	return nil
}

// genCompletion writes the completion scripts, by shell, under the names
// each shell's completion directory expects.
func genCompletion(root *cobra.Command, dir string) error {
	files := []struct {
		shell, file string
		gen         func(root *cobra.Command, path string) error
	}{
		{"bash", "sluice", func(r *cobra.Command, p string) error { return r.GenBashCompletionFileV2(p, true) }},
		{"zsh", "_sluice", func(r *cobra.Command, p string) error { return r.GenZshCompletionFile(p) }},
		{"fish", "sluice.fish", func(r *cobra.Command, p string) error { return r.GenFishCompletionFile(p, true) }},
	}
	for _, c := range files {
		sub := filepath.Join(dir, c.shell)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return fmt.Errorf("gen-docs: %w", err)
		}
		if err := c.gen(root, filepath.Join(sub, c.file)); err != nil {
			return fmt.Errorf("gen-docs: %s completion: %w", c.shell, err)
		}
	}
	return nil
}

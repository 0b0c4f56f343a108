package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newLab() *cobra.Command {
	var quick bool
	var dsn, out, backend string
	cmd := &cobra.Command{
		Use:   "lab [--quick] [--dsn URL] [--out DIR]",
		Short: "Run the reference experiments (latency; flow control) and write a report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &exitError{code: 1, err: errors.New("lab: not yet available")}
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "small scale, under 2 minutes")
	cmd.Flags().StringVar(&dsn, "dsn", "", "run against this PostgreSQL or MySQL URL instead of the embedded backend")
	cmd.Flags().StringVar(&backend, "backend", "embedded", "embedded or postgres (a throwaway server from the installed binaries)")
	cmd.Flags().StringVar(&out, "out", "", "directory for report.md, report.json and SVG charts")
	return cmd
}

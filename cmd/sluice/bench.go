package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicelab/sluice/internal/bench"
)

func newBench() *cobra.Command {
	return &cobra.Command{
		Use:   "bench [options] WORKLOAD prepare|run|cleanup|help",
		Short: "sysbench-compatible OLTP benchmark for MySQL and PostgreSQL",
		Long: `sysbench-compatible OLTP benchmark. The command line is sysbench's: a sysbench
command works after replacing "sysbench" with "sluice bench". Run
"sluice bench --help" for the options and workloads, "sluice bench WORKLOAD
help" for a workload's, and "sluice bench --version" for the sysbench
version it reproduces.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if bench.VersionRequested(args) {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), bench.VersionLine(cmd.Root().Version))
				return err
			}
			code := bench.Main(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// usageErr is a bad command line or configuration: exit code 2.
func usageErr(err error) error { return &exitError{code: 2, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "sluice: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "sluice: %v\n", err)
	return 2
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Network workload manager and latency lab for PostgreSQL and MySQL",
		Long: `sluice sits on the wire between database clients and servers. It knows which
user, pool and statement each byte belongs to; it emulates networks (delay,
jitter, bandwidth, stalls), schedules a shared link by priority, limits
low-priority traffic, and demotes or cancels statements that break exception
rules. It ships a sysbench-compatible benchmark and a lab that reproduces the
reference experiments.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --version prints what the version command does; gen-docs is hidden.
	info := readBuildInfo()
	root.Version = info.Version
	root.SetVersionTemplate(versionTemplate(info))
	root.AddCommand(newGenDocs())
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr(err) })
	root.AddCommand(newServe(), newBench(), newLab(), newVersion())
	root.AddCommand(newReload(), newWhatIf())
	return root
}

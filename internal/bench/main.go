package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// Exit statuses of Main.
const (
	ExitOK      = 0
	ExitRuntime = 1 // the database failed or could not be reached
	ExitUsage   = 2 // the command line is wrong
)

// Main runs `sluice bench` with sysbench's command line: args are
// everything after "bench". It returns the process exit code: 0 ok, 1
// runtime error, 2 usage error. Reports go to stdout; an error is one line
// on stderr, "sluice bench: ...".
//
// With --format=json, run prints one JSON document; prepare and cleanup
// print their progress on stderr and a one-line JSON summary on stdout.
//
// Main owns the process while it runs: for run and prepare, unless
// GOMAXPROCS is set in the environment, it lowers GOMAXPROCS to one
// scheduler thread per 16 connections (--threads for run, --tables for
// prepare; never above the current setting) and restores it on return.
// A benchmark client spends its time waiting for answers; idle scheduler
// threads only spin up and back down on every answer, and on a machine
// shared with the server that costs the server CPU. For a run under
// --io-model=thread (the default) it sets one scheduler thread per
// connection and one more instead: each worker keeps its processor while
// blocked in a system call, and one that must wait for a processor when
// its answer comes costs a hand-off.
// Library callers of Run and Prepare keep their own setting.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, workload, command, err := ParseArgs(args)
	if err != nil {
		return fail(stderr, err)
	}
	conns := 0
	switch command {
	case CmdRun:
		conns = o.Threads
	case CmdPrepare:
		conns = o.Tables
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); conns > 0 && !set {
		prev := runtime.GOMAXPROCS(0)
		procs := max(1, min(prev, (conns+15)/16))
		if o.IOModel == IOThread && command == CmdRun {
			procs = conns + 1
		}
		runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
	}
	if command == CmdHelp {
		return writeHelp(stdout, stderr, args, workload)
	}
	if workload == "" {
		return fail(stderr, usageErrorf("no workload given (see sluice bench --help)"))
	}
	if command == "" {
		return fail(stderr, usageErrorf("workload %s needs a command: prepare, run, cleanup or help", workload))
	}
	human := o.Format == FormatHuman
	progress := stdout
	if !human {
		progress = stderr
	}
	clk := o.clock()
	start := clk.Now()
	switch command {
	case CmdRun:
		_, err = Run(ctx, o, stdout)
	case CmdPrepare:
		if human && o.Verbosity >= 3 {
			io.WriteString(stdout, header(o.Driver))
		}
		err = Prepare(ctx, o, progress)
	case CmdCleanup:
		if human && o.Verbosity >= 3 {
			io.WriteString(stdout, header(o.Driver))
		}
		err = cleanup(ctx, &o, progress)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if !human && command != CmdRun {
		b, _ := json.Marshal(map[string]any{
			"command":    command,
			"workload":   workload,
			"driver":     o.Driver,
			"tables":     o.Tables,
			"table_size": o.TableSize,
			"time_sec":   clk.Now().Sub(start).Seconds(),
		})
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return ExitOK
}

// fail prints err as one line and returns its exit status.
func fail(stderr io.Writer, err error) int {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(stderr, "sluice bench: %s\n", msg)
	if IsUsage(err) {
		return ExitUsage
	}
	return ExitRuntime
}

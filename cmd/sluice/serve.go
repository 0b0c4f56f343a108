package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/cpulatency"
	"github.com/sluicelab/sluice/internal/cpuset"
	"github.com/sluicelab/sluice/internal/stack"
)

type serveFlags struct {
	config    string
	listen    string
	upstream  string
	protocol  string
	link      string
	admin     string
	http      string
	catalog   string
	name      string
	logLevel  string
	logFormat string
	procs     int
	loops     int
	fastPath  string
	cpus      string
	cpuLat    string

	tlsCert, tlsKey     string
	upstreamTLS         bool
	upstreamTLSCA       string
	upstreamTLSInsecure bool
	pprof               string
}

func newServe() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--config FILE] [--listen ADDR --upstream ADDR --protocol postgres|mysql|tcp]",
		Short: "Run the proxy",
		Long: `Run the proxy. Routes come from --config FILE (YAML, several routes) and/or
from --listen/--upstream/--protocol (one route, named "cli"). The route given
by flags attaches to the link --link names ("default" unless given).

SIGHUP re-reads --config (and the flags and environment given at start) and
applies it without dropping the sessions of unchanged routes; so do
'sluice reload', the console's RELOAD and POST /api/reload. A configuration
with any error is refused whole and the running one stays.`,
		Example: `  sluice serve --listen 127.0.0.1:6432 --upstream 127.0.0.1:5432 --protocol postgres
  sluice serve --config sluice.yaml --admin 127.0.0.1:6433
  sluice serve --listen :6432 --upstream db.example.com:5432 --protocol postgres \
      --tls-cert server.crt --tls-key server.key --upstream-tls`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "YAML configuration file")
	fl.StringVar(&f.listen, "listen", "", "listen address of a route (host:port)")
	fl.StringVar(&f.upstream, "upstream", "", "upstream address of that route (host:port, or the absolute path of a Unix socket)")
	fl.StringVar(&f.protocol, "protocol", "tcp", "protocol of that route: postgres, mysql or tcp")
	fl.StringVar(&f.link, "link", "default", "link of that route")
	fl.StringVar(&f.admin, "admin", "", "admin console address (PostgreSQL protocol)")
	fl.StringVar(&f.http, "http", "", "HTTP API address")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM file) offered to the clients of the --listen route; needs --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "private key (PEM file) of --tls-cert")
	fl.BoolVar(&f.upstreamTLS, "upstream-tls", false, "TLS to the --upstream server, verified against the system roots and the upstream's host name (verify-full)")
	fl.StringVar(&f.upstreamTLSCA, "upstream-tls-ca", "", "verify the upstream's certificate against this CA (PEM file) instead of the system roots; implies --upstream-tls")
	fl.BoolVar(&f.upstreamTLSInsecure, "upstream-tls-insecure", false, "TLS to the upstream without verifying its certificate (encryption only; testing); implies --upstream-tls")
	fl.StringVar(&f.catalog, "catalog", "", "catalog file (rules, pools, users, links, settings), or etcd://host1:2379,host2:2379/prefix to keep it in etcd")
	fl.StringVar(&f.name, "name", "", "this instance's name in a fleet (instance_name; default: the host name and the admin console's port)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.cpuLat, "cpu-latency", "", "while serving, hold a PM QoS request that no CPU take longer than this to leave idle (e.g. 0s: idle CPUs poll), so emulated delays are not lengthened by deep idle states; needs root; empty: no request")
	fl.StringVar(&f.pprof, "pprof", "", "serve the runtime's profiles (net/http/pprof) on this address, for measurement only; empty: none")
	fl.MarkHidden("pprof")
	fl.StringVar(&f.fastPath, "fast-path", "", "relay in the kernel (BPF sockmap) the PostgreSQL and MySQL sessions whose bytes sluice need not touch: auto (when the kernel allows it), kernel (refuse to start without it) or off; empty: the config's fast_path, else auto")
	fl.IntVar(&f.loops, "event-loops", 1, "event loops that relay the sessions needing no pump of their own (no emulation, a link that does not make bytes wait, plain sockets); 0: none, every session on its own pumps")
	fl.IntVar(&f.procs, "procs", defaultProcs(), "CPUs the proxy may use at once (GOMAXPROCS); the default, half the CPUs, leaves the rest to the database and its clients")
	fl.StringVar(&f.cpus, "cpus", "", "pin the proxy's threads to these CPUs (a list such as 0 or 0-3,6, as taskset -c takes); --procs then defaults to their number; emulated delays are most precise with the proxy on a CPU of its own; empty: no pinning")
	return cmd
}

func newLogger(w *os.File, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: bad value %q (want debug, info, warn or error)", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: bad value %q (want text or json)", format)
}

// loadConfig merges the config file and the flags and checks the
// result as a whole.
func loadConfig(f serveFlags) (*config.Config, error) {
	cfg := &config.Config{}
	if f.config != "" {
		c, err := config.Load(f.config)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	fl := config.Flags{Admin: f.admin, HTTP: f.http, Catalog: f.catalog, Name: f.name, FastPath: f.fastPath,
		TLSCert: f.tlsCert, TLSKey: f.tlsKey, UpstreamTLS: f.upstreamTLS, UpstreamTLSCA: f.upstreamTLSCA, UpstreamTLSInsecure: f.upstreamTLSInsecure}
	if f.listen != "" || f.upstream != "" {
		fl.Listen, fl.Upstream, fl.Protocol, fl.Link = f.listen, f.upstream, f.protocol, f.link
	}
	if err := cfg.ApplyFlags(fl); err != nil {
		return nil, err
	}
	return cfg, nil
}

func serve(ctx context.Context, cmd *cobra.Command, f serveFlags) error {
	log, err := newLogger(os.Stderr, f.logLevel, f.logFormat)
	if err != nil {
		return usageErr(err)
	}
	cfg, err := loadConfig(f)
	if err != nil {
		return usageErr(err)
	}
	if f.loops < 0 {
		return usageErr(fmt.Errorf("--event-loops: bad value %d (want 0 or more)", f.loops))
	}
	if f.procs < 1 {
		return usageErr(fmt.Errorf("--procs: bad value %d (want 1 or more)", f.procs))
	}
	if f.cpus != "" {
		n, err := pin(f.cpus)
		if err != nil {
			return usageErr(fmt.Errorf("--cpus: %w", err))
		}
		if !cmd.Flags().Changed("procs") {
			f.procs = n
		}
		log.Info("pinned to CPUs", "cpus", f.cpus, "procs", f.procs)
	}
	if f.cpuLat != "" {
		bound, err := cpulatency.ParseBound(f.cpuLat)
		if err != nil {
			return usageErr(fmt.Errorf("--cpu-latency: %w", err))
		}
		req, err := cpulatency.Hold(cpulatency.Device, bound)
		if err != nil {
			return err
		}
		defer req.Close()
		log.Info("holding CPU latency request", "bound", bound.String())
	}
	runtime.GOMAXPROCS(f.procs)
	if f.pprof != "" {
		stop, err := servePprof(f.pprof, log)
		if err != nil {
			return usageErr(fmt.Errorf("--pprof: %w", err))
		}
		defer stop()
	}
	// SIGHUP would otherwise end the process and every session (its
	// default action); one that comes while the stack starts is served
	// once it runs.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	applyEnv(cfg)
	load := func() (*config.Config, error) {
		c, err := loadConfig(f)
		if err != nil {
			return nil, err
		}
		applyEnv(c)
		return c, nil
	}
	loops := f.loops
	if loops == 0 {
		loops = -1 // none
	}
	st, err := stack.New(ctx, stack.Options{Config: cfg, Clock: clock.Real{}, Logger: log, Version: version, Load: load, Loops: loops})
	if err != nil {
		return stackErr(err)
	}
	for ctx.Err() == nil {
		select {
		case <-hup:
			log.Info("SIGHUP received: reloading the configuration", "file", f.config)
			// The stack logs the outcome: INFO with the changes, or
			// ERROR naming the file, key and value.
			_, _ = st.ReloadConfig(ctx)
		case <-ctx.Done():
		}
	}
	grace := st.Config().Grace
	log.Info("shutting down", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// The sessions drain for the grace less a reserve in which the rest
	// closes (the fleet's deregistration among it).
	dctx, dcancel := context.WithTimeout(sctx, grace-min(time.Second, grace/4))
	defer dcancel()
	if err := st.Shutdown(dctx); err != nil {
		log.Warn("grace period over; closed remaining sessions", "err", err)
	}
	closeWithin(sctx, st, log)
	return nil
}

// closeWithin closes st, but returns when ctx (the shutdown grace) ends
// even if Close has not: what Close tells etcd on the way out (the
// lease's revoke, the budget's resignation) waits for an etcd that may
// be gone, and the shutdown must end within its grace whatever etcd
// does. The process then exits, and its sockets close with it; the
// lease expires in etcd on its own.
func closeWithin(ctx context.Context, st *stack.Stack, log *slog.Logger) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Close()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		log.Warn("grace period over before everything closed (etcd not answering?); exiting")
	}
}

// applyEnv puts the secrets of the environment into cfg: a non-empty
// SLUICE_ADMIN_PASSWORD, SLUICE_HTTP_TOKEN, SLUICE_ETCD_PASSWORD or
// SLUICE_FLEET_TOKEN wins over the file's.
func applyEnv(cfg *config.Config) {
	if pw := os.Getenv("SLUICE_ADMIN_PASSWORD"); pw != "" {
		cfg.Admin.Password = pw
	}
	if tok := os.Getenv("SLUICE_HTTP_TOKEN"); tok != "" {
		cfg.HTTP.Token = tok
	}
	if pw := os.Getenv("SLUICE_ETCD_PASSWORD"); pw != "" {
		cfg.SetEtcdPassword(pw)
	}
	if tok := os.Getenv("SLUICE_FLEET_TOKEN"); tok != "" {
		cfg.Fleet.Token = tok
	}
}

// stackErr maps an error of stack.New to the exit code: 2 for a
// configuration the stack refused, 1 otherwise.
func stackErr(err error) error {
	var ce *stack.ConfigError
	if errors.As(err, &ce) {
		return usageErr(err)
	}
	return &exitError{code: 1, err: err}
}

// pin restricts the process to the CPU list cpus and returns how many
// CPUs that is.
func pin(cpus string) (int, error) {
	set, err := cpuset.Parse(cpus)
	if err != nil {
		return 0, err
	}
	allowed, err := cpuset.Allowed()
	if err != nil {
		return 0, err
	}
	if err := cpuset.Pin(set, allowed); err != nil {
		return 0, err
	}
	return set.Count(), nil
}

// defaultProcs is half the CPUs, at least one. A proxy's work per message
// is mostly system calls and wake-ups; on a small machine shared with the
// database, running its goroutines on fewer threads costs fewer
// cross-thread wake-ups and leaves the other CPUs to the database.
func defaultProcs() int { return max(1, runtime.NumCPU()/2) }

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:16507", "address to accept clients on")
	upstream := flag.String("upstream", "127.0.0.1:15432", "address to relay each client to")
	var cfg config
	flag.IntVar(&cfg.loops, "loops", 1, "event loops, each a goroutine")
	flag.BoolVar(&cfg.edge, "et", false, "edge-triggered registration")
	lt := flag.Bool("lt", false, "level-triggered registration (the default; overrides -et)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file when the process ends")
	profileSeconds := flag.Int("profile-seconds", 0, "with -cpuprofile: stop profiling after this many seconds (0: at exit)")
	flag.Parse()
	if *lt {
		cfg.edge = false
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *listen, *upstream, cfg, *cpuprofile, *profileSeconds); err != nil {
		fmt.Fprintln(os.Stderr, "evrelay:", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, listen, upstream string, cfg config, cpuprofile string, profileSeconds int) error {
	if cfg.loops < 1 {
		return fmt.Errorf("-loops %d: need at least one", cfg.loops)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		done := make(chan struct{})
		defer func() {
			close(done)
			pprof.StopCPUProfile()
			f.Close()
		}()
		if profileSeconds > 0 {
			go func() {
				t := time.NewTimer(time.Duration(profileSeconds) * time.Second)
				defer t.Stop()
				select {
				case <-t.C:
					pprof.StopCPUProfile()
					log.Info("profile written", "file", cpuprofile)
				case <-done:
				}
			}()
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	log.Info("relaying with an event loop", "listen", ln.Addr().String(), "upstream", upstream,
		"loops", cfg.loops, "edge", cfg.edge)
	return serve(ctx, log, ln, upstream, cfg, nil)
}

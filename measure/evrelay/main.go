package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"time"

	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	listen, upstream := harness.RelayFlags("127.0.0.1:16507")
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
	harness.Main("evrelay", func(ctx context.Context) error {
		return run(ctx, log, *listen, *upstream, cfg, *cpuprofile, *profileSeconds)
	})
}

func run(ctx context.Context, log *slog.Logger, listen, upstream string, cfg config, cpuprofile string, profileSeconds int) error {
	if cfg.loops < 1 {
		return fmt.Errorf("-loops %d: need at least one", cfg.loops)
	}
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

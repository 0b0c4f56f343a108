package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:16500", "address to accept clients on")
	upstream := flag.String("upstream", "127.0.0.1:15432", "address to relay each client to")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := serve(ctx, log, *listen, *upstream); err != nil {
		fmt.Fprintln(os.Stderr, "kernelrelay:", err)
		os.Exit(1)
	}
}

// serve relays every client accepted on listen to upstream until ctx ends.
func serve(ctx context.Context, log *slog.Logger, listen, upstream string) error {
	r, err := newRelay()
	if err != nil {
		return err
	}
	defer r.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	log.Info("relaying in the kernel", "listen", ln.Addr().String(), "upstream", upstream)
	return harness.ServePairs(ctx, log, ln, upstream, func(c, u net.Conn) {
		go func() {
			if err := r.splice(c.(*net.TCPConn), u.(*net.TCPConn)); err != nil {
				log.Warn("relay", "err", err)
			}
		}()
	})
}

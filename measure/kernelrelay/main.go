package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"os"

	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	listen, upstream := harness.RelayFlags("127.0.0.1:16500")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	harness.Main("kernelrelay", func(ctx context.Context) error { return serve(ctx, log, *listen, *upstream) })
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

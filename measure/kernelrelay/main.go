package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
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
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	log.Info("relaying in the kernel", "listen", ln.Addr().String(), "upstream", upstream)
	d := net.Dialer{Timeout: 5 * time.Second}
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			log.Warn("accept", "err", err)
			continue
		}
		go func() {
			u, err := d.DialContext(ctx, "tcp", upstream)
			if err != nil {
				log.Warn("dial upstream", "err", err)
				c.Close()
				return
			}
			if err := r.splice(c.(*net.TCPConn), u.(*net.TCPConn)); err != nil {
				log.Warn("relay", "err", err)
			}
		}()
	}
}

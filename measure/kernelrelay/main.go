package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	listen, upstream := harness.RelayFlags("127.0.0.1:16500")
	proto := flag.String("proto", "postgres", "the upstream's protocol: postgres or mysql")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	harness.Main("kernelrelay", func(ctx context.Context) error { return serve(ctx, log, *listen, *upstream, *proto) })
}

// serve relays every client accepted on listen to upstream until ctx ends.
func serve(ctx context.Context, log *slog.Logger, listen, upstream, proto string) error {
	r := &relay{proto: fastpath.PostgreSQL}
	switch proto {
	case "postgres":
	case "mysql":
		r.proto = fastpath.MySQL
	default:
		return fmt.Errorf("-proto %q: want postgres or mysql", proto)
	}
	k, err := fastpath.Open(clock.Real{})
	if err != nil {
		return err
	}
	defer k.Close()
	r.k = k
	// The program copies each chunk it relays into its journal and
	// passes chunks to user space once the journal is full: this relay
	// observes nothing, so it empties the journal as the kernel fills it.
	j, err := k.Journal()
	if err != nil {
		return err
	}
	defer j.Close()
	go discardJournal(ctx, j)
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

// discardJournal empties j whenever it has records, until ctx ends.
func discardJournal(ctx context.Context, j *fastpath.Journal) {
	fds := []unix.PollFd{{Fd: int32(j.FD()), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		if _, err := unix.Poll(fds, 100); err != nil && err != unix.EINTR {
			return
		}
		if err := j.Drain(func(fastpath.Record) {}); err != nil {
			return
		}
	}
}

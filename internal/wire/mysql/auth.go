package mysql

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

// relayAuth relays the authentication exchange that follows the
// handshake response when the two legs number their packets differently
// (TLS on one leg only adds an SSLRequest, and so one sequence id, to
// that leg). A server packet with sequence id s reaches the client as
// s-offset, a client packet with id c reaches the server as c+offset; the
// payloads are untouched. It returns when the server's OK or ERR has been
// forwarded, with the client bytes it read past the exchange (the start
// of the first command), which the relay must forward first. A client
// packet over maxLoginPacket ends the exchange with a *tooLargeError.
func relayAuth(client, up net.Conn, offset int) ([]byte, error) {
	var done atomic.Bool
	type result struct {
		buf []byte
		err error
	}
	fromClient := make(chan result, 1)
	go func() {
		var buf []byte
		var err error
		defer func() {
			if err != nil && !done.Load() {
				up.SetReadDeadline(clock.LongAgo) // the exchange cannot finish
			}
		}()
		for {
			if buf, err = readAppend(client, buf[:0], 4); err != nil {
				fromClient <- result{buf, err}
				return
			}
			if done.Load() { // the exchange is over: this begins a command
				fromClient <- result{buf, nil}
				return
			}
			n := int(buf[0]) | int(buf[1])<<8 | int(buf[2])<<16
			if n > maxLoginPacket {
				err = &tooLargeError{seq: buf[3], size: n, max: maxLoginPacket}
				fromClient <- result{nil, err}
				return
			}
			if buf, err = readAppend(client, buf, n); err != nil {
				fromClient <- result{buf, err}
				return
			}
			if done.Load() { // the exchange is over: this is a command
				fromClient <- result{buf, nil}
				return
			}
			buf[3] += uint8(offset)
			if _, err = up.Write(buf); err != nil {
				fromClient <- result{nil, err}
				return
			}
		}
	}()

	serverErr := func() error {
		continued := false
		for {
			pkt, err := readPhysical(up)
			if err != nil {
				return err
			}
			final := !continued && len(pkt) > 4 && (pkt[4] == 0x00 || pkt[4] == 0xff)
			continued = len(pkt)-4 == maxPayload
			pkt[3] -= uint8(offset)
			if final {
				done.Store(true)
			}
			if _, err := client.Write(pkt); err != nil {
				return err
			}
			if final && !continued {
				return nil
			}
		}
	}()
	// Stop the client reader: it is blocked on a read, or about to be.
	done.Store(true)
	client.SetReadDeadline(clock.LongAgo)
	r := <-fromClient
	client.SetReadDeadline(time.Time{})
	if r.err != nil && !errors.Is(r.err, os.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("from client: %w", r.err)
	}
	if serverErr != nil {
		return nil, fmt.Errorf("from upstream: %w", serverErr)
	}
	return r.buf, nil
}

// readPhysical reads one physical packet, header included.
func readPhysical(r io.Reader) ([]byte, error) {
	b, err := readAppend(r, nil, 4)
	if err != nil {
		return nil, err
	}
	n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	if n > maxHandshake && n != maxPayload {
		return nil, fmt.Errorf("server packet of %d bytes during authentication", n)
	}
	return readAppend(r, b, n)
}

package mysql

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
)

// TestDownRemaining: a result set's rows, cut at every offset, then
// observed Remaining bytes at a time, end exactly at a logical packet's
// end, where errSeq finds the sequence id after the server's last packet.
func TestDownRemaining(t *testing.T) {
	var rows []byte
	ends := map[int]bool{}
	for i := range 4 {
		rows = append(rows, pk(uint8(4+i), lstr(fmt.Sprint(i)), lstr(string(bytes.Repeat([]byte{'x'}, 40*i))))...)
		ends[len(rows)] = true
	}
	ends[0] = true
	for cut := range len(rows) + 1 {
		reg := session.NewRegistry(session.Options{})
		sess := reg.Open(session.Info{}, t0)
		u, d := newObservers(connConfig{
			sess: sess, clock: clock.NewFake(t0), log: slog.New(slog.DiscardHandler),
			maxSQL: defaultMaxSQL, maxPacket: defaultMaxPacket, caps: testCaps,
		})
		if err := run([]step{
			up(query("SELECT * FROM big")),
			down(pk(1, []byte{2}), pk(2, colDef("a")), pk(3, colDef("b"))),
		}, u, d, 0); err != nil {
			t.Fatal(err)
		}
		if err := d.Observe(rows[:cut]); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		at := cut
		for {
			n, ok := d.Remaining()
			if !ok {
				t.Fatalf("cut %d, at %d: no boundary", cut, at)
			}
			if n == 0 {
				break
			}
			if at+n > len(rows) {
				t.Fatalf("cut %d, at %d: Remaining %d runs past the %d bytes", cut, at, n, len(rows))
			}
			if err := d.Observe(rows[at : at+n]); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			at += n
		}
		if !ends[at] {
			t.Fatalf("cut %d: Remaining reached 0 at %d, inside a packet", cut, at)
		}
		for want := cut; ; want++ {
			if ends[want] {
				if at != want {
					t.Errorf("cut %d: finished at %d, want the packet's end at %d", cut, at, want)
				}
				break
			}
		}
		if _, ok := d.errSeq(0); !ok {
			t.Errorf("cut %d: errSeq finds no place for an ERR at the boundary %d", cut, at)
		}
	}
}

package mysql

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluicelab/sluice/internal/wire/wiretest"
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
		_, d := bigResult(t)
		at := wiretest.WalkRemaining(t, d, rows, cut, ends)
		if want := wiretest.NextEnd(ends, cut); at != want {
			t.Errorf("cut %d: finished at %d, want the packet's end at %d", cut, at, want)
		}
		if _, ok := d.errSeq(0); !ok {
			t.Errorf("cut %d: errSeq finds no place for an ERR at the boundary %d", cut, at)
		}
	}
}

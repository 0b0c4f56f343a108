package fastpath

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// model walks a whole stream as the program walks it chunk by chunk, for
// the socket that receives it (client: it faces the client), and returns
// what the program must count: chunking must not change it.
func model(proto Proto, client bool, data []byte) (msgs uint64, types [256]uint32, status byte, broken bool) {
	if proto == PostgreSQL {
		for len(data) >= 5 {
			n := binary.BigEndian.Uint32(data[1:5])
			if n < 4 {
				return msgs, types, status, true
			}
			msgs++
			types[data[0]]++
			body := uint64(n - 4)
			if data[0] == 'Z' && !client && body > 0 && len(data) > 5 {
				status = data[5]
			}
			if uint64(len(data)-5) <= body {
				return msgs, types, status, false
			}
			data = data[5+body:]
		}
		return msgs, types, status, false
	}
	cont := false
	for len(data) >= 4 {
		n := int(data[0]) | int(data[1])<<8 | int(data[2])<<16
		seq := data[3]
		body := n
		switch {
		case cont:
		case n == 0:
			msgs++
		case len(data) < 5:
			return msgs, types, status, false
		default:
			msgs++
			if !client || seq == 0 {
				types[data[4]]++
			}
		}
		cont = n == 0xffffff
		if len(data)-4 <= body {
			return msgs, types, status, false
		}
		data = data[4+body:]
	}
	return msgs, types, status, false
}

// FuzzRelay sends a stream through a pair to an echo server in writes
// whose sizes ops gives, pausing or resuming the pair before a write
// whose op has its top bit set. The echo must be byte-identical, and the
// program's counts on both sockets must be the model's: any bytes (a
// framing that breaks included), any chunking, any hand-over between the
// kernel and user space.
func FuzzRelay(f *testing.F) {
	f.Add(true, []byte("Q\x00\x00\x00\x0dSELECT 1\x00Z\x00\x00\x00\x05I"), []byte{3, 0x85, 1})
	f.Add(false, []byte("\x09\x00\x00\x00\x03SELECT 1\x01\x00\x00\x01\x0e"), []byte{0x81, 2, 0x82})
	f.Fuzz(func(t *testing.T, postgres bool, data, ops []byte) {
		if len(ops) == 0 || len(data) > 1<<16 {
			return
		}
		proto := MySQL
		if postgres {
			proto = PostgreSQL
		}
		k := openKernel(t)
		up := echoServer(t)
		cl, rl := newRelay(t, k, up, proto, nil)
		if err := rl.p.Resume(); err != nil {
			t.Fatal(err)
		}
		rl.start()
		go func() {
			for i, b := 0, data; len(b) > 0; i++ {
				op := ops[i%len(ops)]
				if op&0x80 != 0 {
					toggle := rl.resume
					if rl.resumed() {
						toggle = rl.hold
					}
					if err := toggle(); err != nil {
						t.Error(err)
					}
				}
				n := min(len(b), 1+int(op&0x7f)*97)
				if _, err := cl.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
			}
			cl.CloseWrite()
		}()
		got, err := io.ReadAll(cl)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("echo differs: %d bytes back of %d", len(got), len(data))
		}
		if err := rl.wait(); err != nil {
			t.Fatal(err)
		}
		for side, client := range []bool{true, false} {
			st, err := rl.p.Stats(side)
			if err != nil {
				t.Fatal(err)
			}
			msgs, types, status, broken := model(proto, client, data)
			if st.Bytes != uint64(len(data)) || st.Redirected+st.Passed != st.Bytes || st.Broken != broken {
				t.Fatalf("side %d: %d bytes, %d redirected, %d passed, broken %v; want %d bytes, broken %v",
					side, st.Bytes, st.Redirected, st.Passed, st.Broken, len(data), broken)
			}
			if st.Messages != msgs || st.Types != types || st.Status != status {
				t.Fatalf("side %d: %d messages, status %q; want %d, %q (types equal: %v)", side, st.Messages, st.Status, msgs, status, st.Types == types)
			}
		}
	})
}

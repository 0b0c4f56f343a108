package pg

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/wire"
)

// encodeAll encodes backend messages back to back.
func encodeAll(t testing.TB, msgs ...pgproto3.BackendMessage) []byte {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// filterChunks runs stream through a saslFilter in chunks of size n (0:
// whole) and returns what it forwards.
func filterChunks(t testing.TB, stream []byte, n int) []byte {
	t.Helper()
	f := newSASLFilter(wire.Nop{})
	var out []byte
	for len(stream) > 0 {
		k := len(stream)
		if n > 0 && n < k {
			k = n
		}
		got, err := f.Rewrite(context.Background(), stream[:k])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got...)
		stream = stream[k:]
	}
	rest, _ := f.Rewrite(context.Background(), nil)
	return append(out, rest...)
}

func TestSASLFilter(t *testing.T) {
	after := []pgproto3.BackendMessage{
		&pgproto3.AuthenticationOk{},
		&pgproto3.ParameterStatus{Name: "server_version", Value: "15"},
		&pgproto3.ReadyForQuery{TxStatus: 'I'},
		// Past AuthenticationOk nothing is touched, even a SASL offer.
		&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256-PLUS"}},
	}
	tests := []struct {
		name string
		in   []pgproto3.BackendMessage
		want []pgproto3.BackendMessage
	}{
		{"plus dropped",
			[]pgproto3.BackendMessage{&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"}}},
			[]pgproto3.BackendMessage{&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}}}},
		{"no plus", []pgproto3.BackendMessage{&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}}}, nil},
		{"plus alone stays", []pgproto3.BackendMessage{&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256-PLUS"}}}, nil},
		{"md5", []pgproto3.BackendMessage{&pgproto3.AuthenticationMD5Password{Salt: [4]byte{1, 2, 3, 4}}}, nil},
		{"error ends it",
			[]pgproto3.BackendMessage{&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28000", Message: "no"},
				&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"}}}, nil},
	}
	for _, tt := range tests {
		in := encodeAll(t, append(tt.in, after...)...)
		want := in
		if tt.want != nil {
			want = encodeAll(t, append(tt.want, after...)...)
		}
		for _, n := range []int{0, 1, 3, 7, 64} {
			if got := filterChunks(t, in, n); !bytes.Equal(got, want) {
				t.Errorf("%s, chunks of %d:\n got %q\nwant %q", tt.name, n, got, want)
			}
		}
	}
}

// FuzzSASLFilter: any server stream, in any chunking, comes out whole and
// in order, with at most the -PLUS names of one AuthenticationSASL left
// out; the filter never panics.
func FuzzSASLFilter(f *testing.F) {
	f.Add(encodeAll(f, &pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"}},
		&pgproto3.AuthenticationSASLContinue{Data: []byte("r=abc,s=c2FsdA==,i=4096")}, &pgproto3.AuthenticationOk{}), uint8(5))
	f.Add([]byte("R\x00\x00\x00\x08\x00\x00\x00\x0aSCRAM"), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, n uint8) {
		whole := filterChunks(t, stream, 0)
		if got := filterChunks(t, stream, int(n)); !bytes.Equal(got, whole) {
			t.Fatalf("chunks of %d forward %q, whole %q", n, got, whole)
		}
		if !bytes.Contains(stream, []byte("-PLUS")) && !bytes.Equal(whole, stream) {
			t.Fatalf("a stream without -PLUS changed: %q -> %q", stream, whole)
		}
		if len(whole) > len(stream) {
			t.Fatalf("output %d bytes, input %d", len(whole), len(stream))
		}
	})
}

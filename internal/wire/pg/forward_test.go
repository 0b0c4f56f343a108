package pg

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// newFakeForwarder returns the test Forwarder (see wiretest.Forwarder),
// failing the pool 'bad' with "disk on fire".
func newFakeForwarder() *wiretest.Forwarder {
	return &wiretest.Forwarder{Failure: "disk on fire"}
}

// takeNothing is a Forwarder that takes no statement.
type takeNothing struct{}

func (takeNothing) Forwards(string) bool { return true }
func (takeNothing) Forward(_ context.Context, sql string) (string, bool, error) {
	return sql, false, nil
}

func query(sql string) []byte { return enc(&pgproto3.Query{String: sql}) }

// newForwardRig returns the forwarding observers of a session.
func newForwardRig(t testing.TB, fwd wire.Forwarder) (*rig, *forwardUp, *forwardDown) {
	r := newRig(t, Options{})
	fu, fd := forwarding(fwd, New(Options{}).log, r.sess, r.up, r.down)
	return r, fu, fd
}

// pump passes the chunks through Observe and Rewrite as the pump does
// and returns what would be forwarded.
func pump(t testing.TB, fu *forwardUp, chunks ...[]byte) []byte {
	t.Helper()
	var out []byte
	for _, c := range chunks {
		if err := fu.Observe(c); err != nil {
			t.Fatalf("Observe: %v", err)
		}
		b, err := fu.Rewrite(context.Background(), c)
		if err != nil {
			t.Fatalf("Rewrite: %v", err)
		}
		out = append(out, b...)
	}
	return out
}

func TestForwardRewrite(t *testing.T) {
	long := "CREATE USER x RESOURCE POOL 'p' PASSWORD '" + strings.Repeat("z", wire.MaxForwardQuery) + "'"
	in := bytes.Join([][]byte{
		query("CREATE USER u1 RESOURCE POOL 'p' PASSWORD 'pw1'"),
		query("SELECT 1"),
		enc(&pgproto3.Parse{Query: "CREATE USER u2 RESOURCE POOL 'p'"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		query("CREATE USER u3 RESOURCE POOL 'nope' PASSWORD 'x'"),
		query("CREATE USER u4 RESOURCE POOL 'bad'"),
		query(long),
		raw('Q', []byte("CREATE USER u5 RESOURCE POOL 'p'\x00junk\x00")),
		enc(&pgproto3.Terminate{}),
	}, nil)
	want := bytes.Join([][]byte{
		query("CREATE USER u1 PASSWORD 'pw1'"),
		query("SELECT 1"),
		enc(&pgproto3.Parse{Query: "CREATE USER u2 RESOURCE POOL 'p'"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		query(`DO $sluice$BEGIN RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = E'resource pool "nope" does not exist'; END$sluice$`),
		query(`DO $sluice$BEGIN RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = E'disk on fire'; END$sluice$`),
		query(long),
		raw('Q', []byte("CREATE USER u5 RESOURCE POOL 'p'\x00junk\x00")),
		enc(&pgproto3.Terminate{}),
	}, nil)

	check := func(name string, chunks ...[]byte) {
		t.Helper()
		fwd := newFakeForwarder()
		r, fu, fd := newForwardRig(t, fwd)
		if err := fd.Observe(startupDown); err != nil {
			t.Fatal(err)
		}
		got := pump(t, fu, chunks...)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: forwarded %d bytes, want %d\n got %q\nwant %q", name, len(got), len(want), clipBytes(got), clipBytes(want))
		}
		if len(fwd.Seen) != 4 { // the long Query and the malformed one are not shown
			t.Fatalf("%s: forwarder saw %d statements: %q", name, len(fwd.Seen), fwd.Seen)
		}
		// The statement records keep what the client sent, its password
		// hidden.
		if recs := r.records(); len(recs) == 0 || recs[0].SQL != "CREATE USER u1 RESOURCE POOL 'p' PASSWORD '***'" {
			t.Fatalf("%s: records %v", name, recs)
		}
	}
	check("one chunk", in)
	// Every split point in the first messages, and a split inside the
	// long Query's header and body.
	for k := 1; k < 200; k++ {
		check("split", in[:k], in[k:])
	}
	start := bytes.Index(in, query(long)[:20])
	for _, k := range []int{start + 2, start + 4096, start + wire.MaxForwardQuery} {
		check("split long", in[:k], in[k:])
	}
	var bytewise [][]byte
	for i := range 300 {
		bytewise = append(bytewise, in[i:i+1])
	}
	check("byte by byte", append(bytewise, in[300:])...)
}

func clipBytes(b []byte) []byte {
	if len(b) > 400 {
		return b[:400]
	}
	return b
}

// Before the server's first ReadyForQuery nothing is inspected: a client
// that sends a Query before it has logged in cannot bind anyone.
func TestForwardBeforeReady(t *testing.T) {
	fwd := newFakeForwarder()
	_, fu, fd := newForwardRig(t, fwd)
	pw := enc(&pgproto3.PasswordMessage{Password: "secret"})
	q := query("CREATE USER u1 RESOURCE POOL 'p'")
	if got := pump(t, fu, append(bytes.Clone(pw), q...)); !bytes.Equal(got, append(bytes.Clone(pw), q...)) {
		t.Fatalf("before ready: forwarded %q", got)
	}
	// AuthenticationOk without ReadyForQuery is not enough either.
	if err := fd.Observe(startupDown[:len(startupDown)-6]); err != nil {
		t.Fatal(err)
	}
	if got := pump(t, fu, q); !bytes.Equal(got, q) || len(fwd.Seen) != 0 {
		t.Fatalf("before ready: forwarded %q, forwarder saw %q", got, fwd.Seen)
	}
	if err := fd.Observe(startupDown[len(startupDown)-6:]); err != nil {
		t.Fatal(err)
	}
	if got := pump(t, fu, q); !bytes.Equal(got, query("CREATE USER u1")) {
		t.Fatalf("after ready: forwarded %q", got)
	}
}

// A chunk with nothing to rewrite is forwarded as it is, without a copy.
func TestForwardPassThroughIsInput(t *testing.T) {
	_, fu, fd := newForwardRig(t, newFakeForwarder())
	if err := fd.Observe(startupDown); err != nil {
		t.Fatal(err)
	}
	in := bytes.Join([][]byte{query("SELECT 1"), enc(&pgproto3.Sync{})}, nil)
	got, err := fu.Rewrite(context.Background(), in)
	if err != nil || len(got) != len(in) || &got[0] != &in[0] {
		t.Fatalf("Rewrite returned a copy or other bytes: %q, %v", got, err)
	}
}

func TestRaiseStatementTag(t *testing.T) {
	got := raiseStatement("42704", `pool "$sluice$" it's \ here`)
	want := `DO $sluice1$BEGIN RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = E'pool "$sluice$" it''s \\ here'; END$sluice1$`
	if got != want {
		t.Fatalf("raiseStatement = %s\nwant %s", got, want)
	}
	for _, c := range []string{"00000", "01000", "4270", "42p01", "42704x"} {
		if wire.ErrorState(c) {
			t.Errorf("ErrorState(%q) = true", c)
		}
	}
}

// Open installs the rewriter for the users the Forwarder names only.
func TestOpenForwardsOnlyNamedUsers(t *testing.T) {
	for _, tt := range []struct {
		user string
		want bool
	}{{"admin", true}, {"app", false}} {
		r := startOpen(t, Options{Forward: newFakeForwarder()}, nil)
		c := r.startup(t, map[string]string{"user": tt.user})
		_, isRewriter := c.Up.(wire.Rewriter)
		if isRewriter != tt.want {
			t.Errorf("user %s: rewriter %v, want %v", tt.user, isRewriter, tt.want)
		}
		if _, ok := c.Up.(*clientObserver); ok == tt.want {
			t.Errorf("user %s: up observer %T", tt.user, c.Up)
		}
	}
}

func FuzzForwardRewrite(f *testing.F) {
	f.Add(bytes.Join([][]byte{query("CREATE USER u1 RESOURCE POOL 'p' PASSWORD 'pw1'"), query("SELECT 1")}, nil), 7)
	f.Add(bytes.Join([][]byte{query("CREATE USER u3 RESOURCE POOL 'nope'"), enc(&pgproto3.Sync{})}, nil), 3)
	f.Add(raw('Q', []byte("CREATE USER u5 RESOURCE POOL 'p'")), 2)
	f.Add([]byte{'Q', 0, 0, 0, 1}, 1)
	cut := append(query("SELECT 1"), query("CREATE USER u5")[:9]...)
	f.Add(cut, len(cut)) // a split at the end
	f.Fuzz(func(t *testing.T, in []byte, split int) {
		run := func(chunks ...[]byte) []byte {
			_, fu, fd := newForwardRig(t, newFakeForwarder())
			if err := fd.Observe(startupDown); err != nil {
				t.Fatal(err)
			}
			var out []byte
			for _, c := range chunks {
				if len(c) == 0 {
					continue // an empty chunk ends the stream
				}
				if fu.Observe(c) != nil {
					return nil // the ordinary observer ends the session
				}
				b, err := fu.Rewrite(context.Background(), c)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b...)
			}
			return out
		}
		whole := run(in)
		if whole == nil {
			return
		}
		if split < 0 {
			split = -split
		}
		k := split % (len(in) + 1)
		if parts := run(in[:k], in[k:]); !bytes.Equal(parts, whole) {
			t.Fatalf("split at %d: %q, whole: %q", k, parts, whole)
		}
	})
}

func BenchmarkForwardRewritePassThrough(b *testing.B) {
	_, fu, fd := newForwardRig(b, takeNothing{})
	if err := fd.Observe(startupDown); err != nil {
		b.Fatal(err)
	}
	in := bytes.Join([][]byte{query("SELECT c FROM sbtest1 WHERE id = 4711"), enc(&pgproto3.Sync{})}, nil)
	wiretest.BenchRewrite(b, fu, in, nil, nil)
}

// At the end of the stream an incomplete message held back goes on as it
// is, once.
func TestForwardEndOfStreamReleasesHeldBytes(t *testing.T) {
	q := query("CREATE USER u1 RESOURCE POOL 'p'")
	for _, cut := range []int{2, 9} { // inside the header, inside the Query
		_, fu, fd := newForwardRig(t, newFakeForwarder())
		if err := fd.Observe(startupDown); err != nil {
			t.Fatal(err)
		}
		if got := pump(t, fu, q[:cut]); len(got) != 0 {
			t.Fatalf("cut %d: forwarded %q before the message was whole", cut, got)
		}
		if got := pump(t, fu, nil); !bytes.Equal(got, q[:cut]) {
			t.Fatalf("cut %d: end of stream forwarded %q, want %q", cut, got, q[:cut])
		}
		if got := pump(t, fu, nil); len(got) != 0 {
			t.Fatalf("cut %d: second end of stream forwarded %q", cut, got)
		}
	}
}

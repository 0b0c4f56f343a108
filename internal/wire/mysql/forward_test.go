package mysql

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// newFakeForwarder returns the test Forwarder (see wiretest.Forwarder),
// failing the pool 'bad' with "it's broken".
func newFakeForwarder() *wiretest.Forwarder {
	return &wiretest.Forwarder{Failure: "it's broken"}
}

// forwardHarness is a session of user "admin" with forwarding observers.
type forwardHarness struct {
	reg  *session.Registry
	sess *session.Session
	up   *forwardUp
	down wire.Observer
	fwd  *wiretest.Forwarder
}

func newForwardHarness(t testing.TB, authed bool) *forwardHarness {
	reg, sess, u, d := harnessObservers(testCaps, 0, !authed)
	sess.SetIdentity("admin", "db", "")
	h := &forwardHarness{reg: reg, sess: sess, fwd: newFakeForwarder()}
	h.up, h.down = forwarding(h.fwd, slog.New(slog.DiscardHandler), sess, u, d, authed)
	return h
}

// client passes the chunks through Observe and Rewrite as the pump does
// and returns what would be forwarded.
func (h *forwardHarness) client(t testing.TB, chunks ...[]byte) []byte {
	t.Helper()
	var out []byte
	for _, c := range chunks {
		if err := h.up.Observe(c); err != nil {
			t.Fatalf("Observe: %v", err)
		}
		b, err := h.up.Rewrite(context.Background(), c)
		if err != nil {
			t.Fatalf("Rewrite: %v", err)
		}
		out = append(out, b...)
	}
	return out
}

func (h *forwardHarness) server(t testing.TB, b ...[]byte) {
	t.Helper()
	if err := h.down.Observe(bytes.Join(b, nil)); err != nil {
		t.Fatalf("server Observe: %v", err)
	}
}

func TestForwardRewrite(t *testing.T) {
	long := "CREATE USER x RESOURCE POOL 'p' PASSWORD '" + strings.Repeat("z", wire.MaxForwardQuery) + "'"
	// One command at a time, each answered, as a client sends them.
	steps := []struct {
		in, want, answer []byte
	}{
		{query("CREATE USER u1 RESOURCE POOL 'p' IDENTIFIED BY 'pw1'"), query("CREATE USER u1 IDENTIFIED BY 'pw1'"), pk(1, okPayload(0, 2))},
		{pk(0, []byte{comPing}), pk(0, []byte{comPing}), pk(1, okPayload(0, 2))},
		{query("SELECT 1"), query("SELECT 1"), pk(1, okPayload(0, 2))},
		{query("CREATE USER u3 RESOURCE POOL 'nope'"),
			query(`SIGNAL SQLSTATE '42704' SET MESSAGE_TEXT = 'resource pool "nope" does not exist'`),
			pk(1, errPayload(1644, "42704", `resource pool "nope" does not exist`))},
		{query("CREATE USER u4 RESOURCE POOL 'bad'"),
			query(`SIGNAL SQLSTATE 'HY000' SET MESSAGE_TEXT = 'it''s broken'`),
			pk(1, errPayload(1644, "HY000", "it's broken"))},
		{pk(0, []byte{comStmtPrepare}, []byte("CREATE USER u5 RESOURCE POOL 'p'")),
			pk(0, []byte{comStmtPrepare}, []byte("CREATE USER u5 RESOURCE POOL 'p'")),
			pk(1, errPayload(1064, "42000", "syntax"))},
		{query(long), query(long), pk(1, errPayload(1064, "42000", "syntax"))},
	}
	var want []byte
	for _, s := range steps {
		want = append(want, s.want...)
	}
	check := func(name string, split func(b []byte) [][]byte) {
		t.Helper()
		h := newForwardHarness(t, true)
		var got []byte
		for _, s := range steps {
			got = append(got, h.client(t, split(s.in)...)...)
			h.server(t, s.answer)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: forwarded %d bytes, want %d\n got %q\nwant %q", name, len(got), len(want), clipBytes(got), clipBytes(want))
		}
		if len(h.fwd.Seen) != 4 {
			t.Fatalf("%s: forwarder saw %q", name, h.fwd.Seen)
		}
		recs := records(h.reg)
		if len(recs) != len(steps) || recs[0].SQL != "CREATE USER u1 RESOURCE POOL 'p' IDENTIFIED BY '***'" || recs[0].Outcome != session.OK {
			t.Fatalf("%s: records %v", name, recs)
		}
	}
	check("whole", func(b []byte) [][]byte { return [][]byte{b} })
	for k := 1; k < 12; k++ {
		check("split", func(b []byte) [][]byte { k := min(k, len(b)); return [][]byte{b[:k], b[k:]} })
	}
	check("bytewise head", func(b []byte) [][]byte {
		var out [][]byte
		for i := 0; i < len(b) && i < 50; i++ {
			out = append(out, b[i:i+1])
		}
		if len(b) > 50 {
			out = append(out, b[50:])
		}
		return out
	})
}

func clipBytes(b []byte) []byte {
	if len(b) > 400 {
		return b[:400]
	}
	return b
}

// Nothing is inspected until the server has accepted the login, and
// never again if it refused it.
func TestForwardWaitsForLogin(t *testing.T) {
	q := query("CREATE USER u1 RESOURCE POOL 'p'")
	h := newForwardHarness(t, false)
	// An auth switch request is not the end of the login.
	h.server(t, pk(2, []byte{0xfe}, []byte("mysql_native_password\x00"), bytes.Repeat([]byte{1}, 20), []byte{0}))
	if got := h.client(t, pk(3, bytes.Repeat([]byte{7}, 20))); len(got) != 24 {
		t.Fatalf("auth data forwarded as %q", got)
	}
	if got := h.client(t, q); !bytes.Equal(got, q) || len(h.fwd.Seen) != 0 {
		t.Fatalf("before the OK: forwarded %q, forwarder saw %q", got, h.fwd.Seen)
	}
	h.server(t, pk(4, okPayload(0, 2)), pk(1, okPayload(0, 2)))
	if got := h.client(t, q); !bytes.Equal(got, query("CREATE USER u1")) {
		t.Fatalf("after the OK: forwarded %q", got)
	}

	h = newForwardHarness(t, false)
	h.server(t, pk(2, errPayload(1045, "28000", "Access denied")))
	if got := h.client(t, q); !bytes.Equal(got, q) || len(h.fwd.Seen) != 0 {
		t.Fatalf("after a failed login: forwarded %q, forwarder saw %q", got, h.fwd.Seen)
	}
}

// LOCAL INFILE data is never a command, even when it ends in the same
// chunk as the empty packet that returns the client to the command phase.
func TestForwardSkipsInfileData(t *testing.T) {
	h := newForwardHarness(t, true)
	h.client(t, query("LOAD DATA LOCAL INFILE 'f' INTO TABLE t"))
	h.server(t, pk(1, []byte{0xfb}, []byte("f")))
	data := append(pk(2, []byte{comQuery}, []byte("CREATE USER u1 RESOURCE POOL 'p'")), pk(3)...)
	if got := h.client(t, data); !bytes.Equal(got, data) || len(h.fwd.Seen) != 1 {
		t.Fatalf("infile data forwarded as %q; forwarder saw %q", got, h.fwd.Seen)
	}
	h.server(t, pk(4, okPayload(1, 2)))
	if got := h.client(t, query("CREATE USER u1 RESOURCE POOL 'p'")); !bytes.Equal(got, query("CREATE USER u1")) {
		t.Fatalf("after the infile: forwarded %q", got)
	}
}

// A user the Forwarder does not name (after COM_CHANGE_USER) is not
// inspected.
func TestForwardChecksUserEachCommand(t *testing.T) {
	h := newForwardHarness(t, true)
	h.sess.SetIdentity("app", "db", "")
	q := query("CREATE USER u1 RESOURCE POOL 'p'")
	if got := h.client(t, q); !bytes.Equal(got, q) || len(h.fwd.Seen) != 0 {
		t.Fatalf("forwarded %q, forwarder saw %q", got, h.fwd.Seen)
	}
}

func TestForwardPassThroughIsInput(t *testing.T) {
	h := newForwardHarness(t, true)
	in := pk(0, []byte{comStmtExecute}, le32(1), []byte{0}, le32(1))
	got, err := h.up.Rewrite(context.Background(), in)
	if err != nil || len(got) != len(in) || &got[0] != &in[0] {
		t.Fatalf("Rewrite returned a copy or other bytes: %q, %v", got, err)
	}
}

// chunkConn reads from r in chunks of at most n bytes.
type chunkConn struct {
	net.Conn
	r io.Reader
	n int
}

func (c chunkConn) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

func TestAuthSniffer(t *testing.T) {
	sw := pk(2, []byte{0xfe}, []byte("mysql_native_password\x00"), bytes.Repeat([]byte{1}, 20), []byte{0})
	for _, tt := range []struct {
		stream []byte
		want   bool
	}{
		{pk(2, okPayload(0, 2)), true},
		{append(bytes.Clone(sw), pk(4, okPayload(0, 2))...), true},
		{append(bytes.Clone(sw), pk(4, errPayload(1045, "28000", "Access denied"))...), false},
		{pk(2, []byte{0x01, 0x03}), false}, // fast-auth success: the OK is still to come
	} {
		for _, n := range []int{1, 3, 4096} {
			s := &authSniffer{Conn: chunkConn{r: bytes.NewReader(tt.stream), n: n}}
			if _, err := io.ReadAll(s); err != nil {
				t.Fatal(err)
			}
			if got := s.accepted(); got != tt.want {
				t.Errorf("stream %q in %d-byte reads: accepted %v, want %v", tt.stream, n, got, tt.want)
			}
		}
	}
}

func FuzzForwardRewrite(f *testing.F) {
	f.Add(bytes.Join([][]byte{query("CREATE USER u1 RESOURCE POOL 'p' IDENTIFIED BY 'pw1'"), query("SELECT 1")}, nil), 7)
	f.Add(bytes.Join([][]byte{query("CREATE USER u3 RESOURCE POOL 'nope'"), pk(0, []byte{comPing})}, nil), 3)
	f.Add(pk(0, []byte{comQuery}), 2)
	f.Add([]byte{0xff, 0xff, 0xff, 0, 1}, 1)
	f.Add([]byte{'0'}, 1) // a split at the end
	f.Fuzz(func(t *testing.T, in []byte, split int) {
		run := func(chunks ...[]byte) ([]byte, bool) {
			h := newForwardHarness(t, true)
			var out []byte
			for _, c := range chunks {
				if len(c) == 0 {
					continue // an empty chunk ends the stream
				}
				b, err := h.up.Rewrite(context.Background(), c)
				if err != nil {
					return nil, false // the ordinary observer ends the session
				}
				out = append(out, b...)
			}
			return out, true
		}
		whole, ok := run(in)
		if !ok {
			return
		}
		if split < 0 {
			split = -split
		}
		k := split % (len(in) + 1)
		if parts, ok := run(in[:k], in[k:]); ok && !bytes.Equal(parts, whole) {
			t.Fatalf("split at %d: %q, whole: %q", k, parts, whole)
		}
	})
}

func BenchmarkForwardRewritePassThrough(b *testing.B) {
	h := newForwardHarness(b, true)
	in := query("SELECT c FROM sbtest1 WHERE id = 4711")
	wiretest.BenchRewrite(b, h.up, in, h.down, pk(1, okPayload(0, 2)))
}

// At the end of the stream an incomplete packet held back goes on as it
// is, once.
func TestForwardEndOfStreamReleasesHeldBytes(t *testing.T) {
	q := query("CREATE USER u1 RESOURCE POOL 'p'")
	for _, cut := range []int{2, 9} { // inside the header, inside the packet
		h := newForwardHarness(t, true)
		if got := h.client(t, q[:cut]); len(got) != 0 {
			t.Fatalf("cut %d: forwarded %q before the packet was whole", cut, got)
		}
		if got := h.client(t, nil); !bytes.Equal(got, q[:cut]) {
			t.Fatalf("cut %d: end of stream forwarded %q, want %q", cut, got, q[:cut])
		}
		if got := h.client(t, nil); len(got) != 0 {
			t.Fatalf("cut %d: second end of stream forwarded %q", cut, got)
		}
	}
}

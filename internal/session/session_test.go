package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type fakeCanceler struct{ n int }

func (f *fakeCanceler) Cancel(context.Context) error { f.n++; return nil }

func TestStatementLifecycle(t *testing.T) {
	r := NewRegistry(Options{KeepStatements: 2})
	var mu sync.Mutex
	var kinds []EventKind
	unwatch := r.Watch(WatcherFunc(func(e Event) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() }))
	defer unwatch()
	now := time.Unix(100, 0)
	s := r.Open(Info{Route: "pg", Protocol: "postgres"}, now)
	s.SetIdentity("user1", "db", "psql")
	s.SetPool("rp1")
	st := s.Begin("select 1", now)
	st.AddUp(10)
	st.AddDown(90)
	if got := r.Active(); len(got) != 1 || got[0] != st {
		t.Fatalf("Active = %v", got)
	}
	if !st.Penalize("rule1") || st.Penalize("rule1") {
		t.Fatal("Penalize should succeed once")
	}
	if !s.Penalized() {
		t.Fatal("session not penalised")
	}
	st.End(now.Add(time.Second), OK, 1, "")
	st.End(now.Add(2*time.Second), Failed, 0, "57014")
	if s.Penalized() {
		t.Fatal("session still penalised after statement ended")
	}
	snap := st.Snapshot()
	if snap.Outcome != OK || snap.Rows != 1 || snap.BytesUp != 10 || snap.BytesDown != 90 || snap.User != "user1" || snap.Pool != "rp1" || !snap.Penalized || len(snap.Except) != 1 {
		t.Fatalf("snapshot = %+v", snap)
	}
	if len(r.Active()) != 0 || len(r.Recent()) != 1 {
		t.Fatal("statement not moved to recent")
	}
	s.Close(now)
	s.Close(now)
	if r.Session(s.ID) != nil {
		t.Fatal("closed session still registered")
	}
	want := []EventKind{SessionOpened, StatementStarted, StatementPenalized, StatementEnded, SessionClosed}
	if len(kinds) != len(want) {
		t.Fatalf("events = %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events = %v, want %v", kinds, want)
		}
	}
}

func TestRecentRing(t *testing.T) {
	r := NewRegistry(Options{KeepStatements: 3})
	s := r.Open(Info{}, time.Time{})
	var ids []uint64
	for i := 0; i < 5; i++ {
		st := s.Begin("q", time.Time{})
		st.End(time.Time{}, OK, 0, "")
		ids = append(ids, st.ID)
	}
	got := r.Recent()
	if len(got) != 3 || got[0].ID != ids[2] || got[2].ID != ids[4] {
		t.Fatalf("recent = %v", got)
	}
}

func TestCancel(t *testing.T) {
	r := NewRegistry(Options{})
	s := r.Open(Info{}, time.Time{})
	st := s.Begin("select pg_sleep(30)", time.Time{})
	if err := r.Cancel(context.Background(), st); !errors.Is(err, ErrNoCanceler) {
		t.Fatalf("err = %v", err)
	}
	c := &fakeCanceler{}
	s.SetCanceler(c)
	s.SetCancelKey("k1")
	if r.ByCancelKey("k1") != s {
		t.Fatal("cancel key not found")
	}
	if err := r.Cancel(context.Background(), st); err != nil || c.n != 1 || !st.CancelRequested() {
		t.Fatalf("err = %v, calls = %d", err, c.n)
	}
	st.End(time.Time{}, Cancelled, -1, "57014")
	if err := r.Cancel(context.Background(), st); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("err = %v", err)
	}
	s.Close(time.Time{})
	if r.ByCancelKey("k1") != nil {
		t.Fatal("cancel key outlived session")
	}
}

func TestCloseEndsRunning(t *testing.T) {
	r := NewRegistry(Options{})
	s := r.Open(Info{}, time.Time{})
	st := s.Begin("copy", time.Time{})
	st.Penalize("x")
	s.Close(time.Time{})
	if st.Outcome() != Failed || s.Penalized() {
		t.Fatalf("outcome %v penalized %v", st.Outcome(), s.Penalized())
	}
}

// TestCloseEndsEveryPipelined closes a session with several statements
// running, as a client that pipelines queries and then resets leaves it.
func TestCloseEndsEveryPipelined(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8} {
		r := NewRegistry(Options{})
		s := r.Open(Info{}, time.Time{})
		sts := make([]*Statement, n)
		for i := range sts {
			sts[i] = s.Begin("select 1", time.Time{})
		}
		s.Close(time.Time{})
		for i, st := range sts {
			if st.Outcome() != Failed {
				t.Errorf("n=%d: statement %d outcome %v, want failed", n, i, st.Outcome())
			}
		}
		if got := len(s.Active()); got != 0 {
			t.Errorf("n=%d: %d statements still active", n, got)
		}
		if got := len(r.Recent()); got != n {
			t.Errorf("n=%d: %d recent statements, want %d", n, got, n)
		}
	}
}

// TestBeginAfterClose: a statement begun after Close ends at once.
func TestBeginAfterClose(t *testing.T) {
	r := NewRegistry(Options{})
	s := r.Open(Info{}, time.Time{})
	s.Close(time.Time{})
	st := s.Begin("select 1", time.Time{})
	if st.Outcome() != Failed || len(s.Active()) != 0 {
		t.Fatalf("outcome %v, %d active", st.Outcome(), len(s.Active()))
	}
}

// TestBeginHidesPasswords checks that a statement's text hides its
// passwords, in the dialect of the session's protocol, before a watcher,
// the running list or the ring of ended statements can see it.
func TestBeginHidesPasswords(t *testing.T) {
	cases := []struct {
		protocol, sql, want string
	}{
		{"postgres", "ALTER ROLE bob PASSWORD 'pw-secret-1'", "ALTER ROLE bob PASSWORD '***'"},
		{"postgres", "ALTER ROLE bob PASSWORD $$pw-secret-1", "ALTER ROLE bob PASSWORD '***'"},
		{"mysql", `CREATE USER bob IDENTIFIED BY "pw-secret-1"`, "CREATE USER bob IDENTIFIED BY '***'"},
		// An executable comment is code to MySQL, a comment to
		// PostgreSQL.
		{"mysql", "CREATE USER bob /*!80000 IDENTIFIED BY 'pw-secret-1' */", "CREATE USER bob /*!80000 IDENTIFIED BY '***' */"},
		{"postgres", "SELECT 1 /*!80000 IDENTIFIED BY 'x' */", "SELECT 1 /*!80000 IDENTIFIED BY 'x' */"},
		{"mysql", "SELECT 1", "SELECT 1"},
	}
	for _, c := range cases {
		r := NewRegistry(Options{})
		var seen []string
		r.Watch(WatcherFunc(func(e Event) {
			if e.Kind == StatementStarted {
				seen = append(seen, e.Statement.SQL)
			}
		}))
		now := time.Unix(100, 0)
		s := r.Open(Info{Route: "r", Protocol: c.protocol}, now)
		st := s.Begin(c.sql, now)
		running := r.Active()[0].Snapshot().SQL
		st.End(now, OK, 0, "")
		ended := r.Recent()[0].Snapshot().SQL
		for what, got := range map[string]string{"statement": st.SQL, "watcher": seen[0], "running": running, "ended": ended} {
			if got != c.want {
				t.Errorf("%s %q: %s shows %q, want %q", c.protocol, c.sql, what, got, c.want)
			}
		}
	}
}

func TestKind(t *testing.T) {
	r := NewRegistry(Options{})
	s := r.Open(Info{Route: "r"}, time.Unix(0, 0))
	if s.Kind() != KindClient || s.Kind().String() != "client" {
		t.Fatalf("new session kind = %v", s.Kind())
	}
	for _, k := range []Kind{KindReplication, KindBaseBackup, KindLogical} {
		s.SetKind(k)
		if s.Kind() != k {
			t.Errorf("SetKind(%v) then Kind() = %v", k, s.Kind())
		}
	}
	if Kind(200).String() != "kind(200)" {
		t.Errorf("Kind(200) = %q", Kind(200).String())
	}
}

package session

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// key returns a cancel key with backend pid pid and a 4-byte secret.
func key(pid uint32, secret byte) string {
	return string([]byte{byte(pid >> 24), byte(pid >> 16), byte(pid >> 8), byte(pid), secret, secret, secret, secret})
}

// openSessions opens a session for each route, in order, on a new
// registry at now.
func openSessions(now time.Time, routes ...string) (*Registry, []*Session) {
	r := NewRegistry(Options{})
	ss := make([]*Session, len(routes))
	for i, route := range routes {
		ss[i] = r.Open(Info{Route: route}, now)
	}
	return r, ss
}

func TestByBackendPID(t *testing.T) {
	now := time.Unix(100, 0)
	r, ss := openSessions(now, "a", "b", "c")
	a, b, c := ss[0], ss[1], ss[2]
	a.SetCancelKey(key(1000, 1))
	b.SetCancelKey(key(2000, 2))
	c.SetCancelKey("abc") // too short to carry a pid
	steps := []struct {
		name string
		do   func()
		pid  uint32
		want *Session
	}{
		{"a by pid", nil, 1000, a},
		{"b by pid", nil, 2000, b},
		{"unknown pid", nil, 3000, nil},
		{"a's key replaced: the old pid is gone", func() { a.SetCancelKey(key(1001, 1)) }, 1000, nil},
		{"a's new pid", nil, 1001, a},
		{"two sessions with one pid: ambiguous", func() { c.SetCancelKey(key(2000, 9)) }, 2000, nil},
		{"b closed: c alone has it", func() { b.Close(now) }, 2000, c},
		{"c closed", func() { c.Close(now) }, 2000, nil},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if got := r.ByBackendPID(s.pid); got != s.want {
			t.Fatalf("%s: ByBackendPID(%d) = %v, want %v", s.name, s.pid, got, s.want)
		}
	}
	if len(r.byPID) != 1 {
		t.Fatalf("byPID keeps %d pids, want 1 (a's)", len(r.byPID))
	}
}

func TestLink(t *testing.T) {
	r, ss := openSessions(time.Unix(100, 0), "coord", "s1", "s2", "other")
	coord, shard, deep, other := ss[0], ss[1], ss[2], ss[3]
	var linked []*Session
	r.Watch(WatcherFunc(func(e Event) {
		if e.Kind == SessionLinked {
			linked = append(linked, e.Session)
		}
	}))
	for _, c := range []struct {
		name        string
		from, to    *Session
		want        bool
		coordinator *Session   // from's coordinator after the call
		distributed []*Session // the sessions Distributed after the call
	}{
		{"nil", shard, nil, false, nil, nil},
		{"itself", shard, shard, false, nil, nil},
		{"shard to coordinator", shard, coord, true, coord, []*Session{coord, shard}},
		{"again", shard, deep, false, coord, []*Session{coord, shard}},
		{"a cycle", coord, shard, false, nil, []*Session{coord, shard}},
		{"a second level", deep, shard, true, shard, []*Session{coord, shard, deep}},
		{"a longer cycle", coord, deep, false, nil, []*Session{coord, shard, deep}},
	} {
		n := len(linked)
		if got := c.from.Link(c.to); got != c.want || c.from.Coordinator() != c.coordinator {
			t.Fatalf("%s: Link = %v (coordinator %v), want %v (%v)", c.name, got, c.from.Coordinator(), c.want, c.coordinator)
		}
		if c.want && (len(linked) != n+1 || linked[n] != c.from) {
			t.Fatalf("%s: SessionLinked events %v, want one for %v", c.name, linked[n:], c.from)
		}
		if !c.want && len(linked) != n {
			t.Fatalf("%s: a SessionLinked event for a refused link", c.name)
		}
		for _, s := range []*Session{coord, shard, deep, other} {
			if want := slices.Contains(c.distributed, s); s.Distributed() != want {
				t.Fatalf("%s: session on %s Distributed() = %v, want %v", c.name, s.Info.Route, !want, want)
			}
		}
	}
}

// TestDistributedStatement: a shard statement that begins while its
// coordinator executes a statement is that statement's child, its bytes
// count in the coordinator statement's totals per route, and a penalty
// of the coordinator statement demotes every linked session while it
// runs.
func TestDistributedStatement(t *testing.T) {
	now := time.Unix(100, 0)
	// s3 is a second connection to s2's node.
	_, ss := openSessions(now, "coord", "shard1", "shard2", "shard2", "shard3")
	coord, s1, s2, s3, deep := ss[0], ss[1], ss[2], ss[3], ss[4]
	for _, s := range []*Session{s1, s2, s3} {
		s.Link(coord)
	}
	deep.Link(s1)

	early := s1.Begin("START TRANSACTION", now) // nothing executes yet
	early.AddUp(5)
	early.End(now, OK, -1, "")
	if early.Parent != nil {
		t.Fatal("a statement begun while the coordinator is idle has a parent")
	}

	held := coord.Begin("SELECT held", now)
	held.Hold(now, &fakeWait{})
	if coord.Executing() != nil {
		t.Fatal("a held statement counts as executing")
	}
	held.End(now, Cancelled, -1, "57014")

	top := coord.Begin("SELECT * FROM parted", now)
	top.AddUp(100)
	top.AddDown(1000)
	type add struct {
		s        *Session
		up, down int
	}
	var mid *Statement
	for _, a := range []add{{s1, 10, 200}, {s2, 20, 300}, {s3, 30, 400}, {s1, 1, 2}} {
		st := a.s.Begin("FETCH 100 FROM c1", now)
		if st.Parent != top {
			t.Fatalf("shard statement of %s: parent %v, want %d", a.s.Info.Route, st.Parent, top.ID)
		}
		st.AddUp(a.up)
		st.AddDown(a.down)
		if a.s == s1 && mid == nil {
			mid = st
			continue // runs on while deep works for it
		}
		st.End(now, OK, 0, "")
	}
	leaf := deep.Begin("FETCH 10 FROM c2", now)
	if leaf.Parent != mid {
		t.Fatalf("second-level statement's parent = %v, want %d", leaf.Parent, mid.ID)
	}
	leaf.AddDown(7)

	snap := top.Snapshot()
	want := []NodeBytes{
		{Route: "shard1", Statements: 2, BytesUp: 11, BytesDown: 202},
		{Route: "shard2", Statements: 2, BytesUp: 50, BytesDown: 700},
		{Route: "shard3", Statements: 1, BytesUp: 0, BytesDown: 7},
	}
	if len(snap.Nodes) != len(want) {
		t.Fatalf("nodes = %+v, want %+v", snap.Nodes, want)
	}
	var up, down int64
	for i, n := range snap.Nodes {
		if n != want[i] {
			t.Fatalf("node %d = %+v, want %+v", i, n, want[i])
		}
		up, down = up+n.BytesUp, down+n.BytesDown
	}
	if snap.TotalUp != 100+up || snap.TotalDown != 1000+down || top.TotalBytes() != snap.TotalUp+snap.TotalDown {
		t.Fatalf("totals %d/%d (TotalBytes %d), want %d/%d", snap.TotalUp, snap.TotalDown, top.TotalBytes(), 100+up, 1000+down)
	}
	if ms := mid.Snapshot(); ms.ParentID != top.ID || len(ms.Nodes) != 0 || ms.TotalUp != ms.BytesUp {
		t.Fatalf("middle statement snapshot %+v: counts its child twice or lost its parent", ms)
	}

	for _, s := range []*Session{coord, s1, s2, s3, deep} {
		if s.Penalized() {
			t.Fatalf("session on %s penalised before the penalty", s.Info.Route)
		}
	}
	if !top.Penalize("rule") {
		t.Fatal("penalty refused")
	}
	for _, s := range []*Session{coord, s1, s2, s3, deep} {
		if !s.Penalized() {
			t.Fatalf("session on %s not penalised with its coordinator statement", s.Info.Route)
		}
	}
	if leaf.Penalized() {
		t.Fatal("the penalty was recorded on a shard statement")
	}
	top.End(now, OK, 1, "")
	for _, s := range []*Session{coord, s1, s2, s3, deep} {
		if s.Penalized() {
			t.Fatalf("session on %s penalised after the coordinator statement ended", s.Info.Route)
		}
	}
	// The coordinator's backend closing its cursor after sluice saw the
	// answer end still works for that statement.
	if after := s2.Begin("CLOSE c1", now); after.Parent != top {
		t.Fatalf("a statement begun after the coordinator's ended: parent %v, want %d", after.Parent, top.ID)
	}
}

// TestDistributedConcurrent: shard sessions that begin statements and
// count bytes while the coordinator's statement is read race with
// nothing, and the totals are exact.
func TestDistributedConcurrent(t *testing.T) {
	r := NewRegistry(Options{})
	now := time.Unix(100, 0)
	coord := r.Open(Info{Route: "coord"}, now)
	top := coord.Begin("SELECT", now)
	const shards, stmts, chunk = 4, 50, 3
	var wg sync.WaitGroup
	for i := range shards {
		s := r.Open(Info{Route: string(rune('a' + i))}, now)
		s.Link(coord)
		wg.Go(func() {
			for range stmts {
				st := s.Begin("FETCH", now)
				st.AddUp(chunk)
				st.AddDown(2 * chunk)
				st.End(now, OK, 0, "")
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = top.Snapshot()
			_ = top.TotalBytes()
		}
	})
	wg.Wait()
	if got, want := top.TotalBytes(), int64(shards*stmts*3*chunk); got != want {
		t.Fatalf("TotalBytes = %d, want %d", got, want)
	}
}

// TestDistributedAfterCoordinatorEnds: the coordinator's backend goes on
// talking to its shards after sluice saw its statement end (the ABORT of
// a cancelled join's remote transactions, a FETCH sent ahead and drained,
// the clean-up after its client left). Those shard statements belong to
// the coordinator statement that ran last, never to one that is still
// held, ended while held, or to none.
func TestDistributedAfterCoordinatorEnds(t *testing.T) {
	r := NewRegistry(Options{})
	now := time.Unix(100, 0)
	coord := r.Open(Info{Route: "coord"}, now)
	shard := r.Open(Info{Route: "shard1"}, now)
	shard.Link(coord)

	var join, held, second *Statement
	steps := []struct {
		name string
		do   func()
		want func() *Statement // the parent of a shard statement begun after do
	}{
		{"nothing ran yet", nil, func() *Statement { return nil }},
		{"the join runs", func() { join = coord.Begin("SELECT join", now) }, func() *Statement { return join }},
		{"the join ended: its ABORT", func() { join.End(now, Failed, -1, "57014") }, func() *Statement { return join }},
		{"a statement held", func() {
			held = coord.Begin("SELECT held", now)
			held.Hold(now, &fakeWait{})
		}, func() *Statement { return join }},
		{"the held one ended while held", func() { held.End(now, Cancelled, -1, "57014") }, func() *Statement { return join }},
		{"a second statement runs", func() { second = coord.Begin("SELECT second", now) }, func() *Statement { return second }},
		{"the coordinator's client left", func() { coord.Close(now) }, func() *Statement { return second }},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		st := shard.Begin("ABORT TRANSACTION", now)
		st.AddUp(7)
		st.End(now, OK, -1, "")
		if want := s.want(); st.Parent != want {
			t.Fatalf("%s: parent %v, want %v", s.name, st.Parent, want)
		}
	}
	// The late shard statements count in the ended statements' nodes.
	for _, c := range []struct {
		st         *Statement
		statements int64
	}{{join, 4}, {second, 2}} {
		snap := c.st.Snapshot()
		if len(snap.Nodes) != 1 || snap.Nodes[0].Statements != c.statements || snap.Nodes[0].BytesUp != 7*c.statements {
			t.Fatalf("%q: nodes %+v, want %d statements of 7 bytes on shard1", c.st.SQL, snap.Nodes, c.statements)
		}
	}
}

package metrics

import (
	"sync"

	"github.com/sluicelab/sluice/internal/session"
)

// OtherUser is the user label of the users beyond the setting
// metrics_user_labels.
const OtherUser = "other"

// userLabels bounds the user label: the first users seen, up to the
// limit the catalog sets when they are seen, keep their name; every other
// user is OtherUser. A user keeps its label while the limit stays above
// its rank, so raising the limit admits new users and lowering it folds
// the latest ones back into OtherUser. Safe for concurrent use.
type userLabels struct {
	mu   sync.Mutex
	rank map[string]int // guarded by mu; order of admission, from 0
}

// label returns the label of user under limit.
func (u *userLabels) label(user string, limit int) string {
	if limit <= 0 {
		return OtherUser
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.rank[user]
	if !ok {
		if len(u.rank) >= limit {
			return OtherUser
		}
		if u.rank == nil {
			u.rank = map[string]int{}
		}
		r = len(u.rank)
		u.rank[user] = r
	}
	if r >= limit {
		return OtherUser
	}
	return user
}

// routeBytes counts the bytes of every session by route and direction:
// the closed sessions' totals, and the open sessions, read at scrape
// time. A session is in exactly one of the two under mu, so the sum
// never goes back. Safe for concurrent use.
type routeBytes struct {
	mu     sync.Mutex
	open   map[*session.Session]struct{} // guarded by mu
	closed map[string][2]int64           // guarded by mu; route -> up, down
}

func newRouteBytes() *routeBytes {
	return &routeBytes{open: map[*session.Session]struct{}{}, closed: map[string][2]int64{}}
}

func (b *routeBytes) opened(s *session.Session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.Closed().IsZero() {
		b.open[s] = struct{}{}
	}
}

func (b *routeBytes) closedSession(s *session.Session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, s)
	t := b.closed[s.Info.Route]
	t[0] += s.BytesUp()
	t[1] += s.BytesDown()
	b.closed[s.Info.Route] = t
}

// totals returns the bytes by route: up and down.
func (b *routeBytes) totals() map[string][2]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][2]int64, len(b.closed))
	for r, t := range b.closed {
		out[r] = t
	}
	for s := range b.open {
		t := out[s.Info.Route]
		t[0] += s.BytesUp()
		t[1] += s.BytesDown()
		out[s.Info.Route] = t
	}
	return out
}

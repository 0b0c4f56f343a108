package budget

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// worstCase is an independent model of the instances for the allocator
// tests: it keeps every grant written to each instance and, at a time,
// sums over the instances the highest rate of a grant the instance may
// be applying: any grant written to it that has not expired and is not
// older than the last version it acknowledged.
type worstCase struct {
	sent  map[string][]Grant
	acked map[string]uint64
}

func (w *worstCase) record(ws []Write) {
	for _, x := range ws {
		if !x.Delete {
			w.sent[x.Name] = append(w.sent[x.Name], x.Grant)
		}
	}
}

func (w *worstCase) sum(now time.Time) int64 {
	var s int64
	for name, gs := range w.sent {
		var hi int64
		for _, g := range gs {
			if g.Version >= w.acked[name] && g.Valid(now) {
				hi = max(hi, g.Rate)
			}
		}
		s += hi
	}
	return s
}

// latest returns the rate of the last grant written to name.
func (w *worstCase) latest(name string) (Grant, bool) {
	gs := w.sent[name]
	if len(gs) == 0 {
		return Grant{}, false
	}
	return gs[len(gs)-1], true
}

func TestAllocatorLowerBeforeRaise(t *testing.T) {
	const (
		budget = 30
		ttl    = 3 * time.Second
	)
	t0 := time.Unix(1000, 0)
	a := NewAllocator(ttl)
	w := &worstCase{sent: map[string][]Grant{}, acked: map[string]uint64{}}
	for _, st := range []struct {
		at    time.Duration
		wants map[string]int64 // live instances' demands
		ack   []string         // instances that applied their latest grant before this step
		rates map[string]int64 // latest grant rates after the step
	}{
		{0, map[string]int64{"a": 30}, nil, map[string]int64{"a": 30}},
		// b arrives: a is lowered first, b gets nothing until a acknowledges
		{1 * time.Second, map[string]int64{"a": 30, "b": 30}, nil, map[string]int64{"a": 15, "b": 0}},
		{2 * time.Second, map[string]int64{"a": 30, "b": 30}, []string{"a", "b"}, map[string]int64{"a": 15, "b": 15}},
		// c arrives: a and b are lowered
		{3 * time.Second, map[string]int64{"a": 30, "b": 30, "c": 30}, []string{"b"}, map[string]int64{"a": 10, "b": 10, "c": 0}},
		// a acknowledges, b does not: c gets only what a gave up
		{4 * time.Second, map[string]int64{"a": 30, "b": 30, "c": 30}, []string{"a", "c"}, map[string]int64{"a": 10, "b": 10, "c": 5}},
		// b's old grant (written at 2s) expires at 5s: c gets the rest
		{5 * time.Second, map[string]int64{"a": 30, "b": 30, "c": 30}, []string{"a", "c"}, map[string]int64{"a": 10, "b": 10, "c": 10}},
		// a dies: its grant is deleted but counts until it expires (8s)
		{6 * time.Second, map[string]int64{"b": 30, "c": 30}, []string{"b", "c"}, map[string]int64{"a": 10, "b": 10, "c": 10}},
		{7 * time.Second, map[string]int64{"b": 30, "c": 30}, []string{"b", "c"}, map[string]int64{"a": 10, "b": 10, "c": 10}},
		{8 * time.Second, map[string]int64{"b": 30, "c": 30}, []string{"b", "c"}, map[string]int64{"a": 10, "b": 15, "c": 15}},
		// c's demand falls: unused share goes to b after c acknowledges
		{9 * time.Second, map[string]int64{"b": 30, "c": 4}, []string{"b", "c"}, map[string]int64{"a": 10, "b": 15, "c": 4}},
		{10 * time.Second, map[string]int64{"b": 30, "c": 4}, []string{"b", "c"}, map[string]int64{"a": 10, "b": 26, "c": 4}},
		// everyone under: the rest is split equally on top of the wants,
		// c's raise once b has acknowledged its lowering
		{11 * time.Second, map[string]int64{"b": 2, "c": 4}, []string{"b", "c"}, map[string]int64{"a": 10, "b": 14, "c": 4}},
		{12 * time.Second, map[string]int64{"b": 2, "c": 4}, []string{"b", "c"}, map[string]int64{"a": 10, "b": 14, "c": 16}},
	} {
		now := t0.Add(st.at)
		for _, n := range st.ack {
			if g, ok := w.latest(n); ok {
				w.acked[n] = g.Version
			}
		}
		demands := map[string]Demand{}
		for n, v := range st.wants {
			demands[n] = Demand{Want: v, Applied: w.acked[n]}
		}
		ws := a.Step(now, budget, demands)
		w.record(ws)
		got := map[string]int64{}
		for n := range w.sent {
			g, _ := w.latest(n)
			got[n] = g.Rate
		}
		if !maps.Equal(got, st.rates) {
			t.Errorf("at %v: grants %v, want %v (writes %s)", st.at, got, st.rates, fmtWrites(ws))
		}
		if s := w.sum(now); s > budget {
			t.Errorf("at %v: instances may run at %d together, over the budget %d", st.at, s, budget)
		}
		if s := a.Exposure(now); s > budget || s < w.sum(now) {
			t.Errorf("at %v: allocator counts %d, worst case %d, budget %d", st.at, s, w.sum(now), budget)
		}
		// lowerings come before raises in the writes
		seenRaise := false
		for _, x := range ws {
			if x.Delete {
				continue
			}
			prev := previousRate(w.sent[x.Name], x.Grant)
			if x.Grant.Rate > prev {
				seenRaise = true
			} else if x.Grant.Rate < prev && seenRaise {
				t.Errorf("at %v: lowering of %s after a raise: %s", st.at, x.Name, fmtWrites(ws))
			}
		}
	}
}

// previousRate returns the rate of the grant before g in gs (0 if none).
func previousRate(gs []Grant, g Grant) int64 {
	i := slices.Index(gs, g)
	if i <= 0 {
		return 0
	}
	return gs[i-1].Rate
}

func fmtWrites(ws []Write) string {
	s := ""
	for _, x := range ws {
		if x.Delete {
			s += fmt.Sprintf(" -%s", x.Name)
		} else {
			s += fmt.Sprintf(" %s=%d/v%d", x.Name, x.Grant.Rate, x.Grant.Version)
		}
	}
	return s
}

func TestAllocatorAdopt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := NewAllocator(3 * time.Second)
	// grants of a previous allocator: a at 20 (unacknowledged as far as
	// the new one knows) and b at 10
	a.Adopt(map[string]Grant{
		"a": {Rate: 20, Version: 4, Expires: t0.Add(2 * time.Second)},
		"b": {Rate: 10, Version: 2, Expires: t0.Add(2 * time.Second)},
	})
	for _, st := range []struct {
		at    time.Duration
		wants map[string]Demand
		want  map[string]int64
	}{
		// c arrives; b wants more: the adopted grants count until acknowledged
		{0, map[string]Demand{"a": {Want: 30, Applied: 3}, "b": {Want: 30, Applied: 2}, "c": {Want: 30}}, map[string]int64{"a": 10, "b": 10, "c": 0}},
		{time.Second, map[string]Demand{"a": {Want: 30, Applied: 5}, "b": {Want: 30, Applied: 2}, "c": {Want: 30, Applied: 1}}, map[string]int64{"a": 10, "b": 10, "c": 10}},
	} {
		now := t0.Add(st.at)
		ws := a.Step(now, 30, st.wants)
		got := map[string]int64{}
		for _, x := range ws {
			got[x.Name] = x.Grant.Rate
		}
		if !maps.Equal(got, st.want) {
			t.Errorf("at %v: writes %s, want %v", st.at, fmtWrites(ws), st.want)
		}
		if e := a.Exposure(now); e > 30 {
			t.Errorf("at %v: exposure %d", st.at, e)
		}
	}
	if g := a.Grants(); g["a"].Version != 5 || g["c"].Version != 2 {
		t.Errorf("versions after adoption: %+v", g)
	}
}

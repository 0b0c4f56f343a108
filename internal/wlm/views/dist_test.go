package views

import (
	"testing"

	"github.com/sluicelab/sluice/internal/session"
)

func TestNodes(t *testing.T) {
	for _, c := range []struct {
		name  string
		route string
		snap  session.Snapshot
		want  string
	}{
		{"not distributed", "pg", session.Snapshot{BytesUp: 5, BytesDown: 7}, ""},
		{"own route first", "coord", session.Snapshot{BytesUp: 5, BytesDown: 7, Nodes: []session.NodeBytes{
			{Route: "s1", BytesUp: 1, BytesDown: 100}, {Route: "s2", BytesUp: 2, BytesDown: 200}}}, "coord:5/7,s1:1/100,s2:2/200"},
		{"a shard on the coordinator's route is merged", "pg", session.Snapshot{BytesUp: 5, BytesDown: 7, Nodes: []session.NodeBytes{
			{Route: "s1", BytesUp: 1, BytesDown: 100}, {Route: "pg", BytesUp: 2, BytesDown: 200}}}, "pg:7/207,s1:1/100"},
		{"zero bytes", "c", session.Snapshot{Nodes: []session.NodeBytes{{Route: "s"}}}, "c:0/0,s:0/0"},
	} {
		if got := Nodes(c.route, &c.snap); got != c.want {
			t.Errorf("%s: Nodes = %q, want %q", c.name, got, c.want)
		}
	}
}

package fleet

import (
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/wlm/views"
)

// FuzzMerge holds Merge to its contract for any remote table (another
// version's columns, ragged rows): every row as long as the columns,
// the instance column first and right, every row of every answering
// part kept. Seeds: testdata/fuzz/FuzzMerge.
func FuzzMerge(f *testing.F) {
	f.Fuzz(func(t *testing.T, localCols, remoteCols, remoteRows string) {
		split := func(s, sep string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, sep)
		}
		local := views.Table{Columns: split(localCols, ","), Rows: [][]string{make([]string, len(split(localCols, ",")))}}
		remote := views.Table{Columns: split(remoteCols, ",")}
		for _, r := range split(remoteRows, ";") {
			remote.Rows = append(remote.Rows, split(r, ","))
		}
		parts := []Part{{Instance: "a", Tables: map[string]views.Table{"v": local}}, {Instance: "b", Tables: map[string]views.Table{"v": remote}}}
		got, ok := Merge("v", parts)
		if !ok {
			t.Fatal("Merge found no view")
		}
		if len(got.Columns) != len(local.Columns)+1 || got.Columns[0] != InstanceColumn || len(got.Types) != len(got.Columns) {
			t.Fatalf("columns %q types %v from local %q", got.Columns, got.Types, local.Columns)
		}
		if len(got.Rows) != len(local.Rows)+len(remote.Rows) {
			t.Fatalf("%d rows, want %d", len(got.Rows), len(local.Rows)+len(remote.Rows))
		}
		for i, r := range got.Rows {
			want := "a"
			if i >= len(local.Rows) {
				want = "b"
			}
			if len(r) != len(got.Columns) || r[0] != want {
				t.Fatalf("row %d = %q, want %d values beginning %s", i, r, len(got.Columns), want)
			}
		}
	})
}

// BenchmarkMerge merges three instances' sessions of 1,000 rows each.
func BenchmarkMerge(b *testing.B) {
	cols := strings.Split("id,route,user,database,pool,client,bytes_up,bytes_down,unsent_bytes,statements,started,penalised,kind", ",")
	row := make([]string, len(cols))
	for i := range row {
		row[i] = "x"
	}
	var parts []Part
	for _, n := range []string{"a", "b", "c"} {
		t := views.Table{Columns: cols}
		for range 1000 {
			t.Rows = append(t.Rows, row)
		}
		parts = append(parts, Part{Instance: n, Tables: map[string]views.Table{"sessions": t}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Merge("sessions", parts); !ok {
			b.Fatal("no view")
		}
	}
}

package litepg

import (
	"context"
	"database/sql/driver"
	"io"
	"testing"

	sqlite "modernc.org/sqlite"
)

func TestScratch(t *testing.T) {
	d := &sqlite.Driver{}
	c, err := d.Open(t.TempDir() + "/x.db")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{"select sqlite_version()", "select value from generate_series(1,3)", "select * from pragma_compile_options", "select 1 = 1, typeof(1=1)"} {
		st, err := c.(driver.ConnPrepareContext).PrepareContext(context.Background(), q)
		if err != nil {
			t.Log(q, err)
			continue
		}
		rows, err := st.(driver.StmtQueryContext).QueryContext(context.Background(), nil)
		if err != nil {
			t.Log(q, err)
			continue
		}
		dest := make([]driver.Value, len(rows.Columns()))
		for rows.Next(dest) != io.EOF {
			t.Log(q, dest)
		}
		rows.Close()
		st.Close()
	}
}

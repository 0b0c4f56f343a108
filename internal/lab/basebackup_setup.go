package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/units"
)

// baseBackupSkip returns why the experiment cannot run against db with
// the binaries of binDir, "" when it can.
func baseBackupSkip(db *database, binDir string) (bin, reason string) {
	if db.kind != BackendPostgres {
		return "", "it needs a primary of its own to fill and back up: run with --backend postgres"
	}
	bin, err := pgtemp.FindBinaries(binDir)
	if err != nil {
		return "", err.Error()
	}
	for _, p := range []string{"pgbench", "pg_basebackup", "pg_verifybackup"} {
		if fi, err := os.Stat(filepath.Join(bin, p)); err != nil || fi.IsDir() {
			return "", fmt.Sprintf("%s not in %s (install the PostgreSQL client programs)", p, bin)
		}
	}
	return bin, ""
}

// fill creates the replication role, pgbench's tables and the wide
// table, until the cluster holds plan.DatabaseBytes, then checkpoints.
func (r *bbRun) fill(ctx context.Context) error {
	p, pl := r.p, r.plan
	pw, err := pgtemp.Password()
	if err != nil {
		return err
	}
	r.rolePassword = pw
	c, err := pgconn.Connect(ctx, r.db.directURL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", r.db.upstream, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION PASSWORD '%s'", bbRole, pw)).ReadAll(); err != nil {
		return fmt.Errorf("create role %s: %w", bbRole, err)
	}
	p.step("pgbench -i -s %d (directly, not through sluice)", pl.Scale)
	t0 := r.clk.Now()
	if out, err := r.command(ctx, "pgbench", r.superEnv(), append(r.directArgs(), "-i", "-q", "-s", fmt.Sprint(pl.Scale), r.db.dbname)...).CombinedOutput(); err != nil {
		return processErr(ctx, "pgbench -i", err, pgtemp.Tail(out, 2000))
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint, pad text) WITH (autovacuum_enabled = off)", bbTable)).ReadAll(); err != nil {
		return fmt.Errorf("create table %s: %w", bbTable, err)
	}
	// About 1,170 bytes a row on disk: seven 960-byte rows to an 8 kB
	// page, not compressed (TOAST compresses values over 2 kB only).
	const rowBytes, batch = 1170, 50_000
	next := int64(1)
	for {
		size, err := clusterBytes(ctx, c)
		if err != nil {
			return err
		}
		if size >= pl.DatabaseBytes {
			r.dbBytes = size
			break
		}
		n := min(batch, max(5000, (pl.DatabaseBytes-size)/rowBytes+1))
		q := fmt.Sprintf("INSERT INTO %s SELECT g, repeat(md5(g::text), 30) FROM generate_series(%d, %d) g", bbTable, next, next+n-1)
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("fill %s: %w", bbTable, err)
		}
		next += n
		p.step("filling: %s of %s", units.FormatBytes(size), units.FormatBytes(pl.DatabaseBytes))
	}
	if _, err := c.Exec(ctx, "CHECKPOINT").ReadAll(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	p.step("database filled: %s in %.0f s (%d rows of %s, pgbench scale %d)", units.FormatBytes(r.dbBytes), r.clk.Now().Sub(t0).Seconds(), next-1, bbTable, pl.Scale)
	return nil
}

// clusterBytes is the size of every database of the cluster.
func clusterBytes(ctx context.Context, c *pgconn.PgConn) (int64, error) {
	res, err := c.Exec(ctx, "SELECT sum(pg_database_size(oid))::bigint FROM pg_database").ReadAll()
	if err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	if len(res) == 0 || len(res[0].Rows) == 0 {
		return 0, errors.New("database size: no row")
	}
	var n int64
	if _, err := fmt.Sscan(string(res[0].Rows[0][0]), &n); err != nil {
		return 0, fmt.Errorf("database size %q: %w", res[0].Rows[0][0], err)
	}
	return n, nil
}

// dropDatabaseObjects drops what fill created.
func (r *bbRun) dropDatabaseObjects(ctx context.Context) error {
	c, err := pgconn.Connect(ctx, r.db.directURL())
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var errs []error
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + bbTable + ", pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers",
		"DROP ROLE IF EXISTS " + bbRole,
	} {
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", q, err))
		}
	}
	return errors.Join(errs...)
}

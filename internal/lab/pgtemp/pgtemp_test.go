package pgtemp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/netlab"
	"github.com/sluicelab/sluice/internal/testenv"
)

func TestFindBinariesMissing(t *testing.T) {
	_, err := pgtemp.FindBinaries(t.TempDir())
	if !errors.Is(err, pgtemp.ErrNotInstalled) {
		t.Fatalf("FindBinaries(empty dir) = %v, want ErrNotInstalled", err)
	}
	_, err = pgtemp.Start(context.Background(), pgtemp.Options{BinDir: filepath.Join(t.TempDir(), "nowhere")})
	if !errors.Is(err, pgtemp.ErrNotInstalled) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("Start without binaries = %v, want a clear ErrNotInstalled", err)
	}
}

// needServer marks the test missing when PostgreSQL's programs are not
// installed; otherwise it returns a context that ends after 2 minutes,
// or when the test does.
func needServer(t *testing.T) (context.Context, bool) {
	t.Helper()
	if _, err := pgtemp.FindBinaries(""); err != nil {
		testenv.Missing(t, "%v", err)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, true
}

// TestStartStop starts a real throwaway server, uses it, and checks that
// Close stops it and leaves nothing behind.
func TestStartStop(t *testing.T) {
	ctx, ok := needServer(t)
	if !ok {
		return
	}
	s, err := pgtemp.Start(ctx, pgtemp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL(), "postgres://postgres:") || !strings.Contains(s.URL(), "@127.0.0.1:") {
		t.Errorf("URL %s: want the postgres superuser on loopback", s.URL())
	}
	if !strings.HasPrefix(s.Version(), "PostgreSQL 1") {
		t.Errorf("version %q", s.Version())
	}
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	var super string
	if err := c.QueryRow(ctx, "SHOW is_superuser").Scan(&super); err != nil || super != "on" {
		t.Errorf("is_superuser = %q, %v", super, err)
	}
	var listen string
	c.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen)
	if listen != "127.0.0.1" {
		t.Errorf("listen_addresses = %q, want loopback only", listen)
	}
	c.Close(ctx)

	wrong := strings.Replace(s.URL(), "postgres:", "postgres:x", 1)
	if c, err := pgx.Connect(ctx, wrong); err == nil {
		c.Close(ctx)
		t.Error("a wrong password was accepted")
	}

	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still there after Close: %v", dir, err)
	}
	if c, err := pgx.Connect(ctx, s.URL()); err == nil {
		c.Close(ctx)
		t.Error("server still answers after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestStartInNamespace starts a server inside a network namespace
// (Options.Start): it answers on its Unix socket, and its loopback
// port is the namespace's, not this process's.
func TestStartInNamespace(t *testing.T) {
	ctx, ok := needServer(t)
	if !ok {
		return
	}
	tb, err := netlab.New(ctx)
	if err != nil {
		testenv.Missing(t, "a real-network testbed: %v", err)
		return
	}
	defer tb.Close()
	ns, err := tb.Namespace(ctx, "pg")
	if err != nil {
		t.Fatal(err)
	}
	s, err := pgtemp.Start(ctx, pgtemp.Options{Start: ns.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := pgx.Connect(ctx, s.SocketURL())
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 over the socket: %d, %v", one, err)
	}
	c.Close(ctx)
	if _, err := os.Stat(s.Socket()); err != nil {
		t.Errorf("socket: %v", err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	defer ccancel()
	if c, err := pgx.Connect(cctx, s.URL()); err == nil {
		c.Close(ctx)
		t.Error("the server in the namespace answered on this process's loopback")
	}
}

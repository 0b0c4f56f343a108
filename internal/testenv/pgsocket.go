package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// PostgresSocket returns the path of the Unix socket of the PostgreSQL at
// url, as the server reports it. A server without one is a missing
// dependency.
func PostgresSocket(t testing.TB, url string) string {
	t.Helper()
	ctx := context.Background()
	c := ConnectPG(t, url)
	var dirs, port string
	if err := c.QueryRow(ctx, "SELECT current_setting('unix_socket_directories'), current_setting('port')").Scan(&dirs, &port); err != nil {
		t.Fatal(err)
	}
	for _, d := range strings.Split(dirs, ",") {
		p := filepath.Join(strings.TrimSpace(d), ".s.PGSQL."+port)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return p
		}
	}
	Missing(t, "a Unix socket of the test PostgreSQL (unix_socket_directories = %q)", dirs)
	return ""
}

package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestShutdownWithoutEtcd: an instance of a fleet sent SIGTERM in the
// same moment its etcd stopped closes its listeners and exits within
// shutdown_grace: nothing it would tell etcd on the way out (its
// lease's revoke, the budget's resignation) holds it longer.
func TestShutdownWithoutEtcd(t *testing.T) {
	testenv.SkipShort(t, "takes 3s here")
	cl := testenv.StartEtcdCluster(t, 1)
	url := testenv.PostgresURL(t)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	route, admin, api := testenv.DeadAddr(t), testenv.DeadAddr(t), testenv.DeadAddr(t)
	const grace = 2 * time.Second
	text := pgRoutesConfig(t, grace, "pg", route) + "catalog: etcd://" + cl.Endpoints()[0] + "/sluice-shutdown\ninstance_name: a\n" +
		"admin:\n  listen: " + admin + "\nhttp:\n  listen: " + api + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startSluice(t, "serve", "--config", path)
	// A session left open makes the shutdown wait for it.
	c := waitSession(t, p, url, route)
	defer c.Close(t.Context())
	testenv.Eventually(t, 20*time.Second, "the instance registered in the fleet", func() bool {
		return strings.Contains(p.stderr.String(), "fleet")
	})

	cl.Stop(0)
	start := clock.Real{}.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, grace+10*time.Second)
	took := clock.Real{}.Now().Sub(start)
	t.Logf("exited %v after SIGTERM with etcd stopped (shutdown_grace %v)", took.Round(time.Millisecond), grace)
	if took > grace+time.Second {
		t.Errorf("exited %v after SIGTERM, over shutdown_grace %v\n%s", took, grace, p.stderr)
	}
	for _, addr := range []string{route, admin, api} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after the exit", addr)
		}
	}
}

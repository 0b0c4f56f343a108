package harness

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/etcd"
)

// EtcdScratch connects to the etcd cluster at endpoints under a fresh
// prefix for one run of the measurement name,
// /measure/<name>-<unix ns>. It returns the prefix's configuration, a
// client, and done, which deletes every key under the prefix (within
// 5 s; errors are ignored, it is clean-up) and closes the client.
func EtcdScratch(ctx context.Context, endpoints []string, name string) (cfg etcd.Config, cli *clientv3.Client, done func(), err error) {
	cfg = etcd.Config{Endpoints: endpoints, Prefix: fmt.Sprintf("/measure/%s-%d", name, time.Now().UnixNano())}
	cli, err = etcd.Dial(ctx, cfg)
	if err != nil {
		return etcd.Config{}, nil, nil, err
	}
	done = func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		cli.Delete(dctx, cfg.Key(), clientv3.WithPrefix()) // Key() is the prefix and a slash
		cli.Close()
	}
	return cfg, cli, done, nil
}

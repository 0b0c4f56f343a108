package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab"
)

func newLab() *cobra.Command {
	var quick bool
	var dsn, out, backend, pgBin, logLevel, experiment, network, netRate, etcdURL string
	var netQueue time.Duration
	cmd := &cobra.Command{
		Use:   "lab [--quick] [--experiment NAME] [--dsn URL | --backend embedded|postgres] [--network emulated|kernel] [--out DIR]",
		Short: "Run the reference experiments (latency; flow control; concurrency; what-if; cluster; base backup) and write a report",
		Long: `Run the reference experiments through sluice, in this process, and report.

1. Latency: sysbench's oltp_read_write (sluice bench) through a sluice route
   at several added round-trip times (path emulation on the link:
   ALTER LINK default WITH (delay='RTT/2')), beside the model's prediction
   threads / (base latency + round trips x RTT); plus the table load
   (prepare) timed at added RTT 0 and 10 ms.
2. Flow control: a normal-priority query returning about 1 MB, measured
   under N concurrent bulk sessions that an exception rule penalises, on a
   link whose capacity the bulk sessions fill, with network_control off and
   on.
3. Concurrency: 32 ordinary sessions pulling 512 kB results in a loop, whose
   64 KiB windows together fill the link's device queue, and a small query of
   a high-priority pool measured repeatedly, with the ordinary pool's
   active_statements unlimited and limited: the small query's p50 and p99,
   the ordinary sessions' MB/s and statements/s.
4. What-if: oltp_read_write and a single-session loader (BEGIN, 10 INSERTs,
   COMMIT; 1 row per INSERT and batched) run unshaped; sluice's what-if table
   (SHOW WHATIF) predicts them at +1, +5 and +10 ms RTT; then each RTT is
   applied on the link and they run again: predicted against measured TPS and
   load duration, and the loaders scaled to a 4 GB table.

5. Cluster (--backend postgres only, not in --quick): a coordinator and
   three data nodes (postgres_fdw, four throwaway servers), every shard
   connection through a sluice route on one shared link; a high-priority
   join measured under N low-priority joins that an exception rule
   penalises, with network_control off and on.

6. Base backup (--backend postgres only; not in --quick): the throwaway
   server filled to 1.2 GB; pgbench (select-only, then tpcb-like, -c 4 -j 2,
   15 s each) through one route and pg_basebackup -X stream through another,
   as a replication role, on one link the backup alone saturates: pgbench
   alone, beside the backup unmanaged, with the backup's role in a
   network_priority='low' pool, and with pg_basebackup --max-rate set to the
   rate the low-priority backup averaged. pgbench's TPS, average and p99
   latency, the backup's duration and rate, and the link's idle capacity.

--experiment latency, flow, concurrency, whatif, cluster or basebackup runs
that one alone.

--network kernel runs the flow-control experiment over a real network on
this host instead of sluice's emulated link: two network namespaces (the
clients' and sluice's route's) joined by a veth pair whose egress toward
the clients goes through a tbf queue (--net-rate, default 200mbit;
--net-queue, default 100ms). sluice runs in this process, its route
listening inside its namespace, and reaches the database from the host's.
Three settings side by side: network_control off; on with nothing
configured about the link (the network controller finds the bottleneck
from the sockets' TCP_INFO); on with the link's capacity at 95% of the
tbf rate. Each reports the normal query's slowdown (beside the bulk
sessions over alone) and the link use (bytes through the tbf queue per
second over its rate). The addresses are in 198.18.0.0/15 only, inside
namespaces the lab creates and removes at the end, on error and on
interrupt too. It needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2
(ip, tc). With --backend postgres and --etcd ENDPOINTS the cluster
experiment runs there too: the coordinator and the three data nodes each
in a namespace of its own, with a sluice of its own in front of it (the
sluices a fleet on one catalog in etcd, under a prefix the run removes at
the end), all joined by a router namespace whose port toward the
coordinator goes through the tbf queue, so every data node's answers
cross it together. The other experiments measure sluice's own emulation
(delay, device queue) and are not run on the kernel network; each says
so.

The database is, by default, an embedded one started in process (SQLite
served over the PostgreSQL protocol): nothing to install. --backend postgres
starts a throwaway PostgreSQL from the installed server binaries (initdb
into a temporary directory, a free loopback port; removed at the end).
--dsn runs against your server: postgres://user:pass@host:port/db or
mysql://user:pass@host:port/db (MySQL or MariaDB). The lab creates the
sbtest tables there and drops them at the end (it stops if they already
exist); for the bulk sessions it creates a login named bulk with a random
password and drops it at the end, or, when one exists already or it may
not create one, uses the DSN's own user through a second route.

Scale:                        --quick                  full (default)
  latency: added RTT (ms)     0, 1, 5, 10              0, 0.3, 1, 2, 5, 10, 20
  latency: table              1 x 10000 rows           1 x 100000 rows
  latency: each run           3 s after 1 s warm-up    15 s after 3 s warm-up
  latency: threads            1 embedded, 4 on a server (both)
  prepare timed at RTT (ms)   0, 10                    0, 10
  flow: bulk sessions N       0, 1, 4, 10              0, 1, 2, 4, 8, 10
  flow: normal query runs     8 per point              20 per point
  flow: link capacity         calibrated (both): the largest of 100, 50,
                              20, 10, 5, 2 or 1 MB/s that one bulk session
                              streams ten times over (20 MB/s on 2 cores)
  flow, --network kernel: N   0, 4                     0, 2, 4, 8
  flow, --network kernel:     5 runs per point,        10 runs per point,
    normal query, settle      1 s settle               2 s settle
  cluster, --network kernel:  0, 2 low-priority        0, 2, 4, 8, 10; wt1,
                              joins; wt1, wt2 3000     wt2 6000 rows; 5 runs
                              rows; 3 runs per point   per point
  concurrency: sessions       32                       32
  concurrency: limits         unlimited, 4             unlimited, 2, 4, 8
  concurrency: small query    20 runs per point        50 runs per point
  concurrency: link           calibrated as flow's (both)
  what-if: added RTT (ms)     0, 1, 5, 10              0, 1, 5, 10
  what-if: benchmark run      3 s after 1 s warm-up    10 s after 2 s warm-up
  what-if: threads            1 embedded, 1 per core on a server, at most 4 (both)
  what-if: table              1 x 10000 rows           1 x 100000 rows
  what-if: rows per INSERT    1 (200 INSERTs), 100     1 (500 INSERTs), 100,
                              (50 INSERTs)             1000 (100 INSERTs each)
  what-if: loader job         repeated for 1 s         repeated for 3 s
  cluster: low-priority joins -                        0, 1, 2, 4, 8, 10
  cluster: tables             -                        wt1, wt2 24000 rows;
                                                       wt3, wt4 300 rows
  cluster: high-priority join -                        6 runs per point
  base backup                 -                        --backend postgres
  duration                    under 2 minutes          under 15 minutes, and
                                                       about 6 more for the
                                                       cluster and 5 for the
                                                       base backup (--backend
                                                       postgres)

Targets: slowdown at N=10 >= 6x with network_control off and <= 1.2x with
it on; TPS at 10 ms RTT within 15% of the model's prediction; with
active_statements=4 the small query's p50 <= 0.5x and the ordinary
throughput >= 0.85x their unlimited figures; what-if TPS and row-at-a-time
load duration at +1, +5 and +10 ms within 10% of sluice's prediction.
With --network kernel, directions rather than values: at the largest N the
slowdown with network_control on (nothing configured; with the capacity)
below the slowdown with it off. --quick --network kernel takes about 15 s
for the flow experiment and about 45 s more for the cluster on 2 cores.

Progress and tables go to standard output. --out DIR writes report.md,
report.json, tps_vs_rtt.svg, slowdown_vs_n.svg, high_latency_vs_active.svg,
throughput_vs_active.svg, whatif_predicted_vs_measured.svg,
cluster_slowdown_vs_n.svg, basebackup_latency.svg and basebackup_duration.svg;
with --network kernel, kernel_slowdown_vs_n.svg, kernel_link_use_vs_n.svg,
kernel_cluster_slowdown_vs_n.svg and kernel_cluster_link_use_vs_n.svg.`,
		Example: `  sluice lab --quick --out out/lab
  sluice lab --backend postgres --out out/lab
  sluice lab --dsn postgres://bench:secret@db1:5432/bench --out out/lab
  sluice lab --dsn mysql://bench:secret@db2:3306/bench --quick
  sluice lab --experiment concurrency --out out/conc
  sluice lab --experiment whatif --backend postgres --out out/whatif
  sluice lab --backend postgres --experiment basebackup --out out/bb
  sudo sluice lab --quick --network kernel --net-rate 200mbit --net-queue 100ms --out out/kernel
  sudo sluice lab --network kernel --backend postgres --experiment cluster --etcd 127.0.0.1:2379`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dsn != "" && cmd.Flags().Changed("backend") {
				return usageErr(errors.New("give --dsn or --backend, not both"))
			}
			log, err := newLogger(os.Stderr, logLevel, "text")
			if err != nil {
				return usageErr(err)
			}
			plan := lab.FullPlan()
			if quick {
				plan = lab.QuickPlan()
			}
			if plan, err = plan.Only(experiment); err != nil {
				return usageErr(err)
			}
			rate, err := lab.ParseNetRate(netRate)
			if err != nil {
				return usageErr(fmt.Errorf("--net-rate: %w", err))
			}
			if netQueue <= 0 {
				return usageErr(errors.New("--net-queue: must be positive"))
			}
			o := lab.Options{DSN: dsn, Backend: backend, PostgresBin: pgBin, Plan: plan, Out: out,
				Progress: cmd.OutOrStdout(), Clock: clock.Real{}, Logger: log,
				Network: network, NetRate: rate, NetQueue: netQueue, Etcd: etcdURL}
			if dsn != "" {
				o.Backend = ""
			}
			if _, err := lab.Run(cmd.Context(), o); err != nil {
				var ue *lab.UsageError
				if errors.As(err, &ue) {
					return usageErr(err)
				}
				return &exitError{code: 1, err: err}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&quick, "quick", false, "small scale, under 2 minutes (see the table above)")
	fl.StringVar(&experiment, "experiment", "", "run one experiment only: latency, flow, concurrency, whatif, cluster or basebackup")
	fl.StringVar(&dsn, "dsn", "", "run against this PostgreSQL or MySQL/MariaDB URL instead of a started backend")
	fl.StringVar(&backend, "backend", lab.BackendEmbedded, "database to start when no --dsn: embedded or postgres")
	fl.StringVar(&pgBin, "postgres-bin", "", "directory of initdb and postgres for --backend postgres (default: PATH, then /usr/lib/postgresql/*/bin)")
	fl.StringVar(&out, "out", "", "directory for report.md, report.json and the SVG charts")
	fl.StringVar(&network, "network", lab.NetworkEmulated, "the network the experiments cross: emulated (sluice's own link) or kernel (namespaces, veth and tbf on this host; root)")
	fl.StringVar(&netRate, "net-rate", "200mbit", "--network kernel: the bottleneck's rate (tbf), e.g. 200mbit, 1gbit, 25MB")
	fl.DurationVar(&netQueue, "net-queue", lab.DefaultNetQueue, "--network kernel: the bottleneck's queue, in time at its rate")
	fl.StringVar(&etcdURL, "etcd", "", "--network kernel, cluster: the etcd endpoints (host:port,...) or etcd://hosts/prefix the sluices of the nodes share a catalog on")
	fl.StringVar(&logLevel, "log-level", "error", "log level of the components (to standard error): debug, info, warn, error")
	return cmd
}

// Package metrics exposes sluice in the Prometheus text format, from a
// registry of its own (never the global default registry).
//
// Most metrics are converted at scrape time from the state the other
// packages keep, by one custom collector, so a scrape costs a snapshot of
// each link and of the session registry and nothing between scrapes:
//
//	sluice_link_bytes_total{link,direction,class}              counter
//	sluice_link_pool_bytes_total{link,direction,pool,class}    counter
//	sluice_link_queue_delay_seconds{link,direction,class}      histogram
//	sluice_link_waiting_bytes{link,direction,class}            gauge
//	sluice_link_device_queue_bytes{link,direction,class}       gauge
//	sluice_link_capacity_bytes_per_second{link}                gauge
//	sluice_link_delay_seconds{link}                            gauge
//	sluice_link_jitter_seconds{link}                           gauge
//	sluice_link_rate_bytes_per_second{link}                    gauge
//	sluice_sessions{route,user,pool}                           gauge
//	sluice_sessions_by_kind{kind}                              gauge (every kind, 0 included)
//	sluice_statements_running{route,user,pool}                 gauge (admitted, not ended)
//	sluice_statements_penalized{route,user,pool}               gauge
//	sluice_rule_firings_total{rule,action}                     counter
//	sluice_rule_checks_total                                   counter
//	sluice_rule_cancel_failures_total                          counter
//	sluice_route_unsent_bytes{route}                           gauge
//	sluice_emulation_release_lateness_seconds{route,direction,wait} histogram
//	sluice_session_panics_total{route}                         counter
//	sluice_route_bytes_total{route,direction}                  counter
//	sluice_pool_bytes_total{pool,direction}                    counter
//	sluice_catalog_changes_total{surface,outcome}              counter
//	sluice_catalog_revision                                    gauge
//	sluice_catalog_stale_since_seconds                         gauge
//	sluice_catalog_store_resets_total                          counter (an etcd store only)
//	sluice_pool_active_statements{pool}                        gauge
//	sluice_pool_admission_running{pool}                        gauge
//	sluice_pool_admission_waiting{pool}                        gauge
//	sluice_pool_block_seconds{pool}                            histogram
//	sluice_pool_idle_in_transaction_sessions{pool}             gauge
//	sluice_pool_idle_in_transaction_max_seconds{pool}          gauge
//	sluice_pool_idle_in_transaction_ended_total{pool}          counter
//	sluice_budget_rate_bytes_per_second                        gauge
//	sluice_budget_demand_bytes_per_second                      gauge
//	sluice_budget_allocator                                    gauge
//	sluice_budget_mode{mode}                                   gauge
//	sluice_whatif_round_trips_per_transaction{protocol,user,database,application} gauge
//	sluice_whatif_network_share{protocol,user,database,application}               gauge
//
// The sluice_budget_ gauges appear only on an instance of a fleet (with
// etcd): the rate its Low class runs at under the shared low-priority
// budget (cluster_low_priority_bandwidth), the demand it reports, 1 on
// the elected allocator, and 1 for its mode (off, waiting, grant,
// fallback; etcd_unreachable is 1 while etcd does not answer).
//
// direction is up (client to server) or down; class is high, normal or
// low; pool is "" for traffic outside any resource pool. The queue-delay
// histogram is the link's own: its buckets end at 50us, 100us, 250us,
// 500us, 1ms, 2.5ms, 5ms, 10ms, 25ms, 50ms, 100ms, 250ms, 500ms, 1s,
// 2.5s and 5s, and it counts one observation per send (a chunk of at
// most 32 KiB). Pool byte counters appear once a pool has sent bytes in
// a class. The emulation gauges are the link's own options (0 when
// unset), not those a route or pool may override.
//
// The sluice_whatif_ gauges are SHOW WHATIF's (package whatif, through
// Options.WhatIf): per application with a transaction in the
// what-if window, its mean round trips per transaction and the share of
// its latency the network's measured round trips take. The table keeps
// at most a bounded number of applications (the rest count as one
// (other) per protocol), so the label set is bounded.
//
// Admission (package admission, a pool's active_statements): the limit
// (0 unlimited), the statements holding a slot and those held waiting
// for one, for every pool of the catalog with a limit or in use, and pool
// "" for statements of no pool held by a link's max_active_statements;
// statements of a pool without a limit are not counted there.
// sluice_statements_running leaves held statements out. The block-time
// histogram counts, per pool, the statements that waited (admitted or
// not), with buckets ending at 1ms, 5ms, 10ms, 50ms, 100ms, 500ms, 1s,
// 5s, 10s and 60s; a pool appears once one of its statements waited, and
// leaves when the catalog drops it. A session that sits idle inside a
// transaction keeps its slot: the idle_in_transaction gauges count such
// sessions by pool and give the longest idle time now (every pool with
// a limit appears, at 0 when none sits idle); the counter counts the
// sessions ended for it past the pool's idle_in_transaction.
//
// sluice_session_panics_total counts sessions that ended because one of
// their goroutines panicked (each is logged at ERROR with its stack); a
// route appears once it has had one. Anything above zero is a bug worth
// reporting, but only that session ended.
//
// The release-lateness histogram says how precise the emulated delay is:
// how late each delay line handed a chunk to the socket after its release
// time (negative: early), with wait "precise" for a lone request or
// response and "timer" for the rest of a stream; its buckets run from
// -100us to 10ms. What the write and the receiver's wake-up add after
// that is the host's, not the emulation's, and is not in it. A route's
// histograms appear once it has released a chunk.
//
// sluice_route_bytes_total is the bytes of a route's sessions, closed
// and open (the watcher below keeps the closed sessions' totals and the
// set of open ones; a session is in one of the two, so the counter never
// goes back). sluice_pool_bytes_total is sluice_link_pool_bytes_total
// summed over links and classes. sluice_catalog_changes_total is the
// workload manager's audit counters: surface console, http, forward or
// config, outcome ok or error. sluice_catalog_store_resets_total counts
// the times etcd lost the catalog's history (its revisions went back,
// its cluster ID changed) and the catalog was reloaded whole.
// sluice_catalog_revision is the store's
// revision of the catalog in force (wlm.Service.AppliedRevision: the etcd
// revision with an etcd catalog); sluice_catalog_stale_since_seconds
// the unix time etcd stopped answering (wlm.Service.StaleSince), 0 while it
// answers and always with a file catalog.
//
// Five metrics are fed by a watcher of the session registry, since they
// describe events rather than state:
//
//	sluice_statements_total{route,user,pool,outcome}           counter
//	sluice_statement_duration_seconds{route,user,pool}         histogram
//	sluice_statements_penalized_total{route,user,pool}         counter
//	sluice_route_statements_total{route,outcome}               counter
//	sluice_pool_statements_total{pool,outcome}                 counter
//
// outcome is ok, error or cancelled.
//
// Routes and pools are bounded by the configuration and the catalog;
// users are not. Every user label is bounded by the catalog setting
// metrics_user_labels (default 0): the first users seen, up to that
// number, keep their name; every other user is OtherUser ("other"). A
// user keeps its label while the setting stays above its rank, so
// raising the setting admits new users and lowering it folds the latest
// back into "other". The Go runtime (go_*) and process
// (process_*) collectors complete the registry.
//
// Metrics is safe for concurrent use; Close stops the watcher.
package metrics

// Package stack assembles a whole sluice from a configuration: the
// session registry, the workload manager, the proxy server with one route
// per configured route (each with its protocol front end), the admin
// console and the HTTP API. `sluice serve`, the lab and the integration
// tests all build their sluice here, so there is one wiring to test.
//
// The postgres and mysql front ends get the workload manager as their
// wire.Admitter (Options.Admit): their sessions' statements wait on the
// wire for their pool's active_statements slot. Raw tcp routes have no
// statements and no admission.
//
// # What New does, in order
//
//  1. Makes the workload manager: loading the catalog file, if any; or,
//     with an etcd:// catalog (config.Config.Etcd), dialing the one etcd
//     client the stack keeps (a cluster that does not answer within the
//     dial timeout fails New), loading the catalog key (creating it with
//     the default catalog when absent) and starting to follow it
//     (store.Etcd.Follow, a background loop: the other instances'
//     changes, the stale-since time).
//  2. Validates everything without binding a socket: the config file's
//     links and settings (applied to the catalog as the console's
//     statements would be), each route's front end (TLS files) and
//     binding (its link, its emulation options), the admin console's
//     exposure (no password off loopback is refused) and the HTTP API's
//     (no token off loopback is refused). Any of these fails with a
//     *ConfigError, and the stack is torn down again: a configuration
//     error leaves no port taken.
//  3. Binds the routes, in the configuration's order.
//  4. Starts the workload manager's evaluator, then binds and serves the
//     admin console, then binds and serves the HTTP API (and starts its
//     dashboard sampler).
//  5. Names the instance (instance_name, else the host name and the
//     console's port) and, with a catalog in etcd, joins the fleet
//     (package fleet, fleet.go): it registers under a lease with the
//     stack's one etcd client, refusing a name a live instance holds,
//     and keeps the registration as a background loop; Close revokes
//     the lease as that loop ends, before the client closes. Lease
//     returns the lease for other loops' keys. The console and the HTTP
//     API answer SHOW INSTANCES and the cluster-wide views from the
//     stack's fleet.Cluster, which is this instance alone without etcd.
//
// An error after step 2 (an address already in use) is a plain error;
// it too tears down whatever was started. AddRoute adds a route later
// (the lab adds its routes one by one), through the same validation.
//
// # Reload
//
// Reload(ctx, next) makes next the configuration in force while the
// stack runs; ReloadConfig re-reads it first with Options.Load (sluice
// serve gives the loader of its --config file, flags and environment; the
// console's RELOAD, the HTTP API's POST /api/reload and SIGHUP all come
// here). Reloads are serialised (reloadMu). In order:
//
//  1. Validate next whole, changing nothing that runs: what only a
//     restart can change is refused (admin.listen, admin.password,
//     admin.users, admin.forward_users, http.listen, http.token,
//     catalog, the etcd_* keys, instance_name, instance_ttl,
//     fleet_token and fleet_timeout: "admin.listen cannot change on
//     reload; restart"); a new
//     route may not take the name of a route added at run time (the lab,
//     a Toxiproxy proxy); the links and settings and every route's
//     binding (link, pool, emulation) are applied to a scratch workload
//     manager holding a copy of the catalog; every route's front end is
//     built (its TLS files are read, changed or not). Any failure is a
//     *ConfigError (most hold a *config.Error naming file, key and
//     value) and nothing changed.
//  2. Bind the addresses of the added routes and of the routes whose
//     listen address changed. A bind error closes what was bound and
//     refuses the reload whole; so an address cannot pass from one
//     route to another in one reload (remove it in one, add it in the
//     next).
//  3. Apply: the links and settings (to the catalog, as at start; links
//     the file no longer names stay in the catalog: DROP LINK removes
//     them); each changed route's binding (wlm.Runtime.SetRoute: live
//     sessions re-bind at their next chunk, so a link, pool or emulation
//     change reaches them too) and its proxy route (proxy.Server.
//     ReplaceRoute: new sessions get the new upstream, TLS, front end and
//     timeouts; open ones keep theirs); a route whose listen address
//     changed drains its old listener and serves the new one; added
//     routes are served; removed routes drain.
//
// Draining (proxy.Server.DrainRoute): the listener is closed at once;
// its open sessions go on until they end or next's shutdown grace passes
// on the stack's clock, when they are closed. Once they have all ended,
// the route's workload manager binding is removed, unless the
// configuration then in force has a route of that name again. Drains run
// as background loops; Close ends them.
//
// Routes that did not change are not touched: their sessions see
// nothing. A step of 3 can still fail when a console statement changed
// the catalog since step 1 (a link dropped in between); the reload then
// stops there, the error is returned and logged, and the steps already
// applied stay. Reload logs its outcome at INFO (the routes added,
// removed and changed) or ERROR (with the file, key and value). Config
// and ConfigView return what is in force (cfgMu), when it took effect
// and the number of reloads before it.
//
// # The fleet's shared budget
//
// An instance whose catalog is in etcd runs its part of the shared
// low-priority budget (internal/fleet/budget): New starts it
// (startFleetBudget) once the membership started, as a background loop
// on the stack's one etcd client, under the catalog's prefix, with the
// instance's name and its membership lease (so its demand key and its
// candidacy vanish with the instance); it makes SHOW BUDGET and the
// budget metrics show the budget's state (registered as the budget view's wlm.Source).
// The budget reads cluster_low_priority_bandwidth from the catalog on
// every round (0, the default, keeps it idle) and caps the links
// through wlm.Manager.SetLowPriorityCaps. With a file or in-memory
// catalog it is never started and nothing changes.
//
// # What-if
//
// The stack owns one whatif.Table (Stack.WhatIf). Every postgres and
// mysql route's front end gets it (Options.WhatIf), so all client
// sessions count their round trips in it, and the workload manager
// serves it (registered as the whatif view's wlm.Source) to SHOW WHATIF, the whatif view,
// GET /api/whatif and the sluice_whatif_ metrics.
//
// # Shutdown
//
// Shutdown drains the proxy's sessions until its context ends; Close
// then stops everything, in this order: the background loops' context is
// cancelled; the admin console closes; the HTTP API stops serving (up to
// 2 s for requests in flight) and closes; the proxy server closes its
// listeners and remaining sessions; Close waits for every goroutine the
// stack started (the catalog's follower among them); the workload
// manager closes (it saves nothing on close, but the others read it
// until they stop); the etcd client, if any, closes last. Close is safe to call
// twice and from several goroutines; the first error of the first call
// is returned every time.
//
// # Ownership and concurrency
//
// A Stack owns every piece it made and closes them all; a Registry given
// in Options is used, not closed (a registry holds no resources). The
// pieces returned by Manager, Proxy and HTTP are safe for concurrent use
// and must not be closed by the caller. AddRoute, Reload and Close may be
// called from any goroutine. The Stack's own locks: reloadMu serialises
// reloads and the end of their drains, and is taken before cfgMu, which
// guards the configuration in force, its load time and revision; neither
// is held while calling into a piece that takes one of them. The other
// fields are set by New before it returns; Close runs once, under a
// sync.Once.
//
// The stack reads no environment variables and no global state: secrets
// from the environment (SLUICE_ADMIN_PASSWORD, SLUICE_HTTP_TOKEN,
// SLUICE_ETCD_PASSWORD) are
// put into the Config by the command that reads them.
package stack

// Package httpapi is sluice's HTTP server (sluice serve --http ADDR, or
// http: {listen, token} in the configuration file): Prometheus metrics, a
// JSON API over the workload manager's catalog and the live sessions, a
// Toxiproxy-compatible fault-injection API, and a live dashboard. It owns
// routing, authentication and the JSON forms; the state belongs to the
// workload manager, the session registry and the proxy server, and the
// subpackages own the metrics (metrics), the Toxiproxy API (toxics) and
// the page (dashboard).
//
// # Endpoints
//
//	GET    /metrics                       Prometheus text exposition
//	GET    /                              the dashboard (and /static/...)
//	GET    /api/snapshot                  the dashboard's data, polled every second
//	GET    /api/links[/{name}]            links        POST, PATCH /{name}, DELETE /{name}
//	GET    /api/pools[/{name}]            resource pools (same verbs)
//	GET    /api/rules[/{name}]            exception rules (same verbs)
//	GET    /api/users[/{name}]            user bindings (same verbs)
//	GET    /api/settings[/{name}]         settings     PATCH /{name} {"value": v}, DELETE /{name} (reset),
//	                                      PATCH /api/settings {"name": v, ...}
//	GET    /api/sessions[/{id}]           open sessions (?route= &user= &pool= &kind=)
//	GET    /api/statements[/{id}]         running, then recently ended statements
//	                                      (?state=running|ended|all &route= &user= &pool= &limit=)
//	POST   /api/statements/{id}/cancel    cancel through the protocol (202)
//	POST   /api/sessions/{id}/cancel      CANCEL STATEMENT id, audited; ?instance= forwards it
//	POST   /api/sessions/{id}/terminate   TERMINATE SESSION id, audited; ?instance= forwards it
//	                                      (both answer done, and missing when no session has id)
//	GET    /api/instances                 the fleet's live instances (package fleet)
//	GET    /api/views?name=v[&name=w]     this instance's views, as the other instances gather them
//	GET    /api/cluster/views?name=v      the views of every live instance, merged
//	                                      (column instance first), and notices naming
//	                                      the instances that did not answer
//	GET    /api/whatif[?rtt=1ms,5ms]      round trips per application and its latency and TPS at
//	                                      each added RTT (package whatif; default 1,5,10,50ms)
//	GET    /api/config                    the configuration in force, secrets omitted (config.View)
//	POST   /api/reload                    re-read and apply it: 200 with the changes, 400 code F0000 when refused
//	/proxies, /populate, /reset, /version the Toxiproxy API (package toxics); its changes audited
//
// A shard connection of a distributed query has its coordinator's
// session id in a session's "coordinator" (null otherwise); a statement
// has "parent" (its coordinator statement, null otherwise),
// "total_bytes_up" and "total_bytes_down" (its own plus its shard
// statements' bytes) and "nodes" (per shard route: statements,
// bytes_up, bytes_down), as SHOW SESSIONS and SHOW STATEMENTS show
// them. A session has SHOW SESSIONS' "state", "slot" (the pool whose
// active_statements slot it holds, "" for none) and "idle_in_transaction"
// (seconds idle in a transaction holding it; null otherwise); a pool has
// its "idle_in_transaction" bound (absent when none).
//
// Each request first waits for the proxy's SyncRegistry (Options.Proxy),
// so that the sessions, statements, views and metrics it reads hold
// every byte the relays' clients have received, those the kernel fast
// path relayed included.
//
// Statement text is shown as the session registry keeps it: with every
// password literal replaced by '***' (package redact), here, in the
// snapshot and on the page.
//
// # Catalog
//
// The catalog endpoints change nothing themselves: each request becomes
// the admin console's statement (CREATE / ALTER / DROP LINK, RESOURCE
// POOL, EXCEPT RULE, USER; SET, RESET, SHOW), built as a package ddl
// AST and run by the catalog service (wlm.Service.ExecStatement), so
// validation, atomicity and persistence are exactly the console's. A
// request body is a JSON object: "name" names the object, every other
// field is an option written as the console spells it (capacity, delay,
// jitter, rate, weight, network_priority, except_rule, bandwidth,
// elapsedtime, action, resource_pool, ...). A string is taken as it is, a
// number as written, a boolean as on or off, an array of strings joined
// by commas (except_rule), and null is DEFAULT in a PATCH (the option is
// unset) and ignored in a POST. Names and values go into the AST as
// they are (a value as a string), never through SQL text, so no request
// text can change a statement's meaning; each AST position is the
// number of the request field it came from, so an error names that
// field. Responses echo option values in the same spelling
// ("125MB/s", "10ms"), so an object read with GET can be sent back;
// read-only fields (a link's routes and byte counters, a pool's users,
// a rule's firings, ...) are ignored on input. Renaming is not
// supported.
//
// # Errors
//
// Every error is JSON:
//
//	{"error": "invalid value for parameter \"delay\": \"ten\": ...", "field": "delay",
//	 "status": 400, "code": "22023", "hint": "..."}
//
// field names the request field to blame (from the position the console
// reports in the statement built from the request), code is the SQLSTATE
// when the workload manager refused. Statuses: 400 for syntax and bad
// values (42601, 22023, 0A000), 404 for an unknown object named by the
// path (42704), 409 for a duplicate (42710) or an object others depend
// on (2BP01; DELETE ?cascade=true drops or detaches them), 500 when the
// catalog file cannot be written. An unknown object named by a body field
// (a pool's except_rule, a user's resource_pool) is 400, not 404. 401 is
// unauthenticated, 403 refused (below), 404 an unknown path, 405 a method
// the path does not take, 413 a body over 1 MiB.
//
// # Authentication
//
// With a token (http.token, or SLUICE_HTTP_TOKEN, which wins) every
// request needs it, the metrics and the page included:
//
//   - Authorization: Bearer TOKEN;
//   - or HTTP Basic authentication with the token as the password (any
//     user name), for clients that take only a URL, such as Toxiproxy's:
//     http://toxiproxy:TOKEN@host:port;
//   - or, for GET and HEAD only, the cookie that opening the page as
//     /?token=TOKEN sets (HttpOnly, SameSite=Strict, holding a digest of
//     the token, not the token) before redirecting to /. The page's own
//     requests then carry it. The cookie never authorises a change, so a
//     browser session cannot be used to change anything.
//
// The fleet's token (fleet_token, Options.FleetToken), which the
// instances send each other, is accepted as well as the API's, in the
// same ways; without an API token it is the API's token. A request
// carrying the X-Sluice-Instance header (fleet.InstanceHeader) is
// recorded in the audit trail with user instance:<name>.
//
// A missing or wrong token is 401 with WWW-Authenticate: Bearer.
// Without a token, sluice serve refuses to listen on an address that is
// not loopback (CheckExposure; exit code 2), and the server answers only
// requests whose Host is a loopback name (localhost, 127.0.0.1, [::1]),
// so that a web page cannot reach it through DNS rebinding, and the
// Toxiproxy API opens loopback listeners only: a proxy whose listen
// address is not loopback (0.0.0.0, "" or [::] as host, another name),
// whether it is created, populated or updated, is refused with 403, since
// such a port reaches whatever is behind it (a password-less admin
// console, say) from anywhere. Nothing under /api/ opens a listener.
//
// # Cross-site requests
//
// With a token or without, a request that changes something (any method
// but GET, HEAD and OPTIONS) is refused with 403 when a browser may have
// sent it for a page of another site, which could otherwise use the
// browser's loopback access or its cached Basic credentials:
//
//   - an Origin header naming another host than Host (browsers send
//     Origin on every cross-origin POST, and "null" from opaque origins)
//     is refused, whatever else the request carries;
//   - a POST, PUT or PATCH passes only if its Content-Type is
//     application/json (parameters allowed), or it carries the header
//     X-Sluice-Request (any value), or it bears no mark of a browser: no
//     Origin, Referer, Sec-Fetch-Site or Sec-Fetch-Mode header and no
//     User-Agent starting with "Mozilla/".
//
// A page of another site can send a POST without a preflight only as a
// "simple" request: a form, or a fetch with a form or text/plain body
// and no header of its own; both carry browser marks and neither can be
// JSON or carry X-Sluice-Request, so both are refused. A JSON body or a
// custom header makes the browser ask first (a CORS preflight, OPTIONS),
// and sluice never answers one with Access-Control-Allow-Origin, so the
// request is never sent. The third way in keeps programs working
// unchanged: Toxiproxy's Go client and toxiproxy-cli send text/plain on a
// proxy update (enable, disable) and on /reset, curl -d sends a form
// type, and neither sends a browser mark. DELETE needs only the Origin
// test: no form can send it, and another site's fetch can send it only
// after a preflight, for any body or none.
//
// # Metrics and dashboard
//
// /metrics is served from a registry of the server's own; package metrics
// lists the families (sluice_link_bytes_total{link,direction,class},
// sluice_link_queue_delay_seconds, sluice_statements_total{...,outcome},
// sluice_statement_duration_seconds, sluice_rule_firings_total{rule,
// action}, sluice_statements_penalized_total, the link emulation gauges,
// sluice_route_unsent_bytes and more) with the Go runtime and process
// collectors. The dashboard (package dashboard) polls /api/snapshot every
// second; there is no server push.
//
// # Toxiproxy
//
// The Toxiproxy subset is package toxics: a proxy made there is a tcp
// route of the proxy server with a link of its own, and its toxics wrap
// the route's sockets. Its documentation lists what differs from
// Toxiproxy. Because such a route cannot cancel statements, the workload
// manager refuses to make an abort rule reachable while one exists (a
// penalty rule is fine).
//
// A Server is safe for concurrent use. Run samples the dashboard until
// its context ends; Close stops the metrics' watcher and deletes the
// Toxiproxy proxies.
package httpapi

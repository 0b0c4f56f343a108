// Package config reads sluice's YAML configuration file and the route
// flags of `sluice serve` into one validated Config.
//
// Every error names the file, the key (as a path such as
// routes[1].protocol) and the bad value, so a user can fix the file
// without guessing. Unknown keys are errors too: a misspelt option must
// not be silently ignored; so are two routes or two links of one name.
// Config.ApplyFlags merges the flags of `sluice serve` (one route, the
// console and API addresses) into a parsed file, and Check then refuses
// any two addresses that would contend for one socket: the same port on
// the same host or under a wildcard (0.0.0.0, "", ::), so a clash is a
// configuration error, not a bind error halfway through starting.
// Nothing here touches the network or starts anything; the caller
// applies a Config it has been given whole.
//
// admin.forward_users lists the data-route users whose CREATE/ALTER USER
// ... RESOURCE POOL statements are split between the catalog and the
// database (data-port forwarding). It is empty, and forwarding off, by
// default; each entry must be a non-empty name without control
// characters, given once.
//
// A route's pool names the resource pool of its sessions whose user has
// no binding; the pool must exist in the catalog (the stack checks it,
// naming routes[i].pool). The TLS flags of sluice serve (--tls-cert,
// --tls-key, --upstream-tls, --upstream-tls-ca, --upstream-tls-insecure)
// set tls and upstream_tls on the flag route; their errors name the
// flag.
//
// For live reload, Compare lists the routes one configuration adds,
// removes and changes against another (where a route was given is not a
// change), CheckReload refuses what only a restart may change, and View
// describes a configuration in force without its secrets (passwords,
// tokens and kill passwords are shown only as set or not).
//
// catalog is a file, or an etcd:// URL (etcd://h1:2379,h2:2379/prefix;
// a host without a port takes 2379, no prefix is /sluice) for a catalog
// kept in etcd: Config.Etcd then holds the endpoints and prefix with the
// top-level keys etcd_ca_file, etcd_cert_file and etcd_key_file (TLS:
// both of the client pair or neither) and etcd_user and etcd_password
// (a password needs its user). A URL with credentials is refused (a
// password does not belong in a value that is shown); so are etcd_* keys
// without an etcd catalog, once --catalog has had its say. The password
// is a secret like the others: View shows only that it is set, errors
// never show it, and any etcd_* change needs a restart.
//
// Route timeouts are durations with a unit; absent or 0 means the front
// end's default. startup_timeout applies to postgres and mysql routes,
// connect_timeout to mysql routes only, dial_timeout to every route;
// each elsewhere is an error.
package config

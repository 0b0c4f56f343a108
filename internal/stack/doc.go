// Package stack assembles a whole sluice from a configuration: the
// session registry, the workload manager, the proxy server with one route
// per configured route (each with its protocol front end), the admin
// console and the HTTP API. `sluice serve`, the lab and the integration
// tests all build their sluice here, so there is one wiring to test.
//
// # What New does, in order
//
//  1. Makes the workload manager (loading the catalog file, if any).
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
//
// An error after step 2 (an address already in use) is a plain error;
// it too tears down whatever was started. AddRoute adds a route later
// (the lab adds its routes one by one), through the same validation.
//
// # Shutdown
//
// Shutdown drains the proxy's sessions until its context ends; Close
// then stops everything, in this order: the background loops' context is
// cancelled; the admin console closes; the HTTP API stops serving (up to
// 2 s for requests in flight) and closes; the proxy server closes its
// listeners and remaining sessions; Close waits for every goroutine the
// stack started; the workload manager closes last (it saves nothing on
// close, but the others read it until they stop). Close is safe to call
// twice and from several goroutines; the first error of the first call
// is returned every time.
//
// # Ownership and concurrency
//
// A Stack owns every piece it made and closes them all; a Registry given
// in Options is used, not closed (a registry holds no resources). The
// pieces returned by Manager, Proxy and HTTP are safe for concurrent use
// and must not be closed by the caller. AddRoute and Close may be called
// from any goroutine. The Stack holds no lock of its own (its fields are
// set by New before it returns; Close runs once, under a sync.Once), so
// there is no lock order to keep with the pieces'.
//
// The stack reads no environment variables and no global state: secrets
// from the environment (SLUICE_ADMIN_PASSWORD, SLUICE_HTTP_TOKEN) are
// put into the Config by the command that reads them.
package stack

// Package toxics is sluice's Toxiproxy-compatible fault injection: the
// subset of Toxiproxy's HTTP API that clients and test suites use
// (proxies, toxics, /reset, /populate, /version), with the same JSON
// shapes and status codes, so they drive sluice unchanged.
//
// # Proxies
//
// A proxy is a tcp route of the proxy.Server (no protocol front end: the
// bytes are relayed from the first one) from its listen address to its
// upstream, attached to a link named after the proxy, which the Service
// creates with CREATE LINK and drops with the proxy (a link that existed
// before is used and kept). So everything sluice does to a route applies
// to a proxy too: the link's capacity, delay and priority classes, the
// session registry, the metrics. Disabling a proxy (enabled false) stops
// its listener and closes its connections; enabling it listens again on
// the address it had. A new listen or upstream address restarts it.
//
// # Toxics
//
// Toxics act on writes: a downstream toxic on what the proxy writes to
// the client (the server's bytes), an upstream toxic on what it writes to
// the server. They are applied by wrapping the two sockets of each
// session (proxy.Route.WrapClient and WrapUpstream). Each connection
// draws every toxic's toxicity when it opens, and again when the toxic is
// added or updated: the toxic acts on the connection with that
// probability. Changes apply to live connections as well as new ones.
//
//	latency     latency, jitter (ms)   each chunk waits latency ± jitter (uniform)
//	bandwidth   rate (KB/s, 1000 B/s)  the stream is limited to rate
//	timeout     timeout (ms)           no data passes; the connection closes
//	                                   timeout after the toxic began to act or
//	                                   data last arrived; 0 never closes
//	reset_peer  timeout (ms)           timeout after the first data, the socket
//	                                   is closed with a TCP RST; the data is lost
//	slow_close  delay (ms)             the end of stream (FIN) waits delay
//	slicer      average_size, size_variation (bytes), delay (µs)
//	                                   writes are cut into pieces of about
//	                                   average_size, delay apart
//	limit_data  bytes                  after bytes have passed, the connection
//	                                   closes
//
// Latency and bandwidth are emulated by a netem.Path and netem.Line per
// connection and stream: every chunk gets an absolute release deadline,
// so delays are precise to well under a millisecond and do not add up
// over chunks, and nothing is reordered.
//
// # Audit trail
//
// With Options.Audit (package stack gives it the Manager's audit log),
// every change made through the API is recorded there as the console's
// are, successful or not, with the Actor of the request (surface http,
// user token when the API token was presented, the client's address),
// and logged at INFO as "catalog change". The change is written as text
// naming the proxy and toxic and the values the request set:
//
//	TOXIPROXY CREATE PROXY "db" LISTEN '127.0.0.1:0' UPSTREAM '10.0.0.5:5432' ENABLED true
//	TOXIPROXY ALTER PROXY "db" ENABLED false
//	TOXIPROXY DROP PROXY "db"
//	TOXIPROXY POPULATE PROXY "db" ...; TOXIPROXY POPULATE PROXY "cache" ...
//	TOXIPROXY ADD TOXIC "lag" ON "db" TYPE 'latency' TOXICITY 1 ATTRIBUTES ("latency" = 100)
//	TOXIPROXY ALTER TOXIC "lag" ON "db" TOXICITY 0.5 ATTRIBUTES ("jitter" = 10)
//	TOXIPROXY REMOVE TOXIC "lag" ON "db"
//	TOXIPROXY RESET
//
// None carries a secret: the API has none to set (the token is in a
// header, never recorded). A refused request is recorded with a SQLSTATE
// for its HTTP status: 400 as 22023, 403 as 42501, 404 as 42704, 409 as
// 42710, any other as XX000. The link a proxy creates and drops is
// recorded as well, as CREATE LINK and DROP LINK.
//
// # Differences from Toxiproxy
//
//   - A timeout toxic holds the data back (the proxy stops reading; no
//     byte is dropped) until the toxic is removed or the connection
//     closes, as Toxiproxy's documentation says; Toxiproxy 2.5 drops the
//     data. It holds the stream wherever it sits in the chain.
//   - Latency and bandwidth toxics of one stream form one emulated path
//     at the end of the chain, after limit_data and slicer whatever their
//     order: latencies and jitters add up, the lowest rate wins. Toxiproxy
//     chains them in creation order, which gives the same bytes and
//     nearly the same timing. Bandwidth is a token bucket with one
//     millisecond of burst rather than a sleep per chunk.
//   - reset_peer resets the socket of the stream it is on (downstream: the
//     client's, upstream: the server's); the other side of the session is
//     closed normally. Toxiproxy resets both when the toxic was present
//     at connect time.
//   - slow_close delays the half-close that ends a stream; a session that
//     fails is closed at once.
//   - limit_data counts from when it began to act on the connection.
//   - Attributes are checked: an unknown attribute, a negative value, a
//     value that is not an integer, a slicer whose size_variation is not
//     smaller than average_size, and a toxicity outside [0, 1] are refused
//     with 400 and a message naming the field. Toxiproxy ignores unknown
//     attributes and accepts negative values.
//   - Error bodies carry Toxiproxy's "error" and "status" and, when one
//     field is to blame, "field".
//   - A proxy without a listen address listens on DefaultListen
//     (127.0.0.1, a free port), not on every interface. An address in use
//     is 409 and any other listen failure 400 (Toxiproxy: 500). An
//     address that Options.CheckListen refuses is 403 (package httpapi
//     refuses non-loopback addresses when it has no token).
//   - Proxy and toxic names may not contain '/' or control characters.
//   - Only proxies made through this API carry toxics; routes from the
//     configuration file are not listed.
//   - GET /version answers the sluice version, as text, or as
//     {"version": ...} to a client that accepts only JSON.
//   - Requests from browsers are not refused by user agent (Toxiproxy
//     refuses any whose User-Agent starts with Mozilla/); package httpapi
//     refuses those that could be cross-site forgeries instead.
//
// A Service is safe for concurrent use.
package toxics

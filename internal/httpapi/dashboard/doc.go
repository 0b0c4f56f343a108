// Package dashboard is sluice's live page: one HTML page, a stylesheet
// and a script embedded in the binary (no CDN, no external library), and
// the JSON snapshot the page polls every second.
//
// A Dashboard samples the links every Interval (one second by default)
// into a ring buffer of Keep samples (five minutes): bytes per second by
// class and by resource pool, summed over both directions of every link,
// and the mean queue delay of each class's sends completed in the
// interval (absent when a class sent nothing). It also keeps each running
// statement's bytes per second over the last interval. Counters that go
// back (a link dropped and made anew) count from zero. The first sample
// only records the counters; rates start with the second.
//
// Snapshot assembles what the page shows: the series, the running
// statements with the highest bytes per second (with pool, class and
// penalty state), the latest exception-rule firings from the workload
// manager's firing history (the firings view's rows, newest first, with
// their outcome: a firing stays there however many statements end
// after it), the exception rules with their firings, the links' settings with their
// current rate, and the global settings. The page draws the series as
// inline SVG paths (one <path data-series="NAME"> per series) and fills
// the tables with text nodes only, so statement text is never
// interpreted as markup. It is served with a Content-Security-Policy
// that allows only its own files.
//
// The page's what-if panel polls GET /api/whatif (package httpapi
// serves it) every two seconds with the RTT list of its input, and plots
// per application the predicted transaction latency and throughput
// against added RTT, today's figures at 0: one <path data-app="KEY"> per
// application in each chart, KEY being protocol/user/database/application.
// A refused list is shown beside the input and the last plot stays.
//
// The Dashboard does not authenticate; package httpapi does.
//
// A Dashboard is safe for concurrent use; Run samples until its context
// ends, and Sample steps it by hand in virtual time.
package dashboard

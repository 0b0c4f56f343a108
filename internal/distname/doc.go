// Package distname reads the application_name patterns that carry a
// coordinator backend's process id: the setting
// distributed_application_name, which says how a shard connection of a
// distributed query (postgres_fdw, Citus) names the coordinator session
// it works for.
//
// A pattern is literal text with escapes, in postgres_fdw's spelling
// (postgres_fdw.application_name, PostgreSQL 15):
//
//	%p  the coordinator backend's process id, in decimal
//	%c  postgres_fdw's session id, "<start time hex>.<pid hex>": the pid is
//	    the part after the dot
//	%g  a Citus global pid, nodeid*10^10 + pid, in decimal (Citus names its
//	    internal connections "citus_internal gpid=%g"): the pid is gpid
//	    modulo 10^10
//	%a %u %d %C  the coordinator's application name, user, database and
//	    cluster name: any text, possibly empty, not compared
//	%%  a literal %
//
// Exactly one of %p, %c and %g must appear; any other escape, or a %
// at the end, is an error. The empty pattern is valid and matches
// nothing: it turns linking off. Text outside escapes matches itself,
// case-sensitively.
//
// Match takes the first way the name fits the pattern, trying shorter
// texts for %a %u %d %C first. It runs in time polynomial in the name
// (memoised), never exponential, and refuses names longer than MaxName
// bytes and patterns longer than MaxPattern bytes. PostgreSQL keeps 63
// bytes of an application_name; a pattern whose expansion is cut there
// matches only if the pid survives whole, as it does with the default
// "fdw %p".
//
// Values are immutable and safe for concurrent use.
package distname

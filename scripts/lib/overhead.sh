# shellcheck shell=bash
# scripts/lib/overhead.sh: what the overhead scripts share. Source it after
# setting ROUNDS and defining run PORT (runs one benchmark against
# 127.0.0.1:PORT and prints its TPS).
#
#   compare direct:15432 sluice:16432 ...
#
# runs every target once per round, in turn (the order rotates each
# round, so no target always follows the same one), prints each run, then
# each target's mean TPS and its ratio to the first target's.
#
# start_haproxy PORT UPSTREAM_PORT and start_pgbouncer PORT UPSTREAM_PORT
# start the reference proxies when they are installed (apt-get install
# haproxy pgbouncer) and print their port; they are stopped by
# stop_references. Without them the comparison is sluice against direct.
#
# start_kernelrelay PORT UPSTREAM_PORT starts measure/kernelrelay, a relay
# whose bytes never leave the kernel (BPF sockmap): the ceiling any proxy
# could reach here. It needs root; without it the row is left out.

overhead_tmp=$(mktemp -d)
chmod 777 "$overhead_tmp" # pgbouncer runs as postgres and writes its pid and log here

compare() {
	local -a names=() ports=()
	local t
	for t in "$@"; do
		names+=("${t%%:*}")
		ports+=("${t##*:}")
	done
	local n=${#names[@]} r i k tps
	local -A sum=()
	printf '%-6s %-10s %12s\n' round target tps
	for r in $(seq 1 "$ROUNDS"); do
		for k in $(seq 0 $((n - 1))); do
			i=$(((k + r - 1) % n))
			tps=$(run "${ports[$i]}")
			printf '%-6s %-10s %12.1f\n' "$r" "${names[$i]}" "$tps"
			sum[${names[$i]}]=$(echo "${sum[${names[$i]}]:-0} + $tps" | bc -l)
		done
	done
	local base
	base=$(echo "${sum[${names[0]}]} / $ROUNDS" | bc -l)
	for i in $(seq 0 $((n - 1))); do
		local mean
		mean=$(echo "${sum[${names[$i]}]} / $ROUNDS" | bc -l)
		printf 'mean %-10s %12.1f tps   ratio to %s %.3f\n' "${names[$i]}" "$mean" "${names[0]}" "$(echo "$mean / $base" | bc -l)"
	done
}

start_haproxy() { # port upstream_port
	command -v haproxy >/dev/null || return 1
	cat >"$overhead_tmp/haproxy.cfg" <<CFG
global
  maxconn 4000
  nbthread 1
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
listen db
  bind 127.0.0.1:$1
  server db 127.0.0.1:$2
CFG
	haproxy -f "$overhead_tmp/haproxy.cfg" -D -p "$overhead_tmp/haproxy.pid" || return 1
	echo "$1"
}

start_pgbouncer() { # port upstream_port (PostgreSQL user and password sluice)
	command -v pgbouncer >/dev/null || return 1
	cat >"$overhead_tmp/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$2
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $1
auth_type = plain
auth_file = $overhead_tmp/users.txt
pool_mode = session
max_client_conn = 4000
default_pool_size = 100
logfile = $overhead_tmp/pgbouncer.log
pidfile = $overhead_tmp/pgbouncer.pid
INI
	echo '"sluice" "sluice"' >"$overhead_tmp/users.txt"
	chmod 644 "$overhead_tmp"/*
	local as=()
	[ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
	"${as[@]}" pgbouncer -d "$overhead_tmp/pgbouncer.ini" >/dev/null 2>&1 || return 1
	for _ in $(seq 1 50); do
		[ -s "$overhead_tmp/pgbouncer.pid" ] && break
		sleep 0.1
	done
	echo "$1"
}

start_kernelrelay() { # port upstream_port
	[ "$(id -u)" = 0 ] || return 1
	go build -o "$overhead_tmp/kernelrelay" ./measure/kernelrelay || return 1
	"$overhead_tmp/kernelrelay" -listen "127.0.0.1:$1" -upstream "127.0.0.1:$2" >/dev/null 2>"$overhead_tmp/kernelrelay.log" &
	echo $! >"$overhead_tmp/kernelrelay.pid"
	for _ in $(seq 1 50); do
		grep -q "relaying in the kernel" "$overhead_tmp/kernelrelay.log" && {
			echo "$1"
			return 0
		}
		kill -0 "$(cat "$overhead_tmp/kernelrelay.pid")" 2>/dev/null || break
		sleep 0.1
	done
	cat "$overhead_tmp/kernelrelay.log" >&2
	return 1
}

stop_references() {
	local f
	for f in "$overhead_tmp"/haproxy.pid "$overhead_tmp"/pgbouncer.pid "$overhead_tmp"/kernelrelay.pid; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	rm -rf "$overhead_tmp"
}

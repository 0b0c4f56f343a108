# shellcheck shell=bash
# scripts/lib/overhead.sh: what the overhead scripts share. Source it after
# setting ROUNDS and defining run PORT, which runs one benchmark against
# 127.0.0.1:PORT and prints its TPS and, after it, the number of
# transactions it made (the TPS times the run's length when left out).
#
#   compare direct:15432 sluice:16432:PID ...
#
# runs every target once per round, in turn (the order rotates each
# round, so no target always follows the same one), prints each run, then
# each target's mean TPS and its ratio to the first target's. A target
# with a process id also gets that process's CPU time per transaction
# (user + system, from /proc/PID/stat, all threads; in microseconds; the
# kernel's accounting has a 10 ms tick, so runs should make at least a
# second of CPU), its context switches per transaction (voluntary and
# involuntary, summed over /proc/PID/task/*/status before and after the
# run) and, of those, the involuntary ones (preempted/tx: the kernel took
# the CPU from a thread that could still run, typically for the process
# its write just woke). Every target, direct too, also gets the whole
# machine's busy CPU time per transaction (host_us/tx: user, nice,
# system, irq and softirq of all CPUs, from /proc/stat, in microseconds):
# the only column that shows work a relay leaves to the kernel (softirq,
# its work queues) or makes the clients and the server do; a target's
# excess over direct's is all it costs. The means are left in MEAN_TPS,
# CPU_TX, CS_TX, PRE_TX and HOST_TX, by target name, for verdict.
#
#   verdict "what" tps|cpu|host TARGET FACTOR REF...
#
# prints one goal line, met or not met: for tps, TARGET's mean TPS against
# FACTOR times the best of the REFs that ran; for cpu, TARGET's CPU per
# transaction against FACTOR times the lowest of theirs; for host, the
# same with each one's host_us/tx less the first target's (direct's): what
# it costs the whole machine per transaction, the kernel's work for it
# included, which its own CPU column leaves out when the kernel relays its
# bytes. REFs that did not run are passed over; with none, the goal is
# "not measured".
#
# start_haproxy, start_pgbouncer and start_toxiproxy PORT UPSTREAM_PORT
# start the reference proxies when they are installed (apt-get install
# haproxy pgbouncer; toxiproxy-server on the PATH) and print PORT:PID;
# they are stopped by stop_references. Without them the comparison is
# sluice against direct.
#
# start_kernelrelay PORT UPSTREAM_PORT starts measure/kernelrelay, a relay
# whose bytes never leave the kernel (BPF sockmap), as a reference. It
# needs root; without it the row is left out. Most of its work is done in
# softirq, charged to whichever process the packet interrupted, so its CPU
# column counts only part of what it costs.
#
# start_evrelay PORT UPSTREAM_PORT [FLAGS...] starts measure/evrelay, a
# relay written in Go as an epoll event loop on sluice's poller (FLAGS
# choose the variant: -et, -loops N), as a reference for what such a
# relay costs. measure/ is a module of its own, built from its directory. EVRELAY_PROFILE=FILE makes it write a CPU profile there when
# stopped.

overhead_tmp=$(mktemp -d)
chmod 777 "$overhead_tmp" # pgbouncer runs as postgres and writes its pid and log here

declare -A MEAN_TPS=() CPU_TX=() CS_TX=() PRE_TX=() HOST_TX=()
BASE_NAME= # the first target compare ran, set by compare

host_busy_ticks() { # -> the machine's busy time, all CPUs, in clock ticks
	awk '/^cpu /{print $2 + $3 + $4 + $7 + $8; exit}' /proc/stat
}

proc_cpu_ticks() { # pid -> utime+stime of all threads, in clock ticks
	awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

proc_ctxsw() { # pid -> context switches summed over its threads, then the involuntary ones
	cat /proc/"$1"/task/*/status 2>/dev/null |
		awk '/^(non)?voluntary_ctxt_switches/ {n += $2} /^nonvoluntary_ctxt_switches/ {p += $2} END {print n + 0, p + 0}'
}

compare() {
	local -a names=() ports=() pids=()
	local t rest
	for t in "$@"; do
		names+=("${t%%:*}")
		rest=${t#*:}
		ports+=("${rest%%:*}")
		if [[ $rest == *:* ]]; then pids+=("${rest#*:}"); else pids+=(""); fi
	done
	local n=${#names[@]} r i k out tps tx pid c0 c1 s0 s1 p0 p1 h0 h1 hz
	hz=$(getconf CLK_TCK)
	local -A sum=() txs=() cpu=() cs=() pre=() host=()
	printf '%-6s %-12s %12s %12s %10s %14s %12s\n' round target tps cpu_us/tx cs/tx preempted/tx host_us/tx
	for r in $(seq 1 "$ROUNDS"); do
		for k in $(seq 0 $((n - 1))); do
			i=$(((k + r - 1) % n))
			pid=${pids[$i]}
			if [ -n "$pid" ]; then
				c0=$(proc_cpu_ticks "$pid")
				read -r s0 p0 <<<"$(proc_ctxsw "$pid")"
			fi
			h0=$(host_busy_ticks)
			out=$(run "${ports[$i]}")
			h1=$(host_busy_ticks)
			read -r tps tx <<<"$out"
			tps=${tps:-0}
			tx=${tx:-$(echo "$tps * $DURATION" | bc -l)}
			local name=${names[$i]} cpucol=- cscol=- precol=- hostcol=-
			host[$name]=$(echo "${host[$name]:-0} + ($h1 - $h0) * 1000000 / $hz" | bc -l)
			if [ "$(echo "$tx > 0" | bc)" = 1 ]; then
				hostcol=$(printf '%.1f' "$(echo "($h1 - $h0) * 1000000 / $hz / $tx" | bc -l)")
			fi
			sum[$name]=$(echo "${sum[$name]:-0} + $tps" | bc -l)
			txs[$name]=$(echo "${txs[$name]:-0} + $tx" | bc -l)
			if [ -n "$pid" ]; then
				c1=$(proc_cpu_ticks "$pid")
				read -r s1 p1 <<<"$(proc_ctxsw "$pid")"
				cpu[$name]=$(echo "${cpu[$name]:-0} + ($c1 - $c0) * 1000000 / $hz" | bc -l)
				cs[$name]=$(echo "${cs[$name]:-0} + $s1 - $s0" | bc -l)
				pre[$name]=$(echo "${pre[$name]:-0} + $p1 - $p0" | bc -l)
				if [ "$(echo "$tx > 0" | bc)" = 1 ]; then
					cpucol=$(printf '%.1f' "$(echo "($c1 - $c0) * 1000000 / $hz / $tx" | bc -l)")
					cscol=$(printf '%.3f' "$(echo "($s1 - $s0) / $tx" | bc -l)")
					precol=$(printf '%.3f' "$(echo "($p1 - $p0) / $tx" | bc -l)")
				fi
			fi
			printf '%-6s %-12s %12.1f %12s %10s %14s %12s\n' "$r" "$name" "$tps" "$cpucol" "$cscol" "$precol" "$hostcol"
		done
	done
	local base
	base=$(echo "${sum[${names[0]}]} / $ROUNDS" | bc -l)
	BASE_NAME=${names[0]}
	for i in $(seq 0 $((n - 1))); do
		local name=${names[$i]} mean cpucol=- cscol=- precol=- hostcol=-
		mean=$(echo "${sum[$name]} / $ROUNDS" | bc -l)
		MEAN_TPS[$name]=$mean
		if [ "$(echo "${txs[$name]} > 0" | bc)" = 1 ]; then
			HOST_TX[$name]=$(echo "${host[$name]} / ${txs[$name]}" | bc -l)
			hostcol=$(printf '%.1f us' "${HOST_TX[$name]}")
		fi
		if [ -n "${cpu[$name]:-}" ] && [ "$(echo "${txs[$name]} > 0" | bc)" = 1 ]; then
			CPU_TX[$name]=$(echo "${cpu[$name]} / ${txs[$name]}" | bc -l)
			CS_TX[$name]=$(echo "${cs[$name]} / ${txs[$name]}" | bc -l)
			PRE_TX[$name]=$(echo "${pre[$name]} / ${txs[$name]}" | bc -l)
			cpucol=$(printf '%.1f us' "${CPU_TX[$name]}")
			cscol=$(printf '%.3f' "${CS_TX[$name]}")
			precol=$(printf '%.3f' "${PRE_TX[$name]}")
		fi
		printf 'mean %-12s %10.1f tps   ratio to %s %.3f   cpu/tx %10s   cs/tx %6s   preempted/tx %6s   host/tx %10s\n' \
			"$name" "$mean" "${names[0]}" "$(echo "$mean / $base" | bc -l)" "$cpucol" "$cscol" "$precol" "$hostcol"
	done
}

value_of() { # tps|cpu|host target -> the figure verdict compares, or nothing
	case $1 in
	tps) echo "${MEAN_TPS[$2]:-}" ;;
	cpu) echo "${CPU_TX[$2]:-}" ;;
	host)
		if [ -n "$BASE_NAME" ] && [ -n "${HOST_TX[$2]:-}" ] && [ -n "${HOST_TX[$BASE_NAME]:-}" ]; then
			echo "${HOST_TX[$2]} - ${HOST_TX[$BASE_NAME]}" | bc -l
		fi
		;;
	esac
}

verdict() { # what tps|cpu|host target factor refs...
	local what=$1 kind=$2 target=$3 factor=$4
	shift 4
	local ref best= bestname= v
	for ref in "$@"; do
		v=$(value_of "$kind" "$ref")
		[ -z "$v" ] && continue
		if [ -z "$best" ] ||
			{ [ "$kind" = tps ] && [ "$(echo "$v > $best" | bc)" = 1 ]; } ||
			{ [ "$kind" != tps ] && [ "$(echo "$v < $best" | bc)" = 1 ]; }; then
			best=$v bestname=$ref
		fi
	done
	v=$(value_of "$kind" "$target")
	if [ -z "$best" ] || [ -z "$v" ]; then
		printf 'goal %s: not measured (no %s)\n' "$what" "$*"
		return
	fi
	local bound met="not met" unit=tps
	[ "$kind" != tps ] && unit="us/tx"
	bound=$(echo "$factor * $best" | bc -l)
	if [ "$kind" = tps ]; then
		[ "$(echo "$v >= $bound" | bc)" = 1 ] && met=met
		printf 'goal %s: %s %.1f %s >= %s x %s %.1f = %.1f: %s\n' "$what" "$target" "$v" "$unit" "$factor" "$bestname" "$best" "$bound" "$met"
	else
		[ "$(echo "$v <= $bound" | bc)" = 1 ] && met=met
		printf 'goal %s: %s %.1f %s <= %s x %s %.1f = %.1f: %s\n' "$what" "$target" "$v" "$unit" "$factor" "$bestname" "$best" "$bound" "$met"
	fi
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
	echo "$1:$(cat "$overhead_tmp/haproxy.pid")"
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
	[ -s "$overhead_tmp/pgbouncer.pid" ] || return 1
	echo "$1:$(cat "$overhead_tmp/pgbouncer.pid")"
}

start_kernelrelay() { # port upstream_port [proto]
	[ "$(id -u)" = 0 ] || return 1
	go -C measure build -o "$overhead_tmp/kernelrelay" ./kernelrelay || return 1
	"$overhead_tmp/kernelrelay" -listen "127.0.0.1:$1" -upstream "127.0.0.1:$2" -proto "${3:-postgres}" >/dev/null 2>"$overhead_tmp/kernelrelay.log" &
	echo $! >"$overhead_tmp/kernelrelay.pid"
	for _ in $(seq 1 50); do
		grep -q "relaying in the kernel" "$overhead_tmp/kernelrelay.log" && {
			echo "$1:$(cat "$overhead_tmp/kernelrelay.pid")"
			return 0
		}
		kill -0 "$(cat "$overhead_tmp/kernelrelay.pid")" 2>/dev/null || break
		sleep 0.1
	done
	cat "$overhead_tmp/kernelrelay.log" >&2
	return 1
}

start_evrelay() { # port upstream_port [flags...]
	local port=$1 up=$2
	shift 2
	local prof=()
	[ -n "${EVRELAY_PROFILE:-}" ] && prof=(-cpuprofile "$EVRELAY_PROFILE")
	go -C measure build -o "$overhead_tmp/evrelay" ./evrelay || return 1
	"$overhead_tmp/evrelay" -listen "127.0.0.1:$port" -upstream "127.0.0.1:$up" "${prof[@]}" "$@" >/dev/null 2>"$overhead_tmp/evrelay-$port.log" &
	local pid=$!
	echo $pid >"$overhead_tmp/evrelay-$port.pid"
	for _ in $(seq 1 50); do
		grep -q "relaying with an event loop" "$overhead_tmp/evrelay-$port.log" && {
			echo "$port:$pid"
			return 0
		}
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$overhead_tmp/evrelay-$port.log" >&2
	return 1
}

start_toxiproxy() { # port upstream_port (a proxy with no toxics)
	command -v toxiproxy-server >/dev/null || return 1
	local api=$(($1 + 100))
	toxiproxy-server -host 127.0.0.1 -port "$api" >"$overhead_tmp/toxiproxy.log" 2>&1 &
	echo $! >"$overhead_tmp/toxiproxy.pid"
	for _ in $(seq 1 50); do
		curl -sf "http://127.0.0.1:$api/version" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -sf -X POST "http://127.0.0.1:$api/proxies" \
		-d "{\"name\":\"db\",\"listen\":\"127.0.0.1:$1\",\"upstream\":\"127.0.0.1:$2\",\"enabled\":true}" >/dev/null || return 1
	echo "$1:$(cat "$overhead_tmp/toxiproxy.pid")"
}

stop_references() {
	local f
	for f in "$overhead_tmp"/haproxy.pid "$overhead_tmp"/pgbouncer.pid "$overhead_tmp"/kernelrelay.pid "$overhead_tmp"/toxiproxy.pid "$overhead_tmp"/evrelay-*.pid; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	for f in "$overhead_tmp"/evrelay-*.pid; do # its profile is written on the way out
		[ -s "$f" ] && while kill -0 "$(cat "$f")" 2>/dev/null; do sleep 0.1; done
	done
	rm -rf "$overhead_tmp"
}

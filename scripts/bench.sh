#!/usr/bin/env bash
# bench.sh is `make bench`: Tollgate's performance harness (tools/bench).
# Never part of `make test`.
#
# With the binaries built (bin/tollgate, bin/tollbench) and PostgreSQL up,
# it
#   1. recreates the scratch databases: $BENCH_DB for Tollgate,
#      $BENCH_DB_ceiling for the pgbench ceiling (throughput) and
#      $BENCH_DB_ceiling_agent for the agent scenario's, all migrated, each
#      with owner "bench" and a budget that cannot run out;
#   2. starts, in the background, the fake provider and `tollgate serve`
#      (logs in tools/bench/results/*.log) with MODEL_BASE_URL pointing at the
#      latency proxy that tollbench runs in front of the fake, and
#      TOLLGATE_WORKERS sized for the highest rate and latency;
#   3. runs tollbench with the scenarios of $BENCH_SCENARIOS:
#      throughput (the default) measures the ceiling, then every rate at
#      every model latency, and prints a table per latency; agent does the
#      same at $BENCH_AGENT_RATES with about 32 KiB requests (20 tools, a
#      30-message tool loop), against pgbench with rows of that size, and
#      adds CPU per KiB of request and WAL per task; inflight submits
#      $BENCH_INFLIGHT_TASKS tasks against a $BENCH_INFLIGHT_LATENCY model
#      and samples the server's RSS and goroutines until all finished;
#      duplicates creates $BENCH_DUP_KEYS tasks, then replays their POSTs
#      and polls them with GETs from closed-loop clients. It prints a
#      summary and writes tools/bench/results/latest.json;
#   4. stops what it started, however it exits.
#
# Safe to repeat: the databases are dropped and recreated each run. Two runs
# at once on one machine collide (same databases and ports).
#
# env (all optional):
#   BENCH_SCENARIOS        throughput,agent,inflight,duplicates or all (throughput)
#   BENCH_RATES            arrival rates per second        (20,50,100,200)
#   BENCH_DURATION         arrivals per step                (20s)
#   BENCH_LATENCIES        model latencies                  (0ms,1s)
#   BENCH_AGENT_RATES      agent: arrival rates per second (10,25,50,100)
#   BENCH_AGENT_LATENCY    agent: model latency             (0ms)
#   BENCH_PGBENCH_CLIENTS  pgbench client counts            (1,2,4,8,16)
#   BENCH_PGBENCH_DURATION pgbench run per client count     (10s)
#   BENCH_INFLIGHT_TASKS   inflight: tasks submitted        (10000)
#   BENCH_INFLIGHT_LATENCY inflight: model latency          (5s)
#   BENCH_INFLIGHT_CLIENTS inflight: concurrent submitters  (64)
#   BENCH_DUP_KEYS         duplicates: tasks replayed       (1000)
#   BENCH_DUP_CLIENTS      duplicates: client counts        (128)
#   BENCH_DUP_DURATION     duplicates: measured per run     (20s)
#   BENCH_WORKERS          TOLLGATE_WORKERS                 (sized by tollbench for the rates)
#   BENCH_POOL_MAX_CONNS   serve's pgx pool size            (serve's default, 20)
#   BENCH_PG               PostgreSQL root URL              (postgres://postgres@127.0.0.1:5432)
#   BENCH_DB               database name                    (tollgate_bench)
#   BENCH_ADDR             serve's address                  (127.0.0.1:18480)
#   BENCH_FAKE_ADDR        fake provider's address          (127.0.0.1:18490)
#   BENCH_PROXY_ADDR       latency proxy's address          (127.0.0.1:18491)
#   BENCH_HARNESS_NICE     nice value of the fake provider, and of tollbench
#                          during the throughput steps (after the ceiling);
#                          0 for none                       (10)
#   BENCH_SERVE_ENV        more environment for serve alone, e.g. "GOMAXPROCS=1 GOGC=200" (none)
#   BENCH_PPROF_ADDR       serve's TOLLGATE_PPROF_ADDR; each duplicates run then saves
#                          a server CPU profile in the results directory (off)
#   BENCH_RESULTS          report and logs directory        (tools/bench/results)
#   BENCH_BIN              where tollgate and tollbench are (bin; make bench builds them there)
#   BENCH_ARGS             more tollbench flags, e.g. "-settle 5s" or "-inflight-rate 500"
#
# e.g. the agent scenario alone, short:
#   make bench BENCH_SCENARIOS=agent BENCH_AGENT_RATES=10,25 BENCH_DURATION=10s
# e.g. scenarios 2 and 3 only, small:
#   make bench BENCH_SCENARIOS=inflight,duplicates BENCH_INFLIGHT_TASKS=1000 BENCH_DUP_DURATION=10s
#
# usage: scripts/bench.sh   (from the repository root; make bench does it)
set -euo pipefail

bin=${BENCH_BIN:-bin}
readonly tollgate=$bin/tollgate tollbench=$bin/tollbench
results=${BENCH_RESULTS:-tools/bench/results}
scenarios=${BENCH_SCENARIOS:-throughput}
rates=${BENCH_RATES:-20,50,100,200}
duration=${BENCH_DURATION:-20s}
latencies=${BENCH_LATENCIES:-0ms,1s}
agent_rates=${BENCH_AGENT_RATES:-10,25,50,100}
agent_latency=${BENCH_AGENT_LATENCY:-0ms}
pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
db=${BENCH_DB:-tollgate_bench}
ceiling_db=${db}_ceiling
agent_ceiling_db=${db}_ceiling_agent
addr=${BENCH_ADDR:-127.0.0.1:18480}
fake_addr=${BENCH_FAKE_ADDR:-127.0.0.1:18490}
proxy_addr=${BENCH_PROXY_ADDR:-127.0.0.1:18491}
pprof_addr=${BENCH_PPROF_ADDR:-}
harness_nice=${BENCH_HARNESS_NICE:-10}
owner=bench
budget_micros=1000000000000000 # 10^9 units: no run gets near it

say() { printf 'bench: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

[[ $harness_nice =~ ^[0-9]+$ ]] && ((harness_nice <= 19)) || die "BENCH_HARNESS_NICE must be 0 to 19, not $harness_nice"
for b in "$tollgate" "$tollbench"; do
	[[ -x $b ]] || die "$b is missing: run make bench (it builds both binaries)"
done
command -v psql >/dev/null || die "psql not found: it comes with PostgreSQL's client package"
command -v pgbench >/dev/null || say "pgbench not found: the ceiling will fail (it comes with the postgresql package)"

# port_free succeeds when nothing accepts connections on host:port.
port_free() { ! (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
for a in "$addr" "$fake_addr" "$proxy_addr" ${pprof_addr:+"$pprof_addr"}; do
	port_free "$a" || die "$a is in use: set BENCH_ADDR, BENCH_FAKE_ADDR, BENCH_PROXY_ADDR or BENCH_PPROF_ADDR to free ports"
done
pprof_args=()
if [[ -n $pprof_addr ]]; then
	pprof_args=(-pprof-url "http://$pprof_addr")
fi

url() { printf '%s/%s?sslmode=disable' "$pg" "$1"; }

# fresh_db drops and recreates a database, migrates it and gives the bench
# owner its budget.
fresh_db() {
	local name=$1
	PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 "$(url postgres)" \
		-c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" -c "CREATE DATABASE \"$name\""
	DATABASE_URL=$(url "$name") "$tollgate" migrate up >/dev/null
	DATABASE_URL=$(url "$name") "$tollgate" budget set --owner "$owner" --total-micros "$budget_micros" >/dev/null
}

# runs succeeds when BENCH_SCENARIOS names scenario $1 (or all).
runs() {
	case ",${scenarios// /}," in
	*,"$1",* | *,all,*) return 0 ;;
	esac
	return 1
}

# The throughput and agent scenarios compare with a pgbench ceiling each,
# on a database of its own; workers are sized for the highest rate run.
dbs=("$db") ceiling_args=() worker_rates=()
if runs throughput; then
	dbs+=("$ceiling_db") ceiling_args+=(-ceiling-db "$(url "$ceiling_db")") worker_rates+=("$rates")
fi
if runs agent; then
	dbs+=("$agent_ceiling_db") ceiling_args+=(-agent-ceiling-db "$(url "$agent_ceiling_db")") worker_rates+=("$agent_rates")
	latencies_for_workers=$latencies,$agent_latency
fi
((${#worker_rates[@]})) || worker_rates=("$rates")

mkdir -p "$results"
say "recreating databases ${dbs[*]}"
for d in "${dbs[@]}"; do
	fresh_db "$d"
done
key=$(DATABASE_URL=$(url "$db") "$tollgate" keys create --owner "$owner" --role client)

worker_rates_csv=$(IFS=,; echo "${worker_rates[*]}")
workers=${BENCH_WORKERS:-$("$tollbench" -print-workers -rates "$worker_rates_csv" -provider-latency "${latencies_for_workers:-$latencies}")}
serve_url=$(url "$db")
if [[ -n ${BENCH_POOL_MAX_CONNS:-} ]]; then
	serve_url+="&pool_max_conns=$BENCH_POOL_MAX_CONNS"
fi

pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

FAKE_ADDR=$fake_addr nice -n "$harness_nice" "$tollgate" fakeprovider 2>"$results/fakeprovider.log" &
pids+=($!)
say "fake provider on $fake_addr (pid $!)"

# The proxy is not up yet: tollbench starts it. serve only calls the model
# once tasks arrive, by which time it is.
# BENCH_SERVE_ENV is split on purpose: it holds NAME=value words.
# shellcheck disable=SC2086
DATABASE_URL=$serve_url TOLLGATE_ADDR=$addr TOLLGATE_MIGRATE=off \
	MODEL_BASE_URL="http://$proxy_addr/v1" TOLLGATE_WORKERS=$workers TOLLGATE_PPROF_ADDR=$pprof_addr \
	env ${BENCH_SERVE_ENV:-} "$tollgate" serve 2>"$results/serve.log" &
serve_pid=$!
pids+=("$serve_pid")
say "tollgate serve on $addr (pid $serve_pid, TOLLGATE_WORKERS=$workers, pool_max_conns=${BENCH_POOL_MAX_CONNS:-default}${BENCH_SERVE_ENV:+, $BENCH_SERVE_ENV}); logs in $results/"

# BENCH_ARGS is split on purpose: it holds extra flags.
# shellcheck disable=SC2086
TOLLBENCH_API_KEY=$key "$tollbench" \
	-scenarios "$scenarios" -workers "$workers" -nice "$harness_nice" \
	-url "http://$addr" -rates "$rates" -duration "$duration" -provider-latency "$latencies" \
	-agent-rates "$agent_rates" -agent-latency "$agent_latency" \
	-proxy-addr "$proxy_addr" -upstream "http://$fake_addr" -server-pid "$serve_pid" \
	-db "$(url "$db")" "${ceiling_args[@]}" "${pprof_args[@]}" -owner "$owner" \
	-inflight-tasks "${BENCH_INFLIGHT_TASKS:-10000}" -inflight-latency "${BENCH_INFLIGHT_LATENCY:-5s}" \
	-inflight-clients "${BENCH_INFLIGHT_CLIENTS:-64}" \
	-dup-keys "${BENCH_DUP_KEYS:-1000}" -dup-clients "${BENCH_DUP_CLIENTS:-128}" -dup-duration "${BENCH_DUP_DURATION:-20s}" \
	-pgbench-script scripts/pgbench-task.sql \
	-pgbench-clients "${BENCH_PGBENCH_CLIENTS:-1,2,4,8,16}" -pgbench-duration "${BENCH_PGBENCH_DURATION:-10s}" \
	-revision "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
	-out "$results/latest.json" ${BENCH_ARGS:-}

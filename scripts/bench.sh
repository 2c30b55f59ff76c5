#!/usr/bin/env bash
# bench.sh is `make bench`: Tollgate's performance harness (issue 9). Never
# part of `make test`.
#
# With the binaries built (bin/tollgate, bin/tollbench) and PostgreSQL up,
# it
#   1. recreates two scratch databases: $BENCH_DB for Tollgate and
#      $BENCH_DB_ceiling for the pgbench ceiling, both migrated, each with
#      owner "bench" and a budget that cannot run out;
#   2. starts, in the background, the fake provider and `tollgate serve`
#      (logs in bench/results/*.log) with MODEL_BASE_URL pointing at the
#      latency proxy that tollbench runs in front of the fake, and
#      TOLLGATE_WORKERS sized for the highest rate and latency;
#   3. runs tollbench, which measures the ceiling, then every rate at every
#      model latency, prints a table per latency and a summary, and writes
#      bench/results/latest.json;
#   4. stops what it started, however it exits.
#
# Safe to repeat: the databases are dropped and recreated each run. Two runs
# at once on one machine collide (same databases and ports).
#
# env (all optional):
#   BENCH_RATES            arrival rates per second        (20,50,100,200)
#   BENCH_DURATION         arrivals per step                (20s)
#   BENCH_LATENCIES        model latencies                  (0ms,1s)
#   BENCH_PGBENCH_CLIENTS  pgbench client counts            (1,2,4,8,16)
#   BENCH_PGBENCH_DURATION pgbench run per client count     (10s)
#   BENCH_WORKERS          TOLLGATE_WORKERS                 (sized by tollbench)
#   BENCH_POOL_MAX_CONNS   serve's pgx pool size            (pgx's default: max(4, CPUs))
#   BENCH_PG               PostgreSQL root URL              (postgres://postgres@127.0.0.1:5432)
#   BENCH_DB               database name                    (tollgate_bench)
#   BENCH_ADDR             serve's address                  (127.0.0.1:18480)
#   BENCH_FAKE_ADDR        fake provider's address          (127.0.0.1:18490)
#   BENCH_PROXY_ADDR       latency proxy's address          (127.0.0.1:18491)
#   BENCH_ARGS             more tollbench flags, e.g. "-settle 5s"
#
# usage: scripts/bench.sh   (from the repository root; make bench does it)
set -euo pipefail

readonly tollgate=bin/tollgate tollbench=bin/tollbench
readonly results=bench/results
rates=${BENCH_RATES:-20,50,100,200}
duration=${BENCH_DURATION:-20s}
latencies=${BENCH_LATENCIES:-0ms,1s}
pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
db=${BENCH_DB:-tollgate_bench}
ceiling_db=${db}_ceiling
addr=${BENCH_ADDR:-127.0.0.1:18480}
fake_addr=${BENCH_FAKE_ADDR:-127.0.0.1:18490}
proxy_addr=${BENCH_PROXY_ADDR:-127.0.0.1:18491}
owner=bench
budget_micros=1000000000000000 # 10^9 units: no run gets near it

say() { printf 'bench: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

for b in "$tollgate" "$tollbench"; do
	[[ -x $b ]] || die "$b is missing: run make bench (it builds both binaries)"
done
command -v psql >/dev/null || die "psql not found: it comes with PostgreSQL's client package"
command -v pgbench >/dev/null || say "pgbench not found: the ceiling will fail (it comes with the postgresql package)"

# port_free succeeds when nothing accepts connections on host:port.
port_free() { ! (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
for a in "$addr" "$fake_addr" "$proxy_addr"; do
	port_free "$a" || die "$a is in use: set BENCH_ADDR, BENCH_FAKE_ADDR or BENCH_PROXY_ADDR to free ports"
done

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

mkdir -p "$results"
say "recreating databases $db and $ceiling_db"
fresh_db "$db"
fresh_db "$ceiling_db"
key=$(DATABASE_URL=$(url "$db") "$tollgate" keys create --owner "$owner" --role client)

workers=${BENCH_WORKERS:-$("$tollbench" -print-workers -rates "$rates" -provider-latency "$latencies")}
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

FAKE_ADDR=$fake_addr "$tollgate" fakeprovider 2>"$results/fakeprovider.log" &
pids+=($!)
say "fake provider on $fake_addr (pid $!)"

# The proxy is not up yet: tollbench starts it. serve only calls the model
# once tasks arrive, by which time it is.
DATABASE_URL=$serve_url TOLLGATE_ADDR=$addr TOLLGATE_MIGRATE=off \
	MODEL_BASE_URL="http://$proxy_addr/v1" TOLLGATE_WORKERS=$workers \
	"$tollgate" serve 2>"$results/serve.log" &
serve_pid=$!
pids+=("$serve_pid")
say "tollgate serve on $addr (pid $serve_pid, TOLLGATE_WORKERS=$workers, pool_max_conns=${BENCH_POOL_MAX_CONNS:-default}); logs in $results/"

# BENCH_ARGS is split on purpose: it holds extra flags.
# shellcheck disable=SC2086
TOLLBENCH_API_KEY=$key "$tollbench" \
	-url "http://$addr" -rates "$rates" -duration "$duration" -provider-latency "$latencies" \
	-proxy-addr "$proxy_addr" -upstream "http://$fake_addr" -server-pid "$serve_pid" \
	-db "$(url "$db")" -ceiling-db "$(url "$ceiling_db")" -owner "$owner" \
	-pgbench-script scripts/pgbench-task.sql \
	-pgbench-clients "${BENCH_PGBENCH_CLIENTS:-1,2,4,8,16}" -pgbench-duration "${BENCH_PGBENCH_DURATION:-10s}" \
	-revision "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
	-out "$results/latest.json" ${BENCH_ARGS:-}

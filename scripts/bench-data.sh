#!/usr/bin/env bash
# bench-data.sh measures Tollgate's reads over a large history: scenarios
# (4) and (5), tools/bench/bigdata (replay lookup and support search over
# 1,000,000 records; usage report and CSV export over 10,000,000 ledger
# rows). Never part of `make test`.
#
# With PostgreSQL up and bin/tollgate built, it
#   1. recreates the scratch database $BENCH_DATA_DB, migrates it and seeds
#      it with set-based SQL (tollbench-data -seed);
#   2. creates a support, a finance and a client key with `tollgate keys
#      create`;
#   3. starts `tollgate serve` on $BENCH_DATA_ADDR in the background (logs
#      in tools/bench/results/data-serve.log; the in-process fake provider, which
#      none of these reads calls);
#   4. measures (tollbench-data -measure): lookups and searches with
#      concurrent clients, usage reports, CSV exports while sampling the
#      server's VmRSS; prints the tables and writes $BENCH_DATA_OUT;
#   5. stops the server and drops the database, however it exits.
#
# Seeding the full sizes takes about ten minutes on a 2-core machine and
# needs about 6 GB of disk. A small run:
#   BENCH_DATA_TASKS=50000 BENCH_DATA_LEDGER=500000 scripts/bench-data.sh
#
# env (all optional):
#   BENCH_DATA_TASKS        tasks with replay records         (1000000)
#   BENCH_DATA_LEDGER       budget ledger rows, about         (10000000)
#   BENCH_DATA_OWNERS       owners                            (40)
#   BENCH_DATA_DAYS         days the history spans            (90)
#   BENCH_DATA_CONCURRENCY  concurrent clients                (8)
#   BENCH_DATA_LOOKUPS      lookups per lookup scenario       (20000)
#   BENCH_DATA_SEARCHES     requests per search scenario      (300)
#   BENCH_DATA_USAGE_RUNS   runs of each usage report         (3)
#   BENCH_DATA_REUSE        1: measure the database a KEEP run left, no seed
#   BENCH_DATA_KEEP         1: keep the database at the end (for REUSE)
#   BENCH_DATA_OUT          report                            (tools/bench/results/data.json)
#   BENCH_PG                PostgreSQL root URL               (postgres://postgres@127.0.0.1:5432)
#   BENCH_DATA_DB           database name                     (tollgate_bigdata)
#   BENCH_DATA_ADDR         serve's address                   (127.0.0.1:18680)
#   TOLLGATE_BIN            the server binary                 (bin/tollgate)
#   TOLLBENCH_DATA_BIN      the measuring binary              (bin/tollbench-data, built if missing)
#   BENCH_DATA_ARGS         more tollbench-data flags for the measurement
#
# usage: scripts/bench-data.sh   (from the repository root)
set -euo pipefail

tollgate=${TOLLGATE_BIN:-bin/tollgate}
tollbench=${TOLLBENCH_DATA_BIN:-bin/tollbench-data}
readonly results=tools/bench/results
out=${BENCH_DATA_OUT:-$results/data.json}
pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
db=${BENCH_DATA_DB:-tollgate_bigdata}
addr=${BENCH_DATA_ADDR:-127.0.0.1:18680}
reuse=${BENCH_DATA_REUSE:-0}
keep=${BENCH_DATA_KEEP:-0}

say() { printf 'bench-data: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

[[ -x $tollgate ]] || die "$tollgate is missing: run make build (or set TOLLGATE_BIN)"
if [[ ! -x $tollbench ]]; then
	say "building $tollbench"
	go build -o "$tollbench" ./tools/bench/cmd/tollbench-data
fi
command -v psql >/dev/null || die "psql not found: it comes with PostgreSQL's client package"

port_free() { ! (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
port_free "$addr" || die "$addr is in use: set BENCH_DATA_ADDR to a free address"

url() { printf '%s/%s?sslmode=disable' "$pg" "$1"; }
db_url=$(url "$db")
admin() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 "$(url postgres)" "$@"; }

serve_pid=
cleanup() {
	if [[ -n $serve_pid ]]; then
		kill "$serve_pid" 2>/dev/null || true
		wait "$serve_pid" 2>/dev/null || true
	fi
	if [[ $keep != 1 ]]; then
		admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true
		say "dropped $db"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$results"
seed_report=$results/data-seed.json
if [[ $reuse == 1 ]]; then
	[[ -f $seed_report ]] || die "BENCH_DATA_REUSE=1 needs $seed_report from an earlier BENCH_DATA_KEEP=1 run"
	say "reusing $db as seeded (see $seed_report)"
else
	say "recreating $db"
	admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\""
	DATABASE_URL=$db_url "$tollgate" migrate up >/dev/null
	"$tollbench" -seed -db "$db_url" -tasks "${BENCH_DATA_TASKS:-1000000}" -ledger "${BENCH_DATA_LEDGER:-10000000}" \
		-owners "${BENCH_DATA_OWNERS:-40}" -days "${BENCH_DATA_DAYS:-90}" -out "$seed_report"
fi

key() { DATABASE_URL=$db_url "$tollgate" keys create "$@"; }
support_key=$(key --owner bigdata-support --role support)
finance_key=$(key --owner bigdata-finance --role finance)
client_key=$(key --owner org-000 --role client)

DATABASE_URL=$db_url TOLLGATE_ADDR=$addr TOLLGATE_MIGRATE=off \
	"$tollgate" serve 2>"$results/data-serve.log" &
serve_pid=$!
say "tollgate serve on $addr (pid $serve_pid); log in $results/data-serve.log"
for _ in $(seq 100); do
	if curl -fsS "http://$addr/readyz" >/dev/null 2>&1; then
		break
	fi
	kill -0 "$serve_pid" 2>/dev/null || die "serve exited; see $results/data-serve.log"
	sleep 0.2
done
curl -fsS "http://$addr/readyz" >/dev/null || die "serve is not ready after 20 s; see $results/data-serve.log"

# BENCH_DATA_ARGS is split on purpose: it holds extra flags.
# shellcheck disable=SC2086
TOLLBENCH_SUPPORT_KEY=$support_key TOLLBENCH_FINANCE_KEY=$finance_key TOLLBENCH_CLIENT_KEY=$client_key \
	"$tollbench" -measure -db "$db_url" -url "http://$addr" -server-pid "$serve_pid" \
	-concurrency "${BENCH_DATA_CONCURRENCY:-8}" -lookups "${BENCH_DATA_LOOKUPS:-20000}" \
	-searches "${BENCH_DATA_SEARCHES:-300}" -usage-runs "${BENCH_DATA_USAGE_RUNS:-3}" \
	-seed-report "$seed_report" \
	-revision "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
	-out "$out" ${BENCH_DATA_ARGS:-}

#!/usr/bin/env bash
# run.sh is the optional side by side with a peer gateway: the latency of
# one chat completion against the fake model called directly, through the
# Portkey gateway, and through Tollgate's synchronous
# POST /v1/chat/completions, at concurrency 1 and at a fixed open-loop rate.
#
# Portkey is a stateless proxy: it forwards the call and stores nothing.
# Tollgate commits durable state per task (task, reservation, job,
# settlement, replay record) before it answers. The figures say what that
# costs; they do not compare the same work.
#
# With Go, PostgreSQL and npm, it
#   1. installs the pinned @portkey-ai/gateway (package-lock.json) into
#      tools/bench/peer/node_modules, unless that version is already there;
#      it exits 0 with "skipped: npm not available" when npm is missing or the
#      install fails;
#   2. builds tollgate from the last commit (git archive HEAD: the shared
#      checkout may hold others' unfinished edits) and the load client
#      (tools/bench/peer: the standard library and tools/bench/stats) into
#      a temporary folder, so that the shared bin/ is left alone;
#      PEER_TOLLGATE_BIN skips the first;
#   3. recreates the scratch database $PEER_DB, migrated, with owner "peer",
#      a budget that cannot run out and a client key;
#   4. starts the fake provider, Portkey (--headless) and `tollgate serve`
#      with MODEL_BASE_URL at the fake (logs in tools/bench/peer/logs/);
#   5. runs the load client, which warms every target up, measures each in
#      turn, prints the tables and writes tools/bench/results/peer.json;
#   6. stops what it started, however it exits.
#
# env (all optional):
#   PEER_SEQUENTIAL    requests per target at concurrency 1   (2000)
#   PEER_RATE          open-loop arrivals per second           (100)
#   PEER_DURATION      open-loop arrivals last                 (20s)
#   PEER_WARMUP        unmeasured requests per target          (200)
#   PEER_PG            PostgreSQL root URL                     (postgres://postgres@127.0.0.1:5432)
#   PEER_DB            scratch database, dropped and recreated (tollgate_peer)
#   PEER_FAKE_ADDR     fake provider's address                 (127.0.0.1:18781)
#   PEER_PORTKEY_PORT  Portkey's port; it listens on every interface (18782)
#   PEER_ADDR          tollgate serve's address                (127.0.0.1:18783)
#   PEER_OUT           the JSON report                         (tools/bench/results/peer.json)
#   PEER_TOLLGATE_BIN  a tollgate binary to measure            (built from HEAD)
#
# usage: tools/bench/peer/run.sh   (from anywhere; it works from the repository root)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."

readonly here=tools/bench/peer
readonly logs=$here/logs
readonly gateway=$here/node_modules/@portkey-ai/gateway
pg=${PEER_PG:-postgres://postgres@127.0.0.1:5432}
db=${PEER_DB:-tollgate_peer}
fake_addr=${PEER_FAKE_ADDR:-127.0.0.1:18781}
portkey_port=${PEER_PORTKEY_PORT:-18782}
addr=${PEER_ADDR:-127.0.0.1:18783}
out=${PEER_OUT:-tools/bench/results/peer.json}
owner=peer
budget_micros=1000000000000000 # 10^9 units: no run gets near it

say() { printf 'peer: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}
skip() {
	printf 'skipped: %s\n' "$*"
	exit 0
}

# 1. The peer. Its only install script is patch-package, which applies the
# package's own patches/ folder; that folder is not published, so scripts
# are skipped.
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	skip "npm not available (npm and node are needed to run the Portkey gateway)"
fi
pinned=$(node -p 'require("./tools/bench/peer/package.json").dependencies["@portkey-ai/gateway"]')
installed() { node -p "try { require('./$gateway/package.json').version } catch { '' }"; }
if [[ $(installed) != "$pinned" ]]; then
	say "installing @portkey-ai/gateway@$pinned into $here/node_modules"
	if ! (cd "$here" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) >&2 || [[ $(installed) != "$pinned" ]]; then
		skip "npm not available (installing @portkey-ai/gateway@$pinned failed; see above)"
	fi
fi

command -v go >/dev/null || die "go not found"
command -v psql >/dev/null || die "psql not found: it comes with PostgreSQL's client package"
command -v curl >/dev/null || die "curl not found: it waits for the servers to be ready"

# port_free succeeds when nothing accepts connections on host:port.
port_free() { ! (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
for a in "$fake_addr" "127.0.0.1:$portkey_port" "$addr"; do
	port_free "$a" || die "$a is in use: set PEER_FAKE_ADDR, PEER_PORTKEY_PORT or PEER_ADDR to free ports"
done

pids=()
work=$(mktemp -d)
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 2. Binaries of our own: others build bin/ and edit the tree on this
# machine.
if [[ -n ${PEER_TOLLGATE_BIN:-} ]]; then
	tollgate=$PEER_TOLLGATE_BIN
	revision="given: $tollgate"
else
	revision=$(git rev-parse --short HEAD)
	say "building tollgate $revision (HEAD) into $work"
	mkdir "$work/src"
	git archive HEAD | tar -x -C "$work/src"
	(cd "$work/src" && go build -o "$work/tollgate" ./cmd/tollgate)
	tollgate=$work/tollgate
fi
go build -o "$work/peer" ./tools/bench/peer

# 3. The scratch database.
url() { printf '%s/%s?sslmode=disable' "$pg" "$1"; }
say "recreating database $db"
PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 "$(url postgres)" \
	-c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\""
DATABASE_URL=$(url "$db") "$tollgate" migrate up >/dev/null
DATABASE_URL=$(url "$db") "$tollgate" budget set --owner "$owner" --total-micros "$budget_micros" >/dev/null
key=$(DATABASE_URL=$(url "$db") "$tollgate" keys create --owner "$owner" --role client)

# 4. The servers.
mkdir -p "$logs"
FAKE_ADDR=$fake_addr "$tollgate" fakeprovider 2>"$logs/fakeprovider.log" &
pids+=($!)
say "fake provider on $fake_addr (pid $!)"

# node itself, not npx, so that the trap stops the server and not a wrapper.
node "$gateway/build/start-server.js" --headless --port="$portkey_port" >"$logs/portkey.log" 2>&1 &
pids+=($!)
say "Portkey $pinned on port $portkey_port (pid $!)"

DATABASE_URL=$(url "$db") TOLLGATE_ADDR=$addr TOLLGATE_MIGRATE=off MODEL_BASE_URL="http://$fake_addr/v1" \
	"$tollgate" serve 2>"$logs/serve.log" &
pids+=($!)
say "tollgate serve on $addr (pid $!); logs in $logs/"

# wait_for polls url until it answers (any HTTP status), for up to 30s.
wait_for() {
	local name=$1 url=$2 i
	for ((i = 0; i < 300; i++)); do
		if curl -s -o /dev/null "$url"; then
			return 0
		fi
		sleep 0.1
	done
	die "$name did not come up at $url: see $logs/"
}
wait_for "the fake provider" "http://$fake_addr/_fake/calls"
wait_for "Portkey" "http://127.0.0.1:$portkey_port/"
wait_for "tollgate serve" "http://$addr/readyz"

# 5. The measurement.
versions="portkey=@portkey-ai/gateway $pinned"
versions+=",node=$(node --version)"
versions+=",go=$(go env GOVERSION)"
versions+=",tollgate=$revision"
versions+=",postgres=$(psql -X -At "$(url "$db")" -c 'show server_version' 2>/dev/null || echo unknown)"
PEER_TOLLGATE_KEY=$key "$work/peer" \
	-fake "http://$fake_addr" -portkey "http://127.0.0.1:$portkey_port" -tollgate "http://$addr" \
	-sequential "${PEER_SEQUENTIAL:-2000}" -rate "${PEER_RATE:-100}" -duration "${PEER_DURATION:-20s}" \
	-warmup "${PEER_WARMUP:-200}" -out "$out" -versions "$versions"

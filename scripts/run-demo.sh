#!/usr/bin/env bash
# run-demo.sh is `make run`: with PostgreSQL up and the binary built, it
# gives the demo owner a new client key and a budget, prints a curl command
# that uses the key, and replaces itself with `tollgate serve`.
#
# Safe to repeat: each run adds one key (older ones keep working) and sets,
# rather than adds to, the owner's budget total. The tollgate subcommands
# create and migrate the database on first use.
#
# usage: scripts/run-demo.sh BINARY
# env:   DEMO_OWNER (default demo), DEMO_BUDGET_MICROS (default 5000000),
#        TOLLGATE_FAKE_ADDR (default here 127.0.0.1:8089: the in-process
#        fake provider's address, fixed so that the walkthrough can script it),
#        and everything `tollgate serve` reads (DATABASE_URL, TOLLGATE_ADDR, ...);
#        TOLLGATE_DRAIN_DELAY_S (default here 0: no balancer to tell);
#        prices and capabilities come from the list built into tollgate
#        unless TOLLGATE_PRICES_FILE names another file (or none)
set -euo pipefail

bin=${1:?usage: scripts/run-demo.sh BINARY}
owner=${DEMO_OWNER:-demo}
micros=${DEMO_BUDGET_MICROS:-5000000}
addr=${TOLLGATE_ADDR:-127.0.0.1:8080}

# The address must be free before anything is written: a second `make run`
# beside a first one would otherwise add a key, reset the budget and print
# the banner, then fail to listen. Something that accepts a connection
# there holds it.
host=${addr%:*} port=${addr##*:}
case $host in "" | 0.0.0.0 | "[::]" | "*") host=127.0.0.1 ;; esac
host=${host#[} host=${host%]}
if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
	echo "run-demo: $addr (TOLLGATE_ADDR) is already in use; stop what listens there or set TOLLGATE_ADDR to a free address." >&2
	if command -v ss >/dev/null 2>&1; then
		ss -ltnp "sport = :$port" >&2 || true
	elif command -v lsof >/dev/null 2>&1; then
		lsof -nP -iTCP:"$port" -sTCP:LISTEN >&2 || true
	fi
	exit 1
fi

export TOLLGATE_FAKE_ADDR=${TOLLGATE_FAKE_ADDR:-127.0.0.1:8089}
# No load balancer watches a demo's /readyz: Ctrl-C closes the listener at
# once.
export TOLLGATE_DRAIN_DELAY_S=${TOLLGATE_DRAIN_DELAY_S:-0}
fake=""
if [[ -z ${TOLLGATE_CONFIG:-} && -z ${MODEL_BASE_URL:-} ]]; then
	fake="
The model provider is the in-process fake (every output is fake); script its
failures at http://$TOLLGATE_FAKE_ADDR/_fake/script (docs/development.md#the-fake-provider).
"
fi

key=$("$bin" keys create --owner "$owner" --role client)
"$bin" budget set --owner "$owner" --total-micros "$micros" >/dev/null

cat <<EOF

Owner "$owner" has a budget of $micros micros ($((micros / 1000000)) units) and a new client key:

    $key

For the walkthrough (docs/walkthrough.md), in another terminal:

export TOLLGATE_KEY=$key
export TG=http://$addr
export FAKE=http://$TOLLGATE_FAKE_ADDR
$fake
Once the server below is listening, run a task:

curl -sS -i http://$addr/v1/tasks \\
  -H 'Authorization: Bearer $key' \\
  -H 'Content-Type: application/json' \\
  -H "Idempotency-Key: demo-\$(date +%s)" \\
  -H 'Prefer: wait=5' \\
  -d '{"messages":[{"role":"user","content":"Say hello"}]}'

Model prices and capabilities come from ${TOLLGATE_PRICES_FILE:-the list built into tollgate (TOLLGATE_PRICES_FILE names another, or none)}.

Starting tollgate serve on $addr; Ctrl-C stops it.

EOF
exec "$bin" serve

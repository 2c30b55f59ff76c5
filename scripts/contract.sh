#!/usr/bin/env bash
# contract.sh is `make test-contract`: it checks openapi.yaml against the
# live answers of a real `tollgate serve`, with a third-party validator,
# Prism (@stoplight/prism-cli), in proxy mode between curl and the server.
#
# It creates a database of its own, starts `tollgate serve` on it with the
# in-process fake provider, starts `prism proxy openapi.yaml <serve>` and
# drives the documented flows through Prism: tasks (created, read, listed,
# repeated, failed, canceled, replayed, erased), budgets, keys, limits,
# usage, webhooks, the OpenAI, Anthropic and Responses surfaces, and the
# error answers (400, 401, 402, 403, 404, 409, 410, 415, 422). Prism
# validates every request and response against openapi.yaml and lists what
# does not match in the `sl-violations` header of its answer.
#
# Any violation in a response fails the run, as does a status other than
# the one the step expects. A violation in a request fails it too, except in
# the steps that send an invalid request on purpose (bad_step), whose point
# is the server's answer to it. Prism runs without --errors: with it, Prism
# answers an invalid request itself instead of passing it on, so the
# server's own 400s and 401s would go unchecked.
#
# First, scripts/prism-schemas.js compiles every schema as Prism does:
# Prism skips, silently, a schema Ajv refuses, and what it describes would
# pass unchecked.
#
# Everything it starts is stopped, and its database dropped, on exit.
#
# usage: scripts/contract.sh BINARY
# env:   CONTRACT_PG (default: the server of TOLLGATE_TEST_DATABASE_URL, or
#        postgres://postgres@127.0.0.1:5432), PRISM_CLI (default
#        @stoplight/prism-cli@5.16.0, run with npx), CONTRACT_KEEP=1 keeps
#        the database too (the work directory, with the logs and every
#        answer, is kept whenever the run fails).
set -euo pipefail

bin=${1:?usage: scripts/contract.sh BINARY}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prism_cli=${PRISM_CLI:-@stoplight/prism-cli@5.16.0}
test_url=${TOLLGATE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
pg=${CONTRACT_PG:-${test_url%/*}}
db=tollgate_contract_$$
started=$SECONDS

say() { printf 'contract: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

[[ -x $bin ]] || die "$bin is missing: run make test-contract (it builds it)"
for tool in curl jq psql npx; do
	command -v "$tool" >/dev/null || die "$tool not found"
done

# free_port prints a loopback port nothing accepts connections on, below
# Linux's ephemeral range (32768 up), where outgoing connections would take
# it. tollgate serve and its fake provider pick theirs themselves (port 0).
free_port() {
	local p
	for _ in {1..50}; do
		p=$((10000 + RANDOM % 22000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	die "no free port found"
}
prism_port=$(free_port)

(cd "$root" && npx --yes -p "$prism_cli" node scripts/prism-schemas.js openapi.yaml) ||
	die "Prism cannot check openapi.yaml as it stands (above)"

work=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-contract.XXXXXX")
psql_admin() {
	PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 "$pg/postgres?sslmode=disable" "$@"
}
pids=()
cleanup() {
	local status=$? pid
	for pid in "${pids[@]}"; do
		# Each was started in a process group of its own (setsid): npx's
		# children go with it.
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [[ ${CONTRACT_KEEP:-} == 1 ]]; then
		say "kept $work and database $db"
		return
	fi
	psql_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true
	if ((status == 0)); then
		rm -rf "$work"
	else
		say "logs and answers kept in $work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

psql_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\""

# tollgate runs with the defaults and nothing else from this environment
# (a TOLLGATE_METRICS_TOKEN or MODEL_BASE_URL set here would change the
# answers): the zero-config catalog on the in-process fake, ports of its
# own choosing.
tollgate=(env -i PATH="$PATH" HOME="${HOME:-/}" DATABASE_URL="$pg/$db?sslmode=disable"
	TOLLGATE_ADDR=127.0.0.1:0 TOLLGATE_FAKE_ADDR=127.0.0.1:0 TOLLGATE_DRAIN_DELAY_S=0 "$bin")

# Owners: acme (a budget, a client key), broke (a key, no budget), ops (an
# admin key).
client=$("${tollgate[@]}" keys create --owner acme --role client)
broke=$("${tollgate[@]}" keys create --owner broke --role client)
admin=$("${tollgate[@]}" keys create --owner ops --role admin)
"${tollgate[@]}" budget set --owner acme --total-micros 5000000 >/dev/null

# alive NAME LOG: dies, with LOG's end, if a process started here exited.
alive() {
	local pid
	for pid in "${pids[@]}"; do
		kill -0 "$pid" 2>/dev/null && continue
		tail -n 30 "$2" >&2
		die "$1 exited"
	done
}

# log_value MSG FIELD: FIELD of serve's log line MSG, once it is written.
log_value() {
	local v
	for _ in {1..300}; do
		v=$(jq -r --arg m "$1" "select(.msg == \$m) | .$2" "$work/serve.log" 2>/dev/null | head -n 1)
		if [[ -n $v ]]; then
			echo "$v"
			return
		fi
		alive "tollgate serve" "$work/serve.log"
		sleep 0.2
	done
	die "tollgate serve did not log $1"
}

setsid "${tollgate[@]}" serve >"$work/serve.log" 2>&1 &
pids+=($!)
fake_addr=$(log_value "a provider points at the in-process fake provider (MODEL_BASE_URL unset or base_url: fake): ALL ITS MODEL OUTPUTS ARE FAKE" fake_provider_addr)
serve_addr=$(log_value "tollgate listening" addr)
(cd "$root" && exec setsid npx --yes "$prism_cli" proxy openapi.yaml \
	"http://$serve_addr" --host 127.0.0.1 --port "$prism_port") >"$work/prism.log" 2>&1 &
pids+=($!)

# wait_for URL NAME LOG: polls until URL answers 200 (up to 120 s: npx may
# first fetch Prism from npm).
wait_for() {
	for _ in {1..600}; do
		if curl -fsS -o /dev/null "$1" 2>/dev/null; then
			return
		fi
		alive "$2" "$3"
		sleep 0.2
	done
	tail -n 30 "$3" >&2
	die "$2 did not answer $1"
}
wait_for "http://$serve_addr/readyz" "tollgate serve" "$work/serve.log"
wait_for "http://127.0.0.1:$prism_port/healthz" "prism" "$work/prism.log"
say "tollgate serve on $serve_addr, prism on 127.0.0.1:$prism_port, database $db"

P=http://127.0.0.1:$prism_port
FAKE=http://$fake_addr
steps=0 failures=0

# run_step MODE NAME WANT CURL_ARGS...: one request through Prism. It
# fails (counted, the run goes on) unless the status is WANT and Prism
# reports no violation; MODE bad lets request violations pass. The body is
# left in $work/body for the step's own checks.
run_step() {
	local mode=$1 name=$2 want=$3
	shift 3
	steps=$((steps + 1))
	local status violations filter=.
	status=$(curl -sS --max-time 30 -o "$work/body" -D "$work/headers" -w '%{http_code}' "$@") || status=curl-failed
	cp "$work/body" "$work/$steps.body"
	violations=$(tr -d '\r' <"$work/headers" | sed -n 's/^sl-violations: //Ip')
	[[ $mode == bad ]] && filter='map(select(.location[0] != "request"))'
	if [[ -n $violations ]]; then
		violations=$(jq -c "$filter | .[]" <<<"$violations")
	fi
	if [[ $status != "$want" || -n $violations ]]; then
		failures=$((failures + 1))
		say "FAIL $name: status $status (want $want)"
		[[ -z $violations ]] || sed 's/^/    /' <<<"$violations" >&2
		head -c 600 "$work/body" | sed 's/^/    body: /' >&2
		echo >&2
		return 0
	fi
	say "ok   $name ($status)"
}
step() { run_step good "$@"; }
bad_step() { run_step bad "$@"; }

# check NAME JQ: fails the run unless the last body satisfies JQ.
check() {
	if ! jq -e "$2" "$work/body" >/dev/null 2>&1; then
		failures=$((failures + 1))
		say "FAIL $1: the body does not satisfy $2"
	fi
}
field() { jq -r "$1" "$work/body"; }

# fake_script JSON: queues the fake provider's next answers (straight to
# it: its control API is no part of the contract).
fake_script() {
	curl -fsS --max-time 10 -o /dev/null "$FAKE/_fake/script" -H 'Content-Type: application/json' -d "$1" ||
		die "the fake provider refused a script"
}

auth=(-H "Authorization: Bearer $client")
adm=(-H "Authorization: Bearer $admin")
json=(-H 'Content-Type: application/json')
hello='{"messages":[{"role":"user","content":"Say hello"}],"metadata":{"ticket":"T-1"}}'
run=$$-$RANDOM

# Tasks.
step "create a task" 200 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: hello-$run" \
	-H 'Prefer: wait=10' -d "$hello"
check "a succeeded task" '.status == "succeeded" and .error == null and .result != null'
task=$(field .id)
step "repeat it with the same key" 200 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: hello-$run" -d "$hello"
check "the same task" ".id == \"$task\""
step "reuse the key with another body" 422 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: hello-$run" \
	-d '{"messages":[{"role":"user","content":"Something else"}]}'
step "get the task" 200 "$P/v1/tasks/$task" "${auth[@]}"
step "get it with Prefer: wait" 200 "$P/v1/tasks/$task" "${auth[@]}" -H 'Prefer: wait=1'
step "list tasks" 200 "$P/v1/tasks?limit=5" "${auth[@]}"
step "list tasks, filtered" 200 "$P/v1/tasks?status=succeeded&model=gpt-4o-mini&limit=1" "${auth[@]}"
step "the replay record" 200 "$P/v1/tasks/$task/replay" "${auth[@]}"
step "search replay records" 200 "$P/v1/replays?limit=5" "${auth[@]}"
step "the replay record, read by an admin" 200 "$P/v1/tasks/$task/replay" "${adm[@]}" -H 'X-Reason: contract check'
step "the audit log" 200 "$P/v1/audit?task_id=$task" "${adm[@]}"
step "cancel a finished task" 409 -X POST "$P/v1/tasks/$task/cancel" "${auth[@]}"
step "rerun, disabled" 403 -X POST "$P/v1/tasks/$task/rerun" "${auth[@]}" -H "Idempotency-Key: rerun-$run"

# A task the provider refuses: it fails, with its error set.
fake_script '{"responses":[{"status":400,"body":"{\"error\":{\"message\":\"bad request\",\"type\":\"invalid_request_error\"}}"}]}'
step "a failing task" 200 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: fail-$run" -H 'Prefer: wait=10' \
	-d '{"messages":[{"role":"user","content":"Refuse this"}]}'
check "a failed task with its error" '.status == "failed" and .error.code == "model_incompatible" and .result == null'
failed=$(field .id)
step "get the failed task" 200 "$P/v1/tasks/$failed" "${auth[@]}"
step "list failed tasks" 200 "$P/v1/tasks?status=failed" "${auth[@]}"
step "the failed task's replay record" 200 "$P/v1/tasks/$failed/replay" "${auth[@]}"

# A task still running when the answer is sent (202), canceled.
fake_script '{"responses":[{"delay_ms":3000}]}'
step "a task answered before it finishes" 202 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: slow-$run" \
	-d '{"messages":[{"role":"user","content":"Take your time"}]}'
slow=$(field .id)
step "repeat it while it runs" 202 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: slow-$run" \
	-d '{"messages":[{"role":"user","content":"Take your time"}]}'
step "erase an unfinished task" 409 -X DELETE "$P/v1/tasks/$slow/replay" "${auth[@]}"
step "cancel it" 202 -X POST "$P/v1/tasks/$slow/cancel" "${auth[@]}"
step "wait for it" 200 "$P/v1/tasks/$slow" "${auth[@]}" -H 'Prefer: wait=10'
check "a canceled task" '.status == "canceled"'

# Erasure.
step "erase the task's bodies" 200 -X DELETE "$P/v1/tasks/$task/replay" "${auth[@]}"
step "the erased replay record" 410 "$P/v1/tasks/$task/replay" "${auth[@]}"

# Error answers. (Not malformed JSON: Prism 5.16 never answers a request
# whose JSON body does not parse.)
bad_step "no key" 401 "$P/v1/tasks" "${json[@]}" -H "Idempotency-Key: nokey-$run" -d "$hello"
bad_step "an unknown key" 401 "$P/v1/tasks/$task" -H 'Authorization: Bearer tg_unknown'
bad_step "no messages" 400 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: empty-$run" -d '{"messages":[]}'
check "invalid_request" '.code == "invalid_request"'
bad_step "an unknown field" 400 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: unknown-$run" \
	-d '{"messages":[{"role":"user","content":"hi"}],"colour":"red"}'
step "no Idempotency-Key" 400 "$P/v1/tasks" "${auth[@]}" "${json[@]}" -d "$hello"
check "idempotency_key_missing" '.code == "idempotency_key_missing"'
bad_step "a form body" 415 "$P/v1/tasks" "${auth[@]}" -H "Idempotency-Key: form-$run" -d "$hello"
step "an unknown task" 404 "$P/v1/tasks/00000000-0000-4000-8000-000000000000" "${auth[@]}"
bad_step "a task id that is not a UUID" 404 "$P/v1/tasks/not-a-uuid" "${auth[@]}"
bad_step "a bad list limit" 400 "$P/v1/tasks?limit=0" "${auth[@]}"
step "no budget" 402 "$P/v1/tasks" -H "Authorization: Bearer $broke" "${json[@]}" -H "Idempotency-Key: broke-$run" -d "$hello"
check "budget_exceeded" '.code == "budget_exceeded"'
step "a client key on an admin route" 403 "$P/v1/keys" "${auth[@]}"

# Budgets.
step "the owner's budget" 200 "$P/v1/budgets/acme" "${auth[@]}"
step "a budget below what is spent" 409 -X PUT "$P/v1/budgets/acme" "${adm[@]}" "${json[@]}" -d '{"total_micros":1,"period":"none"}'
step "set a budget" 200 -X PUT "$P/v1/budgets/acme" "${adm[@]}" "${json[@]}" \
	-d '{"total_micros":6000000,"period":"monthly","workloads":{"batch":{"total_micros":1000000,"period":"daily"}}}'
step "a top-up" 201 "$P/v1/budgets/acme/topups" "${adm[@]}" "${json[@]}" -d '{"amount_micros":1000,"note":"contract"}'
step "an owner without a budget" 404 "$P/v1/budgets/broke" "${adm[@]}"

# Keys.
step "create a key" 201 "$P/v1/keys" "${adm[@]}" "${json[@]}" -d '{"owner":"acme","role":"client","workload":"batch","name":"contract"}'
key_id=$(field .id)
step "list keys" 200 "$P/v1/keys?owner=acme" "${adm[@]}"
step "revoke the key" 204 -X DELETE "$P/v1/keys/$key_id" "${adm[@]}"
step "revoke it again" 404 -X DELETE "$P/v1/keys/$key_id" "${adm[@]}"

# Rate limits, usage, status, privacy, webhooks.
step "set rate limits" 200 -X PUT "$P/v1/limits/acme" "${adm[@]}" "${json[@]}" \
	-d '{"requests_per_minute":1000,"tokens_per_minute":1000000,"workloads":{"batch":{"requests_per_minute":100}}}'
step "the owner's rate limits" 200 "$P/v1/limits/acme" "${adm[@]}"
step "every owner's rate limits" 200 "$P/v1/limits" "${adm[@]}"
step "rate limits of an unknown owner" 404 -X PUT "$P/v1/limits/nobody" "${adm[@]}" "${json[@]}" -d '{}'
step "usage" 200 "$P/v1/usage" "${auth[@]}"
step "usage by model" 200 "$P/v1/usage?group_by=model" "${adm[@]}"
step "usage as CSV" 200 "$P/v1/usage.csv" "${auth[@]}"
step "status" 200 "$P/v1/admin/status" "${adm[@]}"
step "privacy settings" 200 "$P/v1/owners/acme/privacy" "${auth[@]}"
step "set privacy settings" 200 -X PUT "$P/v1/owners/acme/privacy" "${adm[@]}" "${json[@]}" \
	-d '{"redaction_policy":"redact","body_retention_days":30,"metadata_retention_days":90}'
step "no webhook yet" 404 "$P/v1/owners/acme/webhook" "${auth[@]}"
step "set a webhook" 201 -X PUT "$P/v1/owners/acme/webhook" "${adm[@]}" "${json[@]}" \
	-d "{\"url\":\"http://$fake_addr/hook\",\"events\":[\"task.succeeded\"]}"
step "the webhook" 200 "$P/v1/owners/acme/webhook" "${auth[@]}"
step "rotate its secret" 200 -X POST "$P/v1/owners/acme/webhook/rotate" "${adm[@]}"
step "its deliveries" 200 "$P/v1/owners/acme/webhook/deliveries?limit=5" "${adm[@]}"
step "remove it" 204 -X DELETE "$P/v1/owners/acme/webhook" "${adm[@]}"

# The OpenAI-compatible surface.
chat='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}]}'
step "a chat completion" 200 "$P/v1/chat/completions" "${auth[@]}" "${json[@]}" -d "$chat"
step "a chat completion with a key" 200 "$P/v1/chat/completions" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: chat-$run" -d "$chat"
step "a streamed chat completion" 200 "$P/v1/chat/completions" "${auth[@]}" "${json[@]}" \
	-d '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello"}]}'
bad_step "an invalid chat completion" 400 "$P/v1/chat/completions" "${auth[@]}" "${json[@]}" -d '{"model":"gpt-4o-mini","messages":[]}'
bad_step "a chat completion without a key" 401 "$P/v1/chat/completions" "${json[@]}" -d "$chat"
step "a chat completion without a budget" 402 "$P/v1/chat/completions" -H "Authorization: Bearer $broke" "${json[@]}" -d "$chat"
step "the models" 200 "$P/v1/models" "${auth[@]}"
step "one model" 200 "$P/v1/models/gpt-4o-mini" "${auth[@]}"
step "an unknown model" 404 "$P/v1/models/no-such-model" "${auth[@]}"
step "embeddings" 200 "$P/v1/embeddings" "${auth[@]}" "${json[@]}" -d '{"model":"text-embedding-3-small","input":"hello"}'
step "a response" 200 "$P/v1/responses" "${auth[@]}" "${json[@]}" -d '{"model":"gpt-4o-mini","input":"Say hello"}'
response=$(field .id)
step "get the response" 200 "$P/v1/responses/$response" "${auth[@]}"
step "cancel a finished response" 400 -X POST "$P/v1/responses/$response/cancel" "${auth[@]}"
step "erase the response" 200 -X DELETE "$P/v1/responses/$response" "${auth[@]}"
step "the erased response" 404 "$P/v1/responses/$response" "${auth[@]}"
step "the routes" 200 "$P/v1/routes" "${auth[@]}"
step "an unknown route" 404 "$P/v1/routes/no-such-route" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: route-$run" -d '{"input":{}}'

# The Anthropic Messages surface.
akey=(-H "x-api-key: $client" -H 'anthropic-version: 2023-06-01')
msg='{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]}'
step "a message" 200 "$P/v1/messages" "${akey[@]}" "${json[@]}" -d "$msg"
step "a message with a bearer key" 200 "$P/v1/messages" "${auth[@]}" "${json[@]}" -d "$msg"
step "a streamed message" 200 "$P/v1/messages" "${akey[@]}" "${json[@]}" \
	-d '{"model":"gpt-4o-mini","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}'
step "count tokens" 200 "$P/v1/messages/count_tokens" "${akey[@]}" "${json[@]}" \
	-d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}]}'
bad_step "an invalid message" 400 "$P/v1/messages" "${akey[@]}" "${json[@]}" -d '{"model":"gpt-4o-mini","messages":[]}'
bad_step "a message without a key" 401 "$P/v1/messages" "${json[@]}" -d "$msg"
step "a message without a budget" 402 "$P/v1/messages" -H "x-api-key: $broke" "${json[@]}" -d "$msg"

# Operations.
step "liveness" 200 "$P/healthz"
step "readiness" 200 "$P/readyz"
step "metrics" 200 "$P/metrics"

# Prism's log names every violation too; one a header missed still fails.
logged=$(grep -c 'Violation: response' "$work/prism.log" || true)
if ((logged > 0)) && ((failures == 0)); then
	failures=$((failures + 1))
	say "FAIL prism logged $logged response violations:"
	grep 'Violation: response' "$work/prism.log" >&2
fi

elapsed=$((SECONDS - started))
if ((failures > 0)); then
	say "$failures of $steps steps failed (${elapsed}s)"
	exit 1
fi
say "all $steps steps match openapi.yaml (${elapsed}s)"

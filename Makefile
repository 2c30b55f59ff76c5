# Tollgate's two everyday commands:
#
#   make run    build, make sure PostgreSQL is up, give the demo owner a key
#               and a budget, and run the service with working defaults
#   make test   vet, then run every test (real PostgreSQL, race detector)
#
# Every variable the service reads (DATABASE_URL, TOLLGATE_ADDR, ...) is
# passed through from the environment; see docs/configuration.md.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := run

GO  ?= go
BIN := bin/tollgate

# The owner `make run` sets up and its budget in micro-units
# (1 unit = 1,000,000 micros).
DEMO_OWNER         ?= demo
DEMO_BUDGET_MICROS ?= 5000000

.PHONY: run test build lint lint-openapi postgres test-agents

build:
	$(GO) build -o $(BIN) ./cmd/tollgate

# Makes sure the local PostgreSQL on 127.0.0.1:5432 is up. run and test pass
# the URL they will use, so that one naming another server is only waited
# for, never started.
postgres:
	@bash scripts/ensure-postgres.sh

run: build
	@bash scripts/ensure-postgres.sh "$${DATABASE_URL:-}"
	@DEMO_OWNER='$(DEMO_OWNER)' DEMO_BUDGET_MICROS='$(DEMO_BUDGET_MICROS)' exec bash scripts/run-demo.sh $(BIN)

# The harness under tools/ is a module of its own (go.work joins the two):
# ./... is the product, ./tools/... the harness, and make test runs both.
test:
	@bash scripts/ensure-postgres.sh "$${TOLLGATE_TEST_DATABASE_URL:-}"
	$(GO) vet ./... ./tools/...
	$(GO) test -race -count=1 -timeout 30m ./... ./tools/...

# make test-agents: the coding agents (Claude Code, Codex CLI, opencode,
# the OpenAI Agents SDK, LangChain, Instructor), pinned in
# tools/agents/node, run headless through a real tollgate serve against a
# scripted upstream, each also directly as a control (tools/agents). npm
# installs them (about 1.3 GB) at the versions package.json pins, guided by
# the lockfile; not npm ci, which refuses a lockfile that lists only this
# platform's optional binaries. Node.js 20 and npm needed.
test-agents:
	@bash scripts/ensure-postgres.sh "$${TOLLGATE_TEST_DATABASE_URL:-}"
	cd tools/agents/node && npm install --no-audit --no-fund --no-save --loglevel=error
	cd tools/agents/node/instructor && npm install --no-audit --no-fund --no-save --loglevel=error
	TOLLGATE_AGENTS=1 $(GO) test -count=1 -v -timeout 30m ./tools/agents

# make lint: gofmt, vet, staticcheck, and the product's size limits: no
# non-test function above cyclomatic complexity 20 (gocyclo, pinned in
# go.mod), none taking more than six parameters (tools/paramlimit). The
# harness under tools/ is not held to them.
lint:
	@files=$$(gofmt -l .); if [[ -n $$files ]]; then \
		echo "gofmt -l: these files need gofmt -w:" >&2; echo "$$files" >&2; exit 1; fi
	$(GO) vet ./... ./tools/...
	$(GO) tool staticcheck ./... ./tools/...
	$(GO) tool gocyclo -over 20 -ignore '_test|^tools/' .
	$(GO) run ./tools/paramlimit -max 6 $$($(GO) list -f '{{.Dir}}' ./...)

# make lint-openapi: openapi.yaml against Redocly CLI's recommended rules
# (redocly.yaml lists the rules relaxed, with reasons); any error fails.
# npx fetches the pinned version from npm on first use (Node.js and npm
# needed; .ci/run installs them).
REDOCLY_CLI ?= @redocly/cli@2.77.0
lint-openapi:
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --yes $(REDOCLY_CLI) lint --config redocly.yaml openapi.yaml

# make test-contract: openapi.yaml against the live answers of a real
# `tollgate serve` (its own database, the fake provider), checked by Prism
# in proxy mode: every documented flow is driven through it with curl and
# any violation fails (see scripts/contract.sh). npx fetches the pinned
# Prism from npm on first use.
PRISM_CLI ?= @stoplight/prism-cli@5.16.0
.PHONY: test-contract
test-contract: build
	@bash scripts/ensure-postgres.sh "$${TOLLGATE_TEST_DATABASE_URL:-}"
	PRISM_CLI='$(PRISM_CLI)' bash scripts/contract.sh $(BIN)

# make bench: the performance harness (tools/bench), never part of make test.
# Measures the pgbench ceiling of one task's SQL, then Tollgate at each rate
# and model latency on a fresh database, and writes
# tools/bench/results/latest.json. Tune it with BENCH_RATES, BENCH_DURATION,
# BENCH_LATENCIES, ... (see scripts/bench.sh), e.g.
#   make bench BENCH_RATES=20,50 BENCH_DURATION=10s
# BENCH_SCENARIOS picks scenarios: throughput (the default), agent (about
# 32 KiB requests with tools and a tool loop, at BENCH_AGENT_RATES, against
# their own pgbench ceiling), inflight, duplicates, or all, e.g.
#   make bench BENCH_SCENARIOS=throughput,agent BENCH_AGENT_RATES=10,25,50,100
.PHONY: bench bench-data
bench:
	$(GO) build -o $(BIN) ./cmd/tollgate
	$(GO) build -o bin/tollbench ./tools/bench/cmd/tollbench
	@bash scripts/ensure-postgres.sh "$${BENCH_PG:-}"
	@bash scripts/bench.sh

# make bench-data: scenarios 4 and 5 (tools/bench/bigdata), reads over a
# large history (replay lookup and support search over 1,000,000 records, usage
# report and CSV export over 10,000,000 ledger rows). Seeds a scratch
# database for about ten minutes; see scripts/bench-data.sh, e.g.
#   make bench-data BENCH_DATA_TASKS=50000 BENCH_DATA_LEDGER=500000
bench-data:
	$(GO) build -o $(BIN) ./cmd/tollgate
	$(GO) build -o bin/tollbench-data ./tools/bench/cmd/tollbench-data
	@bash scripts/ensure-postgres.sh "$${BENCH_PG:-}"
	@bash scripts/bench-data.sh

# The fault suite (faults/, build tag "faults"): real tollgate processes
# SIGKILLed mid-call, PostgreSQL restarted, providers that hang, cut or
# lie, a storm of duplicates and clock jumps, each ending with invariants
# checked in SQL; it prints a table of the figures. It restarts the shared
# PostgreSQL server: run it after `make test`, never alongside it.
.PHONY: test-faults fuzz
test-faults:
	@bash scripts/ensure-postgres.sh "$${TOLLGATE_TEST_DATABASE_URL:-}"
	TOLLGATE_FAULTS_PG_RESTART=1 $(GO) test -tags faults -count=1 -timeout 20m -v ./faults

# Every fuzz target, each for FUZZTIME, starting from the seed corpora
# committed under each package's testdata/fuzz/. FUZZTIME is a duration
# (30s) or a count of inputs (20000x); CI uses a count, since a duration can
# end in a spurious "context deadline exceeded" on a loaded machine with Go
# 1.26 (golang/go#75804).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeTaskRequest$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeChatCompletion$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAdminBodies$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzRequestParams$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzValidIdempotencyKey$$' -fuzztime $(FUZZTIME) ./tasks
	$(GO) test -run '^$$' -fuzz '^FuzzClassify$$' -fuzztime $(FUZZTIME) ./provider
	$(GO) test -run '^$$' -fuzz '^FuzzUsageFigures$$' -fuzztime $(FUZZTIME) ./provider
	$(GO) test -run '^$$' -fuzz '^FuzzParsers$$' -fuzztime $(FUZZTIME) ./provider
	$(GO) test -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME) ./redact
	$(GO) test -run '^$$' -fuzz '^FuzzCell$$' -fuzztime $(FUZZTIME) ./internal/csvsafe

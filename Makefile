# Tollgate's two everyday commands:
#
#   make run    build, make sure PostgreSQL is up, give the demo owner a key
#               and a budget, and run the service with working defaults
#   make test   vet, then run every test (real PostgreSQL, race detector)
#
# Every variable the service reads (DATABASE_URL, TOLLGATE_ADDR, ...) is
# passed through from the environment; see README.md.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := run

GO  ?= go
BIN := bin/tollgate

# The owner `make run` sets up and its budget in micro-units
# (1 unit = 1,000,000 micros).
DEMO_OWNER         ?= demo
DEMO_BUDGET_MICROS ?= 5000000

.PHONY: run test build lint postgres

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

test:
	@bash scripts/ensure-postgres.sh "$${TOLLGATE_TEST_DATABASE_URL:-}"
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

lint:
	@files=$$(gofmt -l .); if [[ -n $$files ]]; then \
		echo "gofmt -l: these files need gofmt -w:" >&2; echo "$$files" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

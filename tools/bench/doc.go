// Package bench measures Tollgate end to end against the ceiling Postgres
// sets on the same machine: the harness behind `make bench`.
//
// It runs the performance targets' scenarios (see ParseScenarios): sustained
// throughput, thousands of tasks in flight against a slow model (memory and
// goroutines must not grow with queued work), and replayed duplicate POSTs
// and GET polls from closed-loop clients (where the machine's CPU went per
// request); and the agent scenario, throughput with agent-sized requests
// (tools and a tool loop's history) against a ceiling with rows of their
// size, since a request's size is what an agent's traffic changes.
//
// It owns the load generator (open loop at fixed arrival rates, so a slow
// server cannot slow the arrivals down and hide its own latency), the
// latency-injecting proxy that stands in for a slow model in front of the
// fake provider, the samplers of the server's memory and goroutines, the
// Postgres cost counters read around each step, the pgbench ceiling run,
// and the report; the statistics and the report's file come from
// tools/bench/stats, shared with the peer comparison and the data
// scenarios. It talks to Tollgate only over HTTP and to Postgres only
// through its statistics views, so what it measures is what a client and an
// operator would see; it imports no Tollgate package.
//
// The numbers it prints are for comparison within one run: absolute
// throughput on a shared machine wanders, the ratio to the ceiling measured
// minutes apart on the same box is what counts.
package bench

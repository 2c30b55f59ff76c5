// Package stats is what the benchmark tools share to turn measurements
// into figures and figures into reports: nearest-rank percentiles and the
// latency summary built on them, the steady rate of a run's events, the
// shape of a latency tail, quantiles of a Prometheus histogram's buckets,
// and, on the report side, aligned tables, the JSON file and the host's
// load average.
//
// The throughput harness (tools/bench), the peer comparison
// (tools/bench/peer) and the data scenarios (tools/bench/bigdata) all
// count a percentile the same way, so their figures can be laid side by
// side. It imports only the standard library: the peer comparison is
// built from it alone.
package stats

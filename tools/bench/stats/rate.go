package stats

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Throughput is the steady rate, per second, of events that happened at
// the given instants (in any order): the middle 98% of them, that is the
// count between the 1st and the 99th percentile instants over the time
// between those two. Under a steady load it equals the arrival rate,
// however long each event took; once a server falls behind, completions
// spread out and it reports what the server actually sustained. Trimming
// keeps a lone straggler (a job that waited for the queue's next poll) from
// stretching the span: stragglers show in the latency tail instead. It
// returns 0 when fewer than two events or no time separate them.
func Throughput(instants []time.Time) float64 {
	n := len(instants)
	if n < 2 {
		return 0
	}
	sorted := slices.Clone(instants)
	slices.SortFunc(sorted, time.Time.Compare)
	lo, hi := n/100, n-1-n/100
	span := sorted[hi].Sub(sorted[lo]).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(hi-lo) / span
}

// TailShape says how a run's slowest requests were spread in time: a
// tail made of stalls (the machine or the server stopped for tens of
// milliseconds, and every request in flight waited) crowds into a few
// windows of arrivals; a tail of requests each slow for its own reason
// spreads over many.
type TailShape struct {
	// Slowest is how many requests the tail holds: the slowest 1 % (at
	// least one).
	Slowest int `json:"slowest"`
	// Windows is how many windows of WindowMS of arrival times (due
	// times, from the run's first) hold them.
	Windows  int     `json:"windows"`
	WindowMS float64 `json:"window_ms"`
	// InWorst3 is how many of them the three fullest windows hold.
	InWorst3 int `json:"in_worst_3"`
}

// Tail finds the slowest 1 % of the requests (due time and latency, in
// any order, dues[i] with lat[i]) and the windows of arrival times they
// fall in. It returns the zero TailShape for no requests, slices of
// different lengths or a window that is not positive.
func Tail(dues []time.Time, lat []time.Duration, window time.Duration) TailShape {
	if len(dues) == 0 || len(dues) != len(lat) || window <= 0 {
		return TailShape{}
	}
	idx := make([]int, len(lat))
	first := dues[0]
	for i := range idx {
		idx[i] = i
		if dues[i].Before(first) {
			first = dues[i]
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(lat[b], lat[a]) })
	k := max(1, len(lat)/100)
	perWindow := map[int64]int{}
	for _, i := range idx[:k] {
		perWindow[int64(dues[i].Sub(first)/window)]++
	}
	counts := slices.Collect(maps.Values(perWindow))
	slices.SortFunc(counts, func(a, b int) int { return b - a })
	worst := 0
	for _, c := range counts[:min(3, len(counts))] {
		worst += c
	}
	return TailShape{Slowest: k, Windows: len(perWindow), WindowMS: MS(window), InWorst3: worst}
}

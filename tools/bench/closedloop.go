package bench

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// call is one request of a closed-loop run.
type call struct {
	start, end time.Time
	status     int    // HTTP status; 0 when no answer came
	err        string // error category; "" when the answer was as expected
}

// CallStats is what a closed-loop run achieved in its measured window.
type CallStats struct {
	// N counts the requests answered within the window, whatever the
	// answer; PerS is N over the window's length.
	N       int           `json:"n"`
	PerS    float64       `json:"per_s"`
	Latency stats.Summary `json:"latency"`
	// Statuses counts answers by HTTP status ("200", "202", ...; "none"
	// when the request got no answer).
	Statuses   map[string]int `json:"statuses"`
	ErrorCount int            `json:"error_count"`
	Errors     map[string]int `json:"errors"`
}

// summarizeCalls counts the calls answered in [from, to): a call still open
// when the window starts or ends is left out, so warm-up and the tail do
// not count, and the rate is the rate at which answers came.
func summarizeCalls(calls []call, from, to time.Time) CallStats {
	s := CallStats{Statuses: map[string]int{}, Errors: map[string]int{}}
	var lat []time.Duration
	for _, c := range calls {
		if c.end.Before(from) || !c.end.Before(to) || c.start.Before(from) {
			continue
		}
		s.N++
		lat = append(lat, c.end.Sub(c.start))
		status := "none"
		if c.status != 0 {
			status = strconv.Itoa(c.status)
		}
		s.Statuses[status]++
		if c.err != "" {
			s.Errors[c.err]++
			s.ErrorCount++
		}
	}
	s.Latency = stats.Summarize(lat)
	if secs := to.Sub(from).Seconds(); secs > 0 {
		s.PerS = float64(s.N) / secs
	}
	return s
}

// closedLoop runs clients workers from now until to, each sending one
// request after the other (do(ctx, worker, i) for its i-th request), and
// returns every call. Workers start no request at or after to; those open
// then finish before it returns, so their connections stay reusable. The
// caller measures a window ending at to (see summarizeCalls).
func closedLoop(ctx context.Context, clients int, to time.Time,
	do func(ctx context.Context, worker, i int) (status int, errCat string)) []call {
	per := make([][]call, clients)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				if !t0.Before(to) {
					return
				}
				status, errCat := do(ctx, w, i)
				per[w] = append(per[w], call{start: t0, end: time.Now(), status: status, err: errCat})
			}
		}()
	}
	wg.Wait()
	return slices.Concat(per...)
}

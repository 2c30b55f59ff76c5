package bigdata

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// Latency is one scenario of requests made by concurrent clients.
type Latency struct {
	Name        string `json:"name"`
	Example     string `json:"example"` // one request of the scenario, path and query
	Concurrency int    `json:"concurrency"`
	// Summary is over every request after the warm-up.
	Summary   stats.Summary `json:"latency"`
	PerSecond float64       `json:"requests_per_s"`
	Statuses  map[int]int   `json:"statuses"`
	Errors    int           `json:"errors"`
	// TimedOut counts requests cut at the request timeout (also in
	// Errors); Skipped counts operations not started because the
	// scenario's time budget ran out. Neither is in the latency summary,
	// which then flatters the scenario: read them first.
	TimedOut int `json:"timed_out"`
	Skipped  int `json:"skipped"`
	// ErrorSample is the first error seen, if any.
	ErrorSample string `json:"error_sample,omitempty"`
}

// sample is one HTTP exchange.
type sample struct {
	d      time.Duration
	status int // 0 when no response arrived
}

// op makes the i-th operation of a scenario: one request, or a few in a
// row (following a cursor), each a sample. ok says which statuses count as
// answers.
type op func(ctx context.Context, i int) ([]sample, error)

// load is one scenario's run.
type load struct {
	name, example string
	n, warm, conc int
	ok            func(status int) bool
	// timeout cuts one operation; budget stops starting new ones (0: no
	// limit).
	timeout, budget time.Duration
}

// runLoad runs l.n operations (after l.warm more, unrecorded) on l.conc
// concurrent clients, each starting its next operation when the last one
// ends (closed loop: the question is how long one read takes at this
// concurrency, not how many arrive).
func runLoad(ctx context.Context, l load, do op) Latency {
	name, n, warm, conc, ok := l.name, l.n, l.warm, l.conc, l.ok
	res := Latency{Name: name, Example: l.example, Concurrency: conc, Statuses: map[int]int{}}
	var (
		next    atomic.Int64
		mu      sync.Mutex
		samples []time.Duration
		wg      sync.WaitGroup
	)
	total := int64(n + warm)
	start := time.Now()
	var measuredFrom time.Time
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				if l.budget > 0 && time.Since(start) > l.budget {
					mu.Lock()
					if i >= int64(warm) {
						res.Skipped++
					}
					mu.Unlock()
					continue
				}
				octx, cancel := ctx, context.CancelFunc(func() {})
				if l.timeout > 0 {
					octx, cancel = context.WithTimeout(ctx, l.timeout)
				}
				ss, err := do(octx, int(i))
				timedOut := octx.Err() == context.DeadlineExceeded
				cancel()
				if i < int64(warm) {
					continue
				}
				mu.Lock()
				if measuredFrom.IsZero() {
					measuredFrom = time.Now()
				}
				for _, s := range ss {
					res.Statuses[s.status]++
					if s.status != 0 && ok(s.status) {
						samples = append(samples, s.d)
					} else {
						res.Errors++
					}
				}
				if timedOut {
					res.TimedOut++
					err = fmt.Errorf("cut after %s: %w", l.timeout, err)
				}
				if err != nil {
					if res.ErrorSample == "" {
						res.ErrorSample = err.Error()
					}
					if len(ss) == 0 {
						res.Errors++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if measuredFrom.IsZero() {
		measuredFrom = start
	}
	res.Summary = stats.Summarize(samples)
	if el := time.Since(measuredFrom).Seconds(); el > 0 {
		res.PerSecond = float64(len(samples)) / el
	}
	return res
}

// client makes authenticated GETs.
type client struct {
	base string
	http *http.Client
}

func newClient(base string, conc int) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conc*2, conc*2
	return &client{base: base, http: &http.Client{Transport: tr, Timeout: 10 * time.Minute}}
}

// get fetches base+path with key, reads the whole body into w (io.Discard
// when nil) and returns how long that took and the status.
func (c *client) get(ctx context.Context, key, path string, header http.Header, w io.Writer) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return sample{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if w == nil {
		w = io.Discard
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return sample{d: time.Since(start)}, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return sample{d: time.Since(start), status: resp.StatusCode}, fmt.Errorf("GET %s: read body: %w", path, err)
	}
	s := sample{d: time.Since(start), status: resp.StatusCode}
	if resp.StatusCode >= 400 && resp.StatusCode != http.StatusGone {
		return s, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return s, nil
}

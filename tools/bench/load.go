package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// taskBody is what every task of the throughput, in-flight and duplicates
// scenarios asks: a short prompt and a small answer, so the measurement is
// Tollgate's overhead, not token handling. The agent scenario sends
// AgentBody's request instead.
const taskBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Summarise the benchmark in one sentence."}],"max_tokens":16}`

// loadClient submits and follows tasks over Tollgate's HTTP API.
type loadClient struct {
	http         *http.Client
	baseURL      string
	apiKey       string
	body         []byte // every POST's body
	pollInterval time.Duration
	longPoll     time.Duration // > 0: follow tasks with GET Prefer: wait (long polls)
	taskTimeout  time.Duration
	maxInFlight  int64
	inFlight     atomic.Int64
}

func newLoadClient(baseURL, apiKey string, body []byte, pollInterval, longPoll, taskTimeout time.Duration, maxInFlight int) *loadClient {
	return &loadClient{
		// An open-loop client must never be the bottleneck: keep a
		// connection per concurrent request instead of queueing on two.
		http: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConnsPerHost: 4096,
				IdleConnTimeout:     90 * time.Second,
				DisableCompression:  true,
			},
			Timeout: 60 * time.Second,
		},
		baseURL:      baseURL,
		apiKey:       apiKey,
		body:         body,
		pollInterval: pollInterval,
		longPoll:     longPoll,
		taskTimeout:  taskTimeout,
		maxInFlight:  int64(maxInFlight),
	}
}

// shedError is the error of a POST refused as overloaded (503): the server
// shedding load, counted apart in the report.
const shedError = "POST 503 overloaded"

// taskView is the part of a task the load generator reads.
type taskView struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

func (t taskView) final() bool {
	switch t.Status {
	case "succeeded", "failed", "canceled":
		return true
	}
	return false
}

// outcome is what happened to one task.
type outcome struct {
	due       time.Time     // when the arrival was due
	sent      bool          // an arrival was due and a request went out
	admitted  bool          // POST answered 200 or 202
	admission time.Duration // scheduled arrival → POST answered
	ok        bool          // finished as succeeded
	e2e       time.Duration // scheduled arrival → finish observed by polling
	// finishedAt is the task's finished_at, by the server's clock (the
	// same machine's), and e2eServer is scheduled arrival → finishedAt: no
	// polling granularity in either.
	finishedAt time.Time
	e2eServer  time.Duration
	observed   time.Time // when polling saw the finish
	polls      int
	err        string // error category, "" when ok
	// late is scheduled arrival → the POST about to go out: the harness's
	// own delay (its goroutine woken late), inside admission.
	late time.Duration
}

// run makes arrivals at rate per second for d, each a new task with a
// unique Idempotency-Key, and follows every task to its end. Arrivals are
// open loop: each is due at start + i/rate whatever the server does, and
// latencies are measured from that due time, so a stalled server (or a
// stalled load generator) shows up in the numbers instead of quietly
// thinning the load.
func (c *loadClient) run(ctx context.Context, rate float64, d, model time.Duration, keyPrefix string) []outcome {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	outcomes := make([]outcome, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if err := sleepUntil(ctx, due); err != nil {
			break
		}
		if c.inFlight.Load() >= c.maxInFlight {
			outcomes[i] = outcome{due: due, sent: true, err: "client: too many tasks in flight"}
			continue
		}
		c.inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.inFlight.Add(-1)
			outcomes[i] = c.task(ctx, due, keyPrefix+strconv.Itoa(i), model)
		}()
	}
	wg.Wait()
	// Each connection this step opened is a goroutine in the server while
	// it idles; close them, so the goroutines left after a step are the
	// server's own.
	c.http.CloseIdleConnections()
	return outcomes
}

// task submits one task due at due and polls it to its end. The first poll
// waits for the model's latency, since nothing can finish sooner; then it
// polls every pollInterval, so the end-to-end latency it sees is late by
// at most one interval plus one GET.
func (c *loadClient) task(ctx context.Context, due time.Time, key string, model time.Duration) outcome {
	o := outcome{due: due, sent: true, late: time.Since(due)}
	status, body, err := c.do(ctx, http.MethodPost, "/v1/tasks", key)
	o.admission = time.Since(due)
	if err != nil {
		o.err = "POST: " + err.Error()
		return o
	}
	if status != http.StatusAccepted && status != http.StatusOK {
		o.err = fmt.Sprintf("POST %d %s", status, problemCode(body))
		return o
	}
	o.admitted = true
	var t taskView
	if err := json.Unmarshal(body, &t); err != nil || t.ID == "" {
		o.err = "POST: unreadable task"
		return o
	}
	next := due.Add(max(model, c.pollInterval))
	get := apiRequest{method: http.MethodGet, path: "/v1/tasks/" + t.ID}
	if c.longPoll > 0 {
		// Long polls: each GET returns when the task finishes.
		next = time.Now()
		get.prefer = "wait=" + strconv.Itoa(int(max(c.longPoll, time.Second)/time.Second))
	}
	deadline := due.Add(c.taskTimeout)
	for !t.final() {
		if next.After(deadline) {
			o.err = "task not finished within " + c.taskTimeout.String()
			return o
		}
		if err := sleepUntil(ctx, next); err != nil {
			o.err = "canceled"
			return o
		}
		r, err := c.send(ctx, get)
		status, body := r.status, r.body
		o.polls++
		if err != nil {
			o.err = "GET: " + err.Error()
			return o
		}
		if status != http.StatusOK {
			o.err = fmt.Sprintf("GET %d %s", status, problemCode(body))
			return o
		}
		if err := json.Unmarshal(body, &t); err != nil {
			o.err = "GET: unreadable task"
			return o
		}
		next = time.Now()
		if c.longPoll <= 0 {
			next = next.Add(c.pollInterval)
		}
	}
	o.observed = time.Now()
	o.e2e = o.observed.Sub(due)
	if t.FinishedAt != nil {
		o.finishedAt = *t.FinishedAt
		o.e2eServer = o.finishedAt.Sub(due)
	}
	if t.Status != "succeeded" {
		o.err = "task " + t.Status
		return o
	}
	o.ok = true
	return o
}

// do sends one API request and returns its status and body.
func (c *loadClient) do(ctx context.Context, method, path, idempotencyKey string) (int, []byte, error) {
	r, err := c.send(ctx, apiRequest{method: method, path: path, idempotencyKey: idempotencyKey})
	return r.status, r.body, err
}

// apiRequest is one call of Tollgate's API. A POST carries the client's body.
type apiRequest struct {
	method, path   string
	idempotencyKey string // POST only
	prefer         string // a Prefer header, e.g. "wait=30"; "" for none
}

// apiResponse is what the load generator keeps of an answer.
type apiResponse struct {
	status int
	// replayed is the Idempotent-Replayed header of a POST: "true" when the
	// server answered with a task it already had.
	replayed string
	body     []byte
}

// send sends one API request and reads the whole answer, so that the
// connection is reused.
func (c *loadClient) send(ctx context.Context, r apiRequest) (apiResponse, error) {
	var body io.Reader
	if r.method == http.MethodPost {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.baseURL+r.path, body)
	if err != nil {
		return apiResponse{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}
	if r.prefer != "" {
		req.Header.Set("Prefer", r.prefer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return apiResponse{}, netError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return apiResponse{}, netError(err)
	}
	return apiResponse{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed"), body: b}, nil
}

// netError shortens transport errors to a category, so that errors group
// by kind in the report instead of by port number.
func netError(err error) error {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, context.Canceled):
		return errors.New("canceled")
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("timeout")
	case errors.As(err, &oe):
		return fmt.Errorf("%s: %w", oe.Op, oe.Err)
	}
	return err
}

// problemCode is the code of an RFC 9457 problem body, or "".
func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}

// sleepUntil waits until t or until ctx ends, whichever is first, and
// returns ctx's error in the second case.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

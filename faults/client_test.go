//go:build faults

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// taskBody is a task request for gpt-4o-mini; n makes each conversation
// distinct.
func taskBody(n int, text string) []byte { return modelTaskBody("gpt-4o-mini", n, text) }

func modelTaskBody(model string, n int, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":      model,
		"messages":   []map[string]string{{"role": "user", "content": fmt.Sprintf("%s #%d", text, n)}},
		"max_tokens": 16,
	})
	return b
}

// submitted is what a client finally learned from POST /v1/tasks.
type submitted struct {
	status   int    // the final HTTP status
	taskID   string // set on 2xx
	replayed bool   // Idempotent-Replayed: true
	tries    int
	code     string // problem code of a final 4xx
}

// clientStats counts what clients saw on the way: transport errors and
// statuses that made them retry.
type clientStats struct {
	mu          sync.Mutex
	transport   int
	retryStatus map[int]int
	worstDelay  time.Duration // the longest a submission took to get its answer
}

func (s *clientStats) add(status int, transportErr bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if transportErr {
		s.transport++
		return
	}
	if s.retryStatus == nil {
		s.retryStatus = map[int]int{}
	}
	s.retryStatus[status]++
}

func (s *clientStats) took(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worstDelay = max(s.worstDelay, d)
}

func (s *clientStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("transport errors %d, retried statuses %v, slowest submission %s", s.transport, s.retryStatus, s.worstDelay.Round(10*time.Millisecond))
}

var httpClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 5 * time.Second},
}

// submit POSTs a task the way a careful client does: on a transport error,
// a 5xx or a 429 it retries the same body under the same Idempotency-Key,
// on whichever instance pick returns, until ctx ends. A 2xx or another
// 4xx is final.
func submit(ctx context.Context, pick func() string, apiKey, idemKey string, body []byte, stats *clientStats) (submitted, error) {
	var out submitted
	start := time.Now()
	defer func() { stats.took(time.Since(start)) }()
	backoff := 50 * time.Millisecond
	for {
		out.tries++
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, pick()+"/v1/tasks", bytes.NewReader(body))
		if err != nil {
			return out, err
		}
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Idempotency-Key", idemKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case rerr != nil:
				stats.add(0, true)
			case resp.StatusCode >= 200 && resp.StatusCode < 300:
				var t struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(b, &t); err != nil || t.ID == "" {
					return out, fmt.Errorf("POST /v1/tasks: %d with body %q", resp.StatusCode, b)
				}
				out.status, out.taskID, out.replayed = resp.StatusCode, t.ID, resp.Header.Get("Idempotent-Replayed") == "true"
				return out, nil
			case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
				stats.add(resp.StatusCode, false)
			default:
				var p struct {
					Code string `json:"code"`
				}
				_ = json.Unmarshal(b, &p)
				out.status, out.code = resp.StatusCode, p.Code
				return out, nil
			}
		} else {
			stats.add(0, true)
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("POST /v1/tasks %s: gave up after %d tries: %w", idemKey, out.tries, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// target is one way to reach the fake model: directly or through a gateway.
type target struct {
	Name   string // short key in peer.json: fake, portkey, tollgate
	Label  string // what the table prints
	URL    string // the chat completions endpoint
	Header http.Header
}

// outcome is the result of one run against one target, in request order.
type outcome struct {
	lat     []time.Duration // successful requests only
	sched   []time.Duration // open loop: when each of lat was due, from the start
	errors  int
	first   string // the first failure, to print
	elapsed time.Duration
}

func (o outcome) summary() summary {
	s := summarize(o.lat, o.errors, o.elapsed)
	s.FirstErr = o.first
	return s
}

// seconds is the open-loop run second by second; nil for a sequential run.
func (o outcome) seconds() []second {
	if o.sched == nil {
		return nil
	}
	return bySecond(o.sched, o.lat)
}

// requestBody is the chat completion every target gets for request i. The
// text varies so that nothing on the way can answer from a cache.
func requestBody(model string, i int) []byte {
	return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"peer benchmark request %d"}],"max_tokens":16}`, model, i)
}

// call posts one chat completion and reads the whole answer. It fails on a
// transport error, a status other than 200 or a body that is not a chat
// completion.
func call(ctx context.Context, c *http.Client, t target, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, vs := range t.Header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	if !bytes.Contains(b, []byte(`"chat.completion"`)) {
		return fmt.Errorf("200 without a chat completion: %.200s", b)
	}
	return nil
}

// sequential sends n requests one after the other (concurrency 1), the
// first numbered from.
func sequential(ctx context.Context, c *http.Client, t target, model string, from, n int) outcome {
	var o outcome
	start := time.Now()
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		body := requestBody(model, from+i)
		sent := time.Now()
		err := call(ctx, c, t, body)
		took := time.Since(sent)
		if err != nil {
			o.fail(err)
			continue
		}
		o.lat = append(o.lat, took)
	}
	o.elapsed = time.Since(start)
	return o
}

// openLoop sends rate requests per second for d, each at its scheduled
// instant whether or not earlier ones have been answered. Latency runs from
// the scheduled instant, not from when the request left, so that a client
// falling behind its schedule shows up in the figures instead of hiding
// (coordinated omission).
func openLoop(ctx context.Context, c *http.Client, t target, model string, from int, rate float64, d time.Duration) outcome {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	sent := 0
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = call(ctx, c, t, requestBody(model, from+i))
			lat[i] = time.Since(at)
		}()
	}
	wg.Wait()
	var o outcome
	o.elapsed = time.Since(start)
	for i := range sent {
		if errs[i] != nil {
			o.fail(errs[i])
			continue
		}
		o.lat = append(o.lat, lat[i])
		o.sched = append(o.sched, time.Duration(i)*interval)
	}
	return o
}

func (o *outcome) fail(err error) {
	if o.errors == 0 {
		o.first = err.Error()
	}
	o.errors++
}

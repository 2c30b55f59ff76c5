package provider

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
)

// sseCall is one streamed POST: the shared plumbing of every adapter's
// Stream. It sends payload, classifies a non-2xx answer, and then feeds
// each Server-Sent Event's data to onData until onData reports the end. A
// stream that stops before that is a *Error of class ambiguous, code
// stream_cut (or timeout, when our own deadline cut it): the call ran.
type sseCall struct {
	hc       *http.Client
	url      string
	header   http.Header
	payload  any
	key      string
	classify func(status int, header http.Header, body []byte) *Error
	// onData handles one event's data; done ends the stream normally.
	onData func(data string) (done bool, err error)
	// whole handles a server that answered a whole JSON body instead of a
	// stream (some ignore "stream": true).
	whole func(status int, header http.Header, body []byte) error
	// onEvent, when set, takes each event's data with its event name
	// instead of onData (a native stream relays both).
	onEvent func(event, data string) (done bool, err error)
}

func (c sseCall) do(ctx context.Context) (status int, err error) {
	payload, err := encodePayload(c.payload)
	if err != nil {
		return 0, rejectedLocally(err)
	}
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			sent.Store(true)
		}
	}}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return 0, rejectedLocally(err)
	}
	for k, vs := range c.header {
		hreq.Header[k] = vs
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if c.key != "" {
		hreq.Header.Set("Idempotency-Key", c.key)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return 0, transportError(ctx.Err(), err, sent.Load(), 0)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		return resp.StatusCode, c.classify(resp.StatusCode, resp.Header, b)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		if err != nil {
			return resp.StatusCode, transportError(ctx.Err(), err, true, resp.StatusCode)
		}
		return resp.StatusCode, c.whole(resp.StatusCode, resp.Header, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventBytes)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event:"); ok {
			event = strings.TrimSpace(name)
			continue
		}
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			if line == "" {
				event = ""
			}
			continue // comments, blank separators
		}
		done, err := c.dispatch(event, strings.TrimSpace(data))
		if err != nil {
			return resp.StatusCode, err
		}
		if done {
			return resp.StatusCode, nil
		}
	}
	e := &Error{Class: ClassAmbiguous, Status: resp.StatusCode, Code: CodeStreamCut, cause: sc.Err()}
	if ctx.Err() != nil {
		e.Code, e.cause = CodeTimeout, ctx.Err()
	}
	return resp.StatusCode, e
}

// dispatch hands one event's data to onEvent, or else to onData.
func (c sseCall) dispatch(event, data string) (bool, error) {
	if c.onEvent != nil {
		return c.onEvent(event, data)
	}
	return c.onData(data)
}

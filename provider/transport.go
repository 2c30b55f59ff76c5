package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// maxResponseBytes bounds how much of a response body is read, so that a
// broken or hostile provider cannot exhaust memory.
const maxResponseBytes = 4 << 20

// call is one POST of a JSON body to a provider, as every adapter makes it.
type call struct {
	hc       *http.Client
	url      string
	header   http.Header // auth and format headers; Content-Type, Accept and Idempotency-Key are added
	payload  any         // encoded as JSON
	key      string      // Request.IdempotencyKey
	classify func(status int, header http.Header, body []byte) *Error
	parse    func(status int, header http.Header, body []byte) (*Response, error)
	// limit bounds a 2xx body; 0 is maxResponseBytes.
	limit int64
}

// do sends c once and returns the parsed success or a *Error: the classified
// answer for a non-2xx status; ClassTransient "connection_error" (or
// "timeout"/"canceled") when nothing was sent; ClassAmbiguous "timeout",
// "canceled" or "connection_cut" when the request was sent but no full answer
// came back; ClassTransient "malformed_response" for a 2xx body over
// maxResponseBytes; whatever parse returns otherwise.
func (c call) do(ctx context.Context) (*Response, error) {
	status, header, body, err := c.fetch(ctx)
	if err != nil {
		return nil, err
	}
	return c.parse(status, header, body)
}

// fetch is do without the parse: the 2xx answer's status, headers and
// body, or the same *Error do returns.
func (c call) fetch(ctx context.Context) (int, http.Header, []byte, error) {
	payload, err := encodePayload(c.payload)
	if err != nil {
		return 0, nil, nil, &Error{Class: ClassRejected, Code: CodeInvalidRequest, cause: err}
	}

	// sent turns true once the whole request has been handed to the
	// connection: from then on a lost answer may mean a processed call.
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				sent.Store(true)
			}
		},
	}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace),
		http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		// Only a malformed base URL gets here: configuration, not weather.
		return 0, nil, nil, &Error{Class: ClassRejected, Code: CodeInvalidRequest, cause: err}
	}
	for k, vs := range c.header {
		hreq.Header[k] = vs
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.key != "" {
		hreq.Header.Set("Idempotency-Key", c.key)
	}

	resp, err := c.hc.Do(hreq)
	if err != nil {
		return 0, nil, nil, transportError(ctx.Err(), err, sent.Load(), 0)
	}
	defer resp.Body.Close()

	limit := int64(maxResponseBytes)
	if c.limit > 0 {
		limit = c.limit
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if err != nil {
		if ok {
			// The provider answered success and the answer was lost:
			// the call was very likely processed and billed.
			return 0, nil, nil, transportError(ctx.Err(), err, true, resp.StatusCode)
		}
		// Classify the failure on what did arrive.
	}
	if !ok {
		if len(body) > maxResponseBytes {
			body = body[:maxResponseBytes]
		}
		return 0, nil, nil, c.classify(resp.StatusCode, resp.Header, body)
	}
	if int64(len(body)) > limit {
		return 0, nil, nil, &Error{Class: ClassTransient, Status: resp.StatusCode, Code: CodeMalformedResponse}
	}
	return resp.StatusCode, resp.Header, body, nil
}

// transportError classifies a failure to get a complete answer. ctxErr is the
// caller's context error, sent whether the request had been written.
func transportError(ctxErr, err error, sent bool, status int) *Error {
	e := &Error{Class: ClassTransient, Status: status, Code: CodeConnectionError, cause: err}
	if sent {
		e.Class, e.Code = ClassAmbiguous, CodeConnectionCut
	}
	var te interface{ Timeout() bool }
	switch {
	case errors.Is(ctxErr, context.DeadlineExceeded):
		e.Code, e.cause = CodeTimeout, ctxErr
	case ctxErr != nil:
		e.Code, e.cause = CodeCanceled, ctxErr
	case errors.As(err, &te) && te.Timeout():
		// http.Client.Timeout or a transport deadline.
		e.Code = CodeTimeout
	}
	return e
}

// malformed is the answer to a 2xx that carries no usable completion.
func malformed(status int, cause error) *Error {
	return &Error{Class: ClassTransient, Status: status, Code: CodeMalformedResponse, cause: cause}
}

// rejectedLocally is a request refused before anything was sent, because the
// provider could only refuse it too.
func rejectedLocally(cause error) *Error {
	return &Error{Class: ClassRejected, Code: CodeInvalidRequest, cause: cause}
}

// hasJSON reports whether raw holds a JSON value other than null.
func hasJSON(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

package provider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// An Anthropic Messages request from an Anthropic client is sent as the
// client wrote it (native.go): its body with "model" and "stream" set,
// and the client's anthropic-version and anthropic-beta headers. The
// answer is parsed as any other, and kept as the provider sent it.

// Carries reports that the adapter carries Anthropic Messages requests
// natively.
func (c *Anthropic) Carries(api API) bool { return api == APIAnthropicMessages }

// nativeOf is chat's native body when the adapter carries it, else nil.
func nativeOf(chat Chat) *Native {
	if n := chat.Native; n != nil && n.API == APIAnthropicMessages && len(n.Body) > 0 {
		return n
	}
	return nil
}

// nativeBody is n's body with model and stream set, or the local
// refusal of a body that is no JSON object.
func nativeBody(n *Native, model string, stream bool) (rawBody, error) {
	m, err := json.Marshal(model)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	body, err := SpliceMember(n.Body, "model", m)
	if err == nil {
		body, err = SpliceMember(body, "stream", []byte(map[bool]string{true: "true", false: "false"}[stream]))
	}
	if err != nil {
		return nil, rejectedLocally(err)
	}
	return rawBody(body), nil
}

// nativeHeaders are the headers of a native call: the key, the client's
// anthropic-version (else the adapter's) and its anthropic-beta values.
func (c *Anthropic) nativeHeaders(n *Native) http.Header {
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("x-api-key", c.apiKey)
	}
	hv := http.Header(n.Header)
	h.Set("anthropic-version", cmp.Or(hv.Get("anthropic-version"), AnthropicVersion))
	if betas := hv.Values("anthropic-beta"); len(betas) > 0 {
		h.Set("anthropic-beta", strings.Join(betas, ","))
	}
	return h
}

// nativeCall is the call of a native request, its answer parsed with
// the body kept; stream says how the answer is read.
func (c *Anthropic) nativeCall(req Request, n *Native, stream bool) (call, error) {
	if req.OutputLimit() <= 0 {
		return call{}, rejectedLocally(errors.New("provider: the Anthropic Messages API requires max_tokens"))
	}
	body, err := nativeBody(n, req.Model, stream)
	if err != nil {
		return call{}, err
	}
	return call{hc: c.hc, url: c.endpoint, header: c.nativeHeaders(n), payload: body, key: req.IdempotencyKey,
		classify: ClassifyAnthropic, parse: parseNativeMessage}, nil
}

// parseNativeMessage is parseMessage with the body kept as the answer's
// Native.
func parseNativeMessage(status int, header http.Header, body []byte) (*Response, error) {
	r, err := parseMessage(status, header, body)
	if err != nil {
		return nil, err
	}
	r.Native = &NativeAnswer{API: APIAnthropicMessages, Body: bytes.Clone(body)}
	return r, nil
}

func (c *Anthropic) completeNative(ctx context.Context, req Request, n *Native) (*Response, error) {
	cl, err := c.nativeCall(req, n, false)
	if err != nil {
		return nil, err
	}
	return cl.do(ctx)
}

// streamNative streams a native request: every event reaches onDelta
// carrying its Native copy, on the first of the deltas it makes, or on
// one of its own when it makes none (ping, message_stop, events
// Tollgate does not know); the answer's Native holds them all, so that a
// repeat streams the same events.
func (c *Anthropic) streamNative(ctx context.Context, req Request, n *Native, onDelta func(Delta)) (*Response, error) {
	cl, err := c.nativeCall(req, n, true)
	if err != nil {
		return nil, err
	}
	s := &anthropicStreamState{onDelta: onDelta, callOf: map[int]int{}, events: &NativeAnswer{API: APIAnthropicMessages}}
	status, err := sseCall{
		hc: cl.hc, url: cl.url, header: cl.header, payload: cl.payload, key: cl.key, classify: ClassifyAnthropic,
		onEvent: s.nativeEvent,
		whole:   s.whole,
	}.do(ctx)
	resp, err := s.response(status, err)
	if resp != nil && len(s.events.Events) > 0 {
		resp.Native = s.events
	}
	return resp, err
}

// nativeEvent handles one event of a native stream (event); an error
// event is not relayed: the stream fails with it.
func (s *anthropicStreamState) nativeEvent(name, data string) (bool, error) {
	s.current = &NativeEvent{Event: name, Data: []byte(data)}
	s.events.Events = append(s.events.Events, *s.current)
	done, err := s.event(data)
	if err != nil {
		s.current = nil
		return done, err
	}
	if s.current != nil && s.onDelta != nil {
		s.onDelta(Delta{Native: s.current})
	}
	s.current = nil
	return done, nil
}

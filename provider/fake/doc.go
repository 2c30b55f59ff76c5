// Package fake is a deterministic stand-in for an OpenAI-compatible model
// provider, served over real HTTP.
//
// Tollgate's tests, and anyone running Tollgate locally, need a provider that
// fails on demand (500s, rate limits, out-of-credit, hangs that leave the call
// ambiguous, broken 200s) and that records what it was sent, notably the
// Idempotency-Key, to prove that a task was or was not called twice. Scripting
// that through real HTTP, rather than mocking the client, exercises the same
// wire format, headers and timeouts as production.
//
// Endpoints:
//
//	POST /v1/chat/completions  log the call, then serve the next scripted
//	                           response, or a deterministic completion
//	POST /_fake/script         {"responses": [Scripted...]} appended; 204
//	GET  /_fake/calls          {"count": N, "calls": [Call...]}
//	POST /_fake/reset          empty the queue and the call log; 204
//
// With an empty queue, the completion's content is "fake completion " and the
// first 12 hex digits of the SHA-256 of the request's messages re-encoded as
// JSON [{"role","content"}...]; prompt_tokens is the sum over messages of
// ceil(len(content)/4)+4 and completion_tokens is min(max_tokens, 16), where
// a missing max_tokens falls back to max_completion_tokens and then to 16. Nothing is random, and the only clock is the one
// given with WithClock.
package fake

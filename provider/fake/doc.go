// Package fake is a deterministic stand-in for the model providers Tollgate
// speaks to (OpenAI-compatible, Anthropic Messages, Cloudflare Workers AI),
// served over real HTTP.
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
//	POST /v1/chat/completions  OpenAI chat completions
//	POST /v1/messages          Anthropic Messages
//	POST /client/v4/accounts/{id}/ai/run/{model}
//	                           Cloudflare Workers AI; the model is the rest
//	                           of the path, slashes included
//	POST /_fake/script         {"responses": [Scripted...]} appended; 204
//	GET  /_fake/calls          {"count": N, "calls": [Call...]}
//	POST /_fake/reset          empty the queue and the call log; 204
//
// Every model endpoint logs the call (model and Idempotency-Key) in one call
// log, then serves the next response from one shared script queue, as is,
// whatever format it is in; with an empty queue it answers in its own format
// with a deterministic completion. Its text is "fake completion " and the
// first 12 hex digits of the SHA-256 of the conversation re-encoded as JSON
// [{"role","content"}...] (Anthropic's system prompt counts as one leading
// system message); prompt tokens are the sum over messages of
// ceil(len(content)/4)+4 and output tokens min(max_tokens, 16), where a
// missing max_tokens falls back to max_completion_tokens (OpenAI) and then to
// 16. The Anthropic endpoint, like the real one, refuses a request without
// max_tokens. Malformed requests get a 400 in the endpoint's own error shape.
// Nothing is random, and the only clock is the one given with WithClock.
package fake

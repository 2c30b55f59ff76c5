package provider

import (
	"strconv"
	"strings"
	"time"
)

// Class says what the caller may do after a failed model call.
type Class string

const (
	// ClassTransient: retry with bounded backoff.
	ClassTransient Class = "transient"
	// ClassThrottled: pause, honouring Error.RetryAfter, then retry.
	ClassThrottled Class = "throttled"
	// ClassExhausted: the account is out of credit, its quota is gone, or the
	// provider refused its key or the account itself (401, 403); do not
	// retry until someone pays or fixes the account.
	ClassExhausted Class = "exhausted"
	// ClassRejected: the request itself is bad (context too long, invalid
	// schema, policy, unknown model, a model the plan does not include); do
	// not retry it unchanged.
	ClassRejected Class = "rejected"
	// ClassAmbiguous: the request may have been processed and billed (timeout
	// or connection cut after the request was sent); check the journal before
	// repeating it.
	ClassAmbiguous Class = "ambiguous"
)

// Codes that Tollgate itself assigns. Error.Code is one of these, or, for a
// failure Tollgate has no name for, the provider's own machine code when it is
// a short token, or "http_<status>".
const (
	CodeRateLimited       = "rate_limit_exceeded"
	CodeInsufficientQuota = "insufficient_quota"
	CodeContextLength     = "context_length_exceeded"
	CodeContentPolicy     = "content_policy"
	CodeInvalidRequest    = "invalid_request"
	CodeUnauthorized      = "unauthorized" // the key was refused: exhausted, no retry fixes it
	CodeForbidden         = "forbidden"    // the account may not do this: exhausted, or rejected when a model is named
	CodeAccountDisabled   = "account_disabled"
	CodeNotFound          = "not_found"
	CodeRequestTooLarge   = "request_too_large"
	CodeRequestTimeout    = "request_timeout" // the provider answered 408
	// CodeUpstreamTimeout: the provider took the request, gave up on it and
	// said so (Cloudflare 3007, Anthropic timeout_error). It is transient,
	// not ambiguous: ambiguity means not knowing the outcome, and here the
	// provider reported it. The call is over and failed, as after a 5xx, and
	// nothing is left in flight that a retry could duplicate.
	CodeUpstreamTimeout   = "upstream_timeout"
	CodeServerError       = "server_error"
	CodeOverloaded        = "overloaded"
	CodeBadGateway        = "bad_gateway"
	CodeUnavailable       = "service_unavailable"
	CodeGatewayTimeout    = "gateway_timeout"
	CodeMalformedResponse = "malformed_response"
	CodeEmptyOutput       = "empty_output"
	CodeRefusal           = "refusal" // the model declined to answer
	CodeTimeout           = "timeout" // our deadline passed; no answer
	CodeCanceled          = "canceled"
	CodeConnectionError   = "connection_error" // nothing was sent
	CodeConnectionCut     = "connection_cut"   // the request was sent, the answer was lost
	// CodeRedirectRefused: the provider answered 3xx. Provider calls never
	// follow a redirect, which would send the prompt and the credential to
	// a host nobody configured; see NoRedirects.
	CodeRedirectRefused = "redirect_refused"
)

// Error is the only error a Client returns. Its exported fields are safe to
// log and to show to API clients.
type Error struct {
	Class      Class
	Status     int           // provider HTTP status, 0 when there was no response
	Code       string        // short machine code (see the Code constants), never free text
	RetryAfter time.Duration // how long the provider asked us to wait, 0 if it did not say
	// Param is the request field a rejection names ("max_tokens",
	// "messages.[0].content"), so that a client can tell which of its
	// fields to fix. Only a path of OpenAI's own request field names and
	// indices is kept (see requestParam), never the provider's text; ""
	// when the provider named none, or the failure is not a rejection.
	Param string
	// ContextWindow and ContextTokens are what a context-length refusal
	// (CodeContextLength) says of the model's window and of the request's
	// size, in tokens, read as integers from the provider's message
	// (contextFigures); 0 when the message gives none. Clients detect the
	// refusal by a wording with these figures, which Tollgate rebuilds
	// from them, never passing the provider's text on.
	ContextWindow, ContextTokens int

	// raw is behind a pointer so that printing an Error value with %v or %+v
	// by mistake shows an address, not the provider's text.
	raw   *string
	cause error
	// unclassified: no code, type or message rule matched; the status alone
	// decided the class.
	unclassified bool
}

// Error reports the class, status and code. It never contains the provider's
// message or anything from the request.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("provider: ")
	b.WriteString(string(e.Class))
	if e.Code != "" {
		b.WriteString(": ")
		b.WriteString(e.Code)
	}
	if e.Status != 0 {
		b.WriteString(" (status ")
		b.WriteString(strconv.Itoa(e.Status))
		b.WriteString(")")
	}
	return b.String()
}

// Retryable reports whether the call may be repeated at all: transient,
// throttled and ambiguous failures are; an ambiguous one only after checking
// the journal.
func (e *Error) Retryable() bool {
	switch e.Class {
	case ClassTransient, ClassThrottled, ClassAmbiguous:
		return true
	}
	return false
}

// RawMessage returns the provider's own error message, or "" when there was
// none. Never log it or return it to clients: it can quote the prompt or
// account details.
func (e *Error) RawMessage() string {
	if e.raw == nil {
		return ""
	}
	return *e.raw
}

// Unclassified reports whether the provider's answer matched no rule on its
// code, type or message, so that the class came from the HTTP status alone
// (an unknown 4xx is rejected, an unknown 5xx transient). Callers count these
// to find error bodies the classifier should learn; the class still holds.
// Network failures and malformed successes are never unclassified.
func (e *Error) Unclassified() bool { return e.unclassified }

// Unwrap returns the transport or context error behind a network failure
// (so errors.Is(err, context.Canceled) works), or nil.
func (e *Error) Unwrap() error { return e.cause }

func (e *Error) setRaw(msg string) {
	if msg != "" {
		e.raw = &msg
	}
}

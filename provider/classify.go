package provider

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxRawMessage bounds the provider text kept on an Error.
const maxRawMessage = 4 << 10

// dialect knows the codes of one wire format that name a failure exactly,
// and reports false for any other. It runs before any hint in the message.
type dialect func(f errorFields) (Class, string, bool)

// classify is the classifier the wire formats share. It always returns a
// non-nil *Error; a body it cannot parse is read as plain text and the status
// decides.
//
// It reads the error's code and type fields first (the dialect's exact codes,
// then the shared ones), then robust hints in the message (billing failures
// hide behind 400 and 429, types mislead), then the status: unknown 4xx are
// rejected, unknown 5xx transient, and the Error says it was unclassified.
// An empty account is checked before a rate limit, and 401/403 mean the
// account is unusable (exhausted) unless the refusal names a model. A
// Retry-After date is measured against the response's Date header, else now.
func classify(status int, header http.Header, body []byte, now func() time.Time, exact dialect) *Error {
	f := decodeErrorBody(body)
	wait := retryAfter(header, f.msg, now)
	class, code, known := decide(status, f, wait, exact)
	e := &Error{Class: class, Status: status, Code: code, RetryAfter: wait, unclassified: !known}
	if class == ClassRejected {
		e.Param = requestParam(f.param)
	}
	if code == CodeContextLength {
		e.ContextWindow, e.ContextTokens = contextFigures(f.msg)
	}
	e.setRaw(f.msg)
	return e
}

// errorFields is what an error body says, whatever its shape: code, typ and
// detail are lower-cased, msg is the provider's text as sent.
type errorFields struct {
	code, typ, msg string
	detail         string // error.details.error_code (Anthropic spend limits)
	param          string // error.param as sent (OpenAI and compatible servers)
}

// decodeErrorBody understands {"error": {...}} (OpenAI, Anthropic),
// {"error": "text"}, top-level {"message","type","code"} (vLLM and some
// proxies), {"errors": [{...}]} (Cloudflare) and a one-element array around
// any of these. Anything else is plain text.
func decodeErrorBody(body []byte) errorFields {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			body = bytes.TrimSpace(arr[0])
		}
	}
	var top struct {
		Error  json.RawMessage   `json:"error"`
		Errors []json.RawMessage `json:"errors"`
	}
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &top) != nil {
		return errorFields{msg: clip(string(body))}
	}
	var f errorFields
	switch {
	case isJSONObject(top.Error):
		f = fieldsOf(top.Error)
	case len(top.Error) > 0:
		f.msg = scalar(top.Error)
	case len(top.Errors) > 0 && isJSONObject(top.Errors[0]):
		f = fieldsOf(top.Errors[0])
	}
	outer := fieldsOf(body)
	if f.code == "" {
		f.code = outer.code
	}
	if f.typ == "" {
		f.typ = outer.typ
	}
	if f.msg == "" {
		f.msg = outer.msg
	}
	if f.param == "" {
		f.param = outer.param
	}
	return f
}

func fieldsOf(obj json.RawMessage) errorFields {
	var w struct {
		Code    json.RawMessage `json:"code"`
		Type    json.RawMessage `json:"type"`
		Message json.RawMessage `json:"message"`
		Details json.RawMessage `json:"details"`
		Param   json.RawMessage `json:"param"`
	}
	if json.Unmarshal(obj, &w) != nil {
		return errorFields{}
	}
	var details struct {
		ErrorCode json.RawMessage `json:"error_code"`
	}
	if isJSONObject(w.Details) {
		_ = json.Unmarshal(w.Details, &details) // a detail of another shape says nothing
	}
	return errorFields{
		code:   lowerToken(scalar(w.Code)),
		typ:    lowerToken(scalar(w.Type)),
		msg:    clip(scalar(w.Message)),
		detail: lowerToken(scalar(details.ErrorCode)),
		param:  strings.TrimSpace(scalar(w.Param)),
	}
}

func lowerToken(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// scalar returns a JSON string's value or a number's text, else "".
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxRawMessage {
		s = s[:maxRawMessage]
	}
	return strings.ToValidUTF8(s, string(utf8.RuneError))
}

// decide returns the class and code of a failed response, and whether
// anything in the body or headers (rather than the status alone) decided
// them. The order matters: see classify.
func decide(status int, f errorFields, wait time.Duration, exact dialect) (Class, string, bool) {
	// A redirect is never followed (NoRedirects), whatever its body says.
	// Like a refused key it concerns the configured endpoint, not the
	// request: every call meets it until someone fixes the base URL, so it
	// is exhausted (the breaker holds tasks queued and alerts) rather than
	// rejected (which would fail each task) or transient.
	if status >= 300 && status < 400 {
		return ClassExhausted, CodeRedirectRefused, true
	}
	msg := strings.ToLower(f.msg)
	if class, code, ok := preciseFailure(status, f, msg, exact); ok {
		return class, code, true
	}
	// 5xx means the server failed; only an explicit code says otherwise.
	if status < 500 {
		if class, code, ok := hintedFailure(status, msg, wait); ok {
			return class, code, true
		}
		if class, code, ok := clientStatus(status); ok {
			return class, code, false
		}
	}
	return genericFailure(status, f, msg)
}

// preciseFailure decides by what names one failure exactly: a request
// larger than any budget, or a code or type the dialect (exact) or every
// dialect knows.
func preciseFailure(status int, f errorFields, msg string, exact dialect) (Class, string, bool) {
	// OpenAI answers a single request larger than the whole per-minute token
	// budget with 429 rate_limit_exceeded, but waiting will never help.
	if status < 500 && strings.Contains(msg, "request too large") {
		return ClassRejected, CodeRequestTooLarge, true
	}
	class, code, ok := exact(f)
	if !ok {
		class, code, ok = sharedCode(f)
	}
	if !ok {
		return "", "", false
	}
	// Exhausted is checked before a rate limit: Anthropic reports a
	// spend limit as rate_limit_error, and waiting will not refill it.
	if class == ClassThrottled && status < 500 && containsAny(msg, creditHints) {
		return ClassExhausted, CodeInsufficientQuota, true
	}
	return class, code, true
}

// hintedFailure decides a client error by the words of its message, in
// the order the cases list (credit before rate limit before quota).
func hintedFailure(status int, msg string, wait time.Duration) (Class, string, bool) {
	switch {
	case containsAny(msg, creditHints):
		return ClassExhausted, CodeInsufficientQuota, true
	case containsAny(msg, rateLimitHints):
		return ClassThrottled, CodeRateLimited, true
	case status == http.StatusTooManyRequests && wait > 0:
		// A quota that comes back after a wait is a rate limit (Gemini
		// says "exceeded your current quota ... retry in 38s").
		return ClassThrottled, CodeRateLimited, true
	case containsAny(msg, quotaHints):
		return ClassExhausted, CodeInsufficientQuota, true
	case containsAny(msg, contextHints):
		return ClassRejected, CodeContextLength, true
	case containsAny(msg, capacityHints):
		return ClassTransient, CodeOverloaded, true
	}
	return "", "", false
}

// clientStatus decides by the client-error statuses that mean one thing
// whatever the body says.
func clientStatus(status int) (Class, string, bool) {
	switch status {
	case http.StatusPaymentRequired:
		return ClassExhausted, CodeInsufficientQuota, true
	case http.StatusRequestTimeout:
		return ClassTransient, CodeRequestTimeout, true
	case http.StatusTooManyRequests:
		return ClassThrottled, CodeRateLimited, true
	}
	return "", "", false
}

// genericFailure decides by a generic code or type, else by the status;
// known reports whether a code or type decided.
func genericFailure(status int, f errorFields, msg string) (class Class, code string, known bool) {
	class, code, known = genericCode(f.code)
	if !known {
		class, code, known = genericCode(f.typ)
	}
	if !known {
		class, code = byStatus(status)
	}
	if class == ClassExhausted && code == CodeForbidden && strings.Contains(msg, "model") {
		// A refusal that names a model is about that model (a plan or an
		// agreement it needs), not the account: other requests may pass.
		class = ClassRejected
	}
	// The provider's own code, when it is one, says more than a category.
	if tok := token(f.code); tok != "" {
		code = tok
	}
	return class, code, known
}

// sharedCode reads the code, then the type, against the codes that mean the
// same in every wire format (OpenAI-compatible servers and proxies also pass
// Anthropic's types through).
func sharedCode(f errorFields) (Class, string, bool) {
	for _, k := range []string{f.code, f.typ} {
		if class, code, ok := preciseCode(k); ok {
			return class, code, true
		}
	}
	return "", "", false
}

// preciseCode knows the codes and types that name one failure exactly.
func preciseCode(k string) (Class, string, bool) {
	switch k {
	case "rate_limit_exceeded", "rate_limit_error", "rate_limited", "too_many_requests":
		return ClassThrottled, CodeRateLimited, true
	case "insufficient_quota", "billing_hard_limit_reached", "billing_not_active",
		"insufficient_credits", "insufficient_balance", "credit_balance_too_low", "payment_required",
		"billing_error", "enforced_spend_limit_reached":
		return ClassExhausted, CodeInsufficientQuota, true
	case "invalid_api_key", "invalid_authentication":
		// The key belongs to the account: every call will fail alike.
		return ClassExhausted, CodeUnauthorized, true
	case "account_deactivated", "account_disabled", "account_suspended":
		return ClassExhausted, CodeAccountDisabled, true
	case "context_length_exceeded", "context_window_exceeded":
		return ClassRejected, CodeContextLength, true
	case "string_above_max_length":
		// OpenAI's own code for one string (a message, an argument) over
		// its length limit: a client that matches on it gets it back.
		return ClassRejected, k, true
	case "content_policy_violation", "content_filter":
		return ClassRejected, CodeContentPolicy, true
	case "overloaded_error", "overloaded", "engine_overloaded":
		return ClassTransient, CodeOverloaded, true
	case "timeout_error":
		// Anthropic's 504: the provider gave up and said so, which is an
		// answer: see CodeUpstreamTimeout.
		return ClassTransient, CodeUpstreamTimeout, true
	}
	return "", "", false
}

// genericCode knows the broad categories, which providers also use for
// failures that belong elsewhere (Anthropic reports a credit balance that is
// too low as invalid_request_error), so they count only after the hints.
func genericCode(k string) (Class, string, bool) {
	switch k {
	case "invalid_request_error", "invalid_request", "bad_request", "badrequesterror":
		return ClassRejected, CodeInvalidRequest, true
	case "authentication_error", "unauthorized":
		return ClassExhausted, CodeUnauthorized, true
	case "permission_error", "permission_denied", "forbidden":
		return ClassExhausted, CodeForbidden, true
	case "not_found_error", "not_found":
		return ClassRejected, CodeNotFound, true
	case "request_too_large":
		return ClassRejected, CodeRequestTooLarge, true
	case "server_error", "api_error", "internal_error", "internal_server_error":
		return ClassTransient, CodeServerError, true
	case "service_unavailable":
		return ClassTransient, CodeUnavailable, true
	}
	return "", "", false
}

func byStatus(status int) (Class, string) {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return ClassRejected, CodeInvalidRequest
	case http.StatusUnauthorized:
		// 401/403 concern the key or the account, which no retry fixes.
		return ClassExhausted, CodeUnauthorized
	case http.StatusPaymentRequired:
		return ClassExhausted, CodeInsufficientQuota
	case http.StatusForbidden:
		return ClassExhausted, CodeForbidden
	case http.StatusNotFound:
		return ClassRejected, CodeNotFound
	case http.StatusRequestEntityTooLarge:
		return ClassRejected, CodeRequestTooLarge
	case http.StatusRequestTimeout:
		return ClassTransient, CodeRequestTimeout
	case http.StatusTooManyRequests:
		return ClassThrottled, CodeRateLimited
	case http.StatusInternalServerError:
		return ClassTransient, CodeServerError
	case http.StatusBadGateway:
		return ClassTransient, CodeBadGateway
	case http.StatusServiceUnavailable:
		return ClassTransient, CodeUnavailable
	case http.StatusGatewayTimeout:
		return ClassTransient, CodeGatewayTimeout
	case 529: // Anthropic and others: overloaded
		return ClassTransient, CodeOverloaded
	}
	switch {
	case status >= 400 && status < 500:
		return ClassRejected, "http_" + strconv.Itoa(status)
	case status >= 200 && status < 300:
		return ClassTransient, CodeMalformedResponse
	case status >= 500 && status < 600:
		return ClassTransient, CodeServerError
	}
	return ClassTransient, "http_" + strconv.Itoa(status)
}

// Hints are lower-case substrings of provider messages, chosen to be robust
// to rewording rather than to match the known bodies one by one.
var (
	// creditHints name an empty account unambiguously.
	creditHints = []string{
		"credit balance", "insufficient credit", "insufficient balance",
		"insufficient funds", "out of credit", "purchase credits", "no credits",
		"payment required", "insufficient_quota", "billing hard limit",
		"billing_hard_limit", "spend limit",
	}
	rateLimitHints = []string{
		"rate limit", "rate_limit", "ratelimit", "too many requests",
		"per minute", "per min ", "per second",
	}
	// quotaHints also appear in rate-limit messages ("add a payment method
	// to increase your rate limit", "visit .../billing"), so they count only
	// after rateLimitHints.
	quotaHints = []string{
		"quota", "billing", "credit", "payment", "used up", "free allocation",
		"usage limit",
	}
	contextHints = []string{
		"context length", "context_length", "context window", "maximum context",
		"prompt is too long", "too many tokens", "reduce the length",
		"exceeds the available context", "input is too long",
	}
	capacityHints = []string{
		"overloaded", "capacity", "temporarily unavailable",
	}
)

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// token returns s when it is a short machine code (a letter, then letters,
// digits, '_', '.', '-'), else "". Numeric codes such as "400" say nothing the
// status does not.
//
// It is the one point a provider's code enters Tollgate (the "vocabulary"
// row of the privacy table, redact.Fields): the code is stored in the
// journal and the replay record, logged and traced, so only a word-shaped
// code passes, at most 64 bytes of words of at most 24 letters with at
// most 4 digits in all. A key, an address or an id in the code field is
// dropped and the classification's own code stands.
func token(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return ""
	}
	digits, word := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			word++
		case c >= '0' && c <= '9':
			digits++
			word++
		case c == '_' || c == '.' || c == '-':
			word = 0
		default:
			return ""
		}
		if word > 24 || digits > 4 {
			return ""
		}
	}
	return s
}

// maxParam bounds a kept Error.Param.
const maxParam = 128

// requestFields are the top-level fields of OpenAI's chat completions
// request: a param must start with one of them.
var requestFields = wordSet(`messages model audio frequency_penalty function_call functions logit_bias
	logprobs max_completion_tokens max_tokens metadata modalities n parallel_tool_calls prediction
	presence_penalty prompt_cache_key reasoning_effort response_format safety_identifier seed
	service_tier stop store stream stream_options temperature tool_choice tools top_logprobs top_p
	user verbosity web_search_options`)

// nestedFields are the names OpenAI's request uses below the top level.
// A schema's property names are the client's own and never among them.
var nestedFields = wordSet(`role content name tool_calls tool_call_id refusal id type function
	arguments description parameters strict text image_url url detail input_audio data format file
	file_id filename file_data json_schema schema include_usage include_obfuscation voice
	search_context_size user_location`)

func wordSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

// requestParam returns the longest leading part of a provider's param that
// is a path of OpenAI request field names and indices ("messages.[0].content",
// "tools[1].function.parameters"), in the provider's own spelling, or "".
// A param is where the provider says the fault is; kept to these names it
// tells the client which field to fix and can carry nothing of the request's
// or the account's content (a schema property name, a key, a message).
func requestParam(s string) string {
	if len(s) > maxParam {
		return ""
	}
	known := 0 // bytes of s that are a path of known names
	for i := 0; i < len(s); {
		if i > 0 && s[i] == '.' {
			i++
		}
		end := paramSegment(s, i, known)
		if end < 0 {
			break
		}
		i, known = end, end
	}
	return s[:known]
}

// paramSegment returns where the segment of s at i ends when it extends
// the known path s[:known]: an index ("[3]") after a name, a request field
// first, a nested field after a dot. It returns -1 for anything else.
func paramSegment(s string, i, known int) int {
	if i < len(s) && s[i] == '[' {
		return indexEnd(s, i, known)
	}
	j := i
	for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] == '_') {
		j++
	}
	name := s[i:j]
	if known == 0 && !requestFields[name] || known > 0 && (!nestedFields[name] || s[i-1] != '.') {
		return -1
	}
	return j
}

// indexEnd returns where the index at s[i] ('[') ends: up to four digits
// and ']', after a known name; -1 otherwise.
func indexEnd(s string, i, known int) int {
	j := i + 1
	for j < len(s) && j-i <= 4 && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if known == 0 || j == i+1 || j >= len(s) || s[j] != ']' {
		return -1
	}
	return j + 1
}

// The figures of a context-length refusal, as providers word it:
//
//	OpenAI:    This model's maximum context length is 128000 tokens. However,
//	           your messages resulted in 130001 tokens. (or "you requested
//	           130001 tokens (…)")
//	vLLM:      … maximum context length is 65536 tokens and your request has
//	           57879 input tokens …
//	Anthropic: prompt is too long: 210000 tokens > 200000 maximum
//
// The figures are kept apart (a window without a count, a count without a
// window) when the message gives only one.
var (
	contextWindowRE = regexp.MustCompile(`(?i)(?:maximum context length|context window|context length|context limit)(?: of this model)? (?:is|of) (\d[\d,]*)`)
	contextTokensRE = regexp.MustCompile(`(?i)(?:resulted in|you requested|request has|prompt has|prompt contains|input has)(?: about)? (\d[\d,]*)(?: input)? tokens`)
	contextPairRE   = regexp.MustCompile(`(?i)(\d[\d,]*) tokens > (\d[\d,]*) maximum`)
	// Workers AI: The estimated number of input and maximum output tokens
	// (8810) exceeded this model context window limit (8192)
	contextLimitRE = regexp.MustCompile(`(?i)(?:tokens \((\d[\d,]*)\) )?exceeded this model context window limit \((\d[\d,]*)\)`)
)

// maxContextFigure bounds a figure read from a message: a larger number is
// no token count, and the bound keeps the figures well inside an int32
// column.
const maxContextFigure = 1_000_000_000

// contextFigures reads the context window and the request's token count
// from a context-length refusal's message, each 0 when the message does
// not give it as a whole number of tokens from 1 to maxContextFigure.
func contextFigures(msg string) (window, tokens int) {
	if m := contextPairRE.FindStringSubmatch(msg); m != nil {
		return contextFigure(m[2]), contextFigure(m[1])
	}
	if m := contextLimitRE.FindStringSubmatch(msg); m != nil {
		return contextFigure(m[2]), contextFigure(m[1])
	}
	if m := contextWindowRE.FindStringSubmatch(msg); m != nil {
		window = contextFigure(m[1])
	}
	if m := contextTokensRE.FindStringSubmatch(msg); m != nil {
		tokens = contextFigure(m[1])
	}
	return window, tokens
}

func contextFigure(digits string) int {
	n, err := strconv.Atoi(strings.ReplaceAll(digits, ",", ""))
	if err != nil || n < 1 || n > maxContextFigure {
		return 0
	}
	return n
}
